"""ConvDensityHead: a small convolutional density head on frozen feature maps at stride 8.

The closed-form heads (:mod:`counting.heads.density.ridge.head`) map one stride-16 cell's channels to its
density. In dense crowds a cell holds several people and the evidence for a head lies in its
neighbours, so this head reads a finer grid (stride 8: block4's own resolution, coarser layers
upsampled bilinearly onto it) through a few 3x3 convolutions:

    standardised channels -> 1x1 conv to ``width`` -> ReLU -> ``depth`` x (3x3 conv -> ReLU)
    -> 1x1 conv to one channel -> softplus / ``output_scale``

Its parameters are plain float arrays (``weights``, in the order of :func:`parameter_shapes`), so
a model file holds them without pickle. A head may be an ensemble: ``more_weights`` holds further
networks of the same shape (trained on other folds of the train images), and the density is the
mean of all members' densities; inference runs them through torch, with a trunk's output
never leaving float32. The trunk is not trained: the head learns from cached maps
(:mod:`counting.heads.density.conv.fitting`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from counting.heads.crowd.people_mask import PeopleMask
from counting.heads.crowd.routing import SetRouter
from counting.heads.density.ridge.head import MapHead
from counting.heads.familiarity import map_statistics

__all__ = ["CONV_STRIDE", "ConvDensityHead", "build_network", "ensemble", "folded_weights", "parameter_shapes"]

CONV_STRIDE = 8
# Rows of the grid run through the network at once: bounds the activations (width x rows x cols
# float32) to some tens of MB on a 1024x768 image.
_BATCH = 4


def parameter_shapes(channels: int, width: int, depth: int) -> list[tuple[int, ...]]:
    """Shapes of the head's arrays: (weight, bias) of each convolution, input side first."""
    shapes: list[tuple[int, ...]] = [(width, channels, 1, 1), (width,)]
    for _ in range(depth):
        shapes += [(width, width, 3, 3), (width,)]
    return shapes + [(1, width, 1, 1), (1,)]


def build_network(channels: int, width: int, depth: int, members: int = 1) -> torch.nn.Sequential:
    """The head as a torch module (float32, randomly initialised). ``members`` > 1: that many
    independent heads in one module (grouped convolutions), output channel k being head k's."""
    wide = width * members
    layers: list[torch.nn.Module] = [torch.nn.Conv2d(channels, wide, 1), torch.nn.ReLU(inplace=True)]
    for _ in range(depth):
        layers += [torch.nn.Conv2d(wide, wide, 3, padding=1, groups=members), torch.nn.ReLU(inplace=True)]
    layers += [torch.nn.Conv2d(wide, members, 1, groups=members), torch.nn.Softplus()]
    return torch.nn.Sequential(*layers)


def folded_weights(weights: list[np.ndarray], x_mean: np.ndarray, x_scale: np.ndarray) -> list[np.ndarray]:
    """A network's arrays (float64) with the input standardisation folded into its first conv:
    (x - mean) / scale through a 1x1 conv = a conv with weights / scale and a shifted bias."""
    arrays = [np.asarray(item, dtype=np.float64) for item in weights]
    first = arrays[0] * (1.0 / np.asarray(x_scale, dtype=np.float64))[None, :, None, None]
    return [first, arrays[1] - first[:, :, 0, 0] @ x_mean, *arrays[2:]]


