"""NetworkDensityHead: the trained crowd network as a density head on the backbone's block-4 map.

The crowd network (:mod:`counting.heads.density.network.module`) is EfficientNet-Lite0 with its
blocks 0-4 frozen and blocks 5-10 and a decoder trained. Its frozen part is exactly what the
count's backbone already runs (the packaged ImageNet file, on ONNX Runtime or torch), so the head
reads the backbone's ``block4`` map at stride 8 and holds the trained part only: blocks 5-10 and
the decoder, as float arrays under their torch names (no pickle), run through torch here.

It is a map head like the others: the count sums its density over the ROI and grid cells, the
familiarity score and the sparse gate read statistics of the map it reads (block 4's), and its
density feeds the annotated pictures. It has no router, specialists or people mask: the network
was trained on every set and every degradation at once (issue 48).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from counting.heads.density.network.module import LOWER_TAP, NETWORK_STRIDE, CrowdNetwork
from counting.heads.density.ridge.head import MapHead

__all__ = ["NetworkDensityHead", "network_shapes"]

# Rows of pictures through the network at once: bounds the activations on large pictures.
_BATCH = 4


def network_shapes(width: int, depth: int) -> dict[str, tuple[int, ...]]:
    """The trained arrays' names and shapes for a decoder of ``width`` and ``depth``."""
    network = CrowdNetwork(width=width, depth=depth, pretrained=False)
    return {name: tuple(value.shape) for name, value in network.trained_arrays().items()}


@dataclass
class NetworkDensityHead(MapHead):
    """The trained part of a crowd network (module docstring). ``arrays``: name -> float32 array
    (:meth:`CrowdNetwork.trained_arrays`); ``x_mean`` is zeros of block 4's channels (the network
    standardises inside: what MapHead's channel count and the map checks read)."""

    arrays: dict[str, np.ndarray]
    width: int
    depth: int
    x_mean: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)
    layers: tuple[str, ...] = (LOWER_TAP,)
    kind: str = "network"
    stride: int = NETWORK_STRIDE
    router: None = None
    people_mask: None = None

    def __post_init__(self) -> None:
        self._network: CrowdNetwork | None = None

    @property
    def specialists(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_network(cls, network: CrowdNetwork, settings: dict[str, Any] | None = None) -> NetworkDensityHead:
        """The head of a trained network (its weights as they are: pass the averaged network)."""
        arrays = {
            name: value.detach().cpu().numpy().astype(np.float32) for name, value in network.trained_arrays().items()
        }
        channels = int(network.lower[-1]._block_args.output_filters)
        return cls(arrays, network.width, network.depth, np.zeros(channels), dict(settings or {}))

    def network(self) -> CrowdNetwork:
        """The torch module (built once; the frozen part stays untouched and unused)."""
        if self._network is None:
            network = CrowdNetwork(width=self.width, depth=self.depth, pretrained=False)
            network.load_trained_arrays(
                {name: torch.from_numpy(np.asarray(value, np.float32)) for name, value in self.arrays.items()}
            )
            self._network = network.eval()
        return self._network

    def density(self, maps: np.ndarray) -> np.ndarray:
        """``(n, 40, h, w)`` block-4 maps -> ``(n, h, w)`` people per stride-8 cell."""
        array = self.check_maps(maps)
        network = self.network()
        out = np.zeros((array.shape[0], *array.shape[2:]), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(array), _BATCH):
                chunk = torch.from_numpy(np.ascontiguousarray(array[start : start + _BATCH], dtype=np.float32))
                out[start : start + len(chunk)] = network.from_lower(chunk).double().numpy()
        return out