@dataclass
class ConvDensityHead(MapHead):
    """A trained conv density head (see module docstring).

    ``layers`` are the backbone maps it reads, concatenated in this order on the stride-8 grid;
    ``x_mean``/``x_scale`` standardise their channels; the network's output divided by
    ``output_scale`` is people per grid cell. ``more_weights``: the other members of an ensemble
    (same shapes and standardisation), averaged with ``weights``. ``settings`` records how it was
    trained.
    """

    layers: tuple[str, ...]
    width: int
    depth: int
    x_mean: np.ndarray
    x_scale: np.ndarray
    weights: list[np.ndarray]
    output_scale: float = 100.0
    settings: dict[str, Any] = field(default_factory=dict)
    more_weights: list[list[np.ndarray]] = field(default_factory=list)
    # Heads trained on one set each (set name -> head on the same layers), mixed into the density
    # by ``router`` (counting.heads.crowd.routing); empty: the head alone.
    specialists: dict[str, ConvDensityHead] = field(default_factory=dict)
    router: SetRouter | None = None
    kind: str = "conv"
    stride: int = CONV_STRIDE
    # Which cells hold people (counting.heads.crowd.people_mask): the head's density is kept in
    # proportion, so textures it reads as a distant crowd lose their mass. A crowd model's general
    # heads trained with CrowdSettings.people_mask have one (the shipped one's do not); a
    # specialist, trained on its own scenes, never has.
    people_mask: PeopleMask | None = None

    def __post_init__(self) -> None:
        self._networks: list[torch.nn.Sequential] | None = None
        # The arrays the cached networks were built from (held, so compared by identity).
        self._built_from: tuple[Any, ...] = ()

    @property
    def members(self) -> list[list[np.ndarray]]:
        """Every network's arrays: ``weights`` first, then ``more_weights``."""
        return [self.weights, *self.more_weights]

    def networks(self) -> list[torch.nn.Sequential]:
        """One torch module per member, input standardisation folded into its first conv."""
        return [self._network_of(member) for member in self.members]

    def fused_network(self) -> torch.nn.Sequential:
        """Every member in one torch module (its output channel k is member k's density):
        the first convs side by side, the rest grouped by member. One grouped convolution runs
        faster than K small ones (four members on a 1024x768 photo's maps: 14.6-16.8 -> 11.4-11.6 ms,
        scripts/bench_crowd_speed.py).

        Built once, and again when a member or the standardisation is replaced (an ensemble is
        assembled by assigning ``more_weights`` to a head that may have counted already)."""
        source = (self.x_mean, self.x_scale, *(array for member in self.members for array in member))
        if (
            self._networks is None
            or len(source) != len(self._built_from)
            or any(mine is not theirs for mine, theirs in zip(source, self._built_from, strict=True))
        ):
            self._networks = [self._fused_of(self.members)]
            self._built_from = source
        return self._networks[0]

    def _network_of(self, weights: list[np.ndarray]) -> torch.nn.Sequential:
        return self._fused_of([weights])

    def _fused_of(self, members: list[list[np.ndarray]]) -> torch.nn.Sequential:
        network = build_network(self.n_channels, self.width, self.depth, members=len(members))
        folded = [folded_weights(weights, self.x_mean, self.x_scale) for weights in members]
        with torch.no_grad():
            # Each parameter of the fused module is the members' arrays stacked on the output axis.
            for position, parameter in enumerate(network.parameters()):
                value = np.concatenate([arrays[position] for arrays in folded], axis=0)
                parameter.copy_(torch.from_numpy(value.astype(np.float32)))
        network.eval()
        return network

    def density(self, maps: np.ndarray) -> np.ndarray:
        """``(n, C, h, w)`` stride-8 feature maps -> ``(n, h, w)`` density maps (people per cell),
        the mean over the members of an ensemble; with specialists, mixed with theirs by the
        router's weights for each picture (its maps' statistics say which set it resembles)."""
        array = self.check_maps(maps)
        if self.router is None or not self.specialists:
            return self._own_density(array)
        names = list(self.specialists)
        heads = [self._own_density, *(self.specialists[name].density for name in names)]
        tiles = self._tiles(array.shape[-2:])
        if len(tiles) > 1:
            return self._density_by_tiles(array, tiles, names, heads)
        weights = self.router.mixture(map_statistics(array), names)
        density = np.zeros((array.shape[0], *array.shape[2:]), dtype=np.float64)
        for column, head_density in enumerate(heads):
            chosen = np.flatnonzero(weights[:, column])
            if chosen.size:
                density[chosen] += weights[chosen, column, None, None] * head_density(array[chosen])
        return density

    def member_densities(self, maps: np.ndarray) -> np.ndarray:
        """``(1 + specialists, n, h, w)``: the general head's density maps, then each specialist's
        (in ``specialists`` order, the router's columns), unmixed: what :meth:`density` mixes by
        the router's weights (scripts/studies/router_regions_study.py mixes them by other regions)."""
        array = self.check_maps(maps)
        return np.stack([self._own_density(array), *(head.density(array) for head in self.specialists.values())])

    def _tiles(self, grid: tuple[int, ...]) -> list:
        """The COCO detector's tiles of the picture behind maps of ``grid`` ``(h, w)`` (one within 2:1)."""
        from counting.features.detector.evidence import map_tiles

        return map_tiles(grid, self.stride)

    def _density_by_tiles(self, array: np.ndarray, tiles: list, names: list[str], heads: list) -> np.ndarray:
        """The router's mixture read tile by tile: a picture wider than 2:1 (a panorama, photos
        side by side) is routed as the photos of at most 2:1 the router learnt on, each tile's
        core by its own maps' statistics. Read whole, a ShanghaiTech B crowd (234 people, counted
        222.6 alone) beside a people-free photo was routed to the general head and counted 162.1;
        routed tile by tile, 223.3 (docs/density.md, "Wide pictures: tile by tile")."""
        from counting.features.detector.evidence import core_cells

        along_rows = tiles[0].along_rows
        inside = core_cells(array.shape[-2] if along_rows else array.shape[-1], tiles)
        parts = [array[:, :, cells] if along_rows else array[:, :, :, cells] for cells in inside]
        # (tiles, n, heads): each picture's weights in each tile; then each cell takes its tile's.
        weights = np.stack([self.router.mixture(map_statistics(part), names) for part in parts])
        by_cell = weights[inside.argmax(axis=0)]  # (cells along the long side, n, heads)
        density = np.zeros((array.shape[0], *array.shape[2:]), dtype=np.float64)
        for column, head_density in enumerate(heads):
            share = by_cell[:, :, column].T  # (n, cells)
            chosen = np.flatnonzero(share.any(axis=1))
            if chosen.size:
                spread = share[chosen][:, :, None] if along_rows else share[chosen][:, None, :]
                density[chosen] += spread * head_density(array[chosen])
        return density

    def _own_density(self, array: np.ndarray) -> np.ndarray:
        network = self.fused_network()
        out = np.zeros((array.shape[0], *array.shape[2:]), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(array), _BATCH):
                chunk = torch.from_numpy(np.ascontiguousarray(array[start : start + _BATCH], dtype=np.float32))
                out[start : start + len(chunk)] = network(chunk).double().sum(dim=1).numpy()
        out /= self.output_scale * len(self.members)
        if self.people_mask is not None:
            out *= self.people_mask.weights(array)
        return out


def ensemble(heads: list[ConvDensityHead]) -> ConvDensityHead:
    """One head counting with the mean density of ``heads`` (same layers, shapes and
    standardisation, as :func:`counting.heads.density.conv.fitting.fit_conv_heads` trains them); the
    first head's settings."""
    return replace(heads[0], more_weights=[head.weights for head in heads[1:]])
