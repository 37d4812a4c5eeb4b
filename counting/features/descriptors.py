"""Descriptor kinds: what one image becomes before the regressor sees it.

- ``scores``: the backbone's 1000 ImageNet class scores of the whole frame (the default).
- ``pooled``: the trunk's final feature map average-pooled (the fc layer's input).
- ``detector``: per-class counts, soft counts and heat mass of the COCO detector
  (:mod:`counting.features.detector`; its own network, the ``centernet`` backbone).
- ``detector-letterbox``: the same columns from the detector fed the picture with its aspect
  kept (the ``centernet-letterbox`` backbone; more accurate on coco-voc20, same cost).
- ``sum:LAYERS`` / ``mean:LAYERS``: named feature maps (``block0``..``block15``, ``final`` for
  EfficientNet-Lite0) summed (or averaged) over the region of interest, per cell of a pyramid,
  optionally weighted by a perspective map, several layers concatenated.

A count is an *extensive* quantity: it adds up over the image. A sum of a mid-level feature map
over the ROI grows with the number of people in it, where average-pooled class scores saturate.
The perspective map (Mall's ``pMapN``) weights far-away pixels up, so a person adds about the
same to the sum wherever they stand.

Spec strings (``--descriptor``): ``KIND[:LAYER+LAYER...][,perspective][,levels=1+2+...]``, e.g.
``sum:block10``, ``sum:block10+final,perspective,levels=1+2``. ``levels`` lists square grids
whose cells each get their own sums (``1`` = the whole frame only; ``1+2`` = frame and 2x2).

All the sums of one image come from one trunk pass (:meth:`Backbone.feature_maps`). The ROI
weight of a feature-map pixel is the fraction of its area inside the ROI mask; the perspective
weight the map's average over that area. Both are stored in the model file (the ROI mask by the
model, the perspective map here, compactly), so ``count`` and ``video`` reproduce the descriptor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from counting.core.errors import CountingError

__all__ = [
    "DESCRIPTOR_KINDS",
    "DETECTOR_KINDS",
    "Descriptor",
    "DescriptorError",
    "DescriptorSpec",
    "compact_map",
    "expand_map",
    "as_descriptor",
    "parse_descriptor",
    "region_sums",
]

DESCRIPTOR_KINDS = ("scores", "pooled", "sum", "mean", "detector", "detector-letterbox")
# Kinds computed by their own network instead of the --backbone (kind -> backbone name).
OWN_BACKBONE = {"detector": "centernet", "detector-letterbox": "centernet-letterbox"}
# Kinds whose columns are the detector's per-class quantities (counting.features.detector.descriptor).
DETECTOR_KINDS = ("detector", "detector-letterbox")
MAP_KINDS = ("sum", "mean")
MAX_LEVEL = 8  # cells per side of the finest pyramid level
# Rows (and columns) of the compact perspective map kept in a model file: the map is smooth.
COMPACT_SIDE = 96
PROFILE_ROWS = 2048


class DescriptorError(CountingError, ValueError):
    """A descriptor spec that cannot be parsed or used (one line, naming the spec)."""


@dataclass(frozen=True)
class DescriptorSpec:
    """A parsed ``--descriptor`` string (see the module docstring)."""

    kind: str = "scores"
    layers: tuple[str, ...] = ()
    perspective: bool = False
    levels: tuple[int, ...] = (1,)

    @property
    def uses_maps(self) -> bool:
        """Sums/means of named feature maps (not the backbone's classic outputs)."""
        return self.kind in MAP_KINDS

    @property
    def text(self) -> str:
        """The canonical spec string (parses back to an equal spec)."""
        if not self.uses_maps:
            return self.kind
        text = f"{self.kind}:{'+'.join(self.layers)}"
        if self.perspective:
            text += ",perspective"
        if self.levels != (1,):
            text += ",levels=" + "+".join(str(level) for level in self.levels)
        return text

    def __str__(self) -> str:
        return self.text


def parse_descriptor(text: str | DescriptorSpec | None) -> DescriptorSpec:
    """``"sum:block10+final,perspective,levels=1+2"`` -> DescriptorSpec; DescriptorError on bad text."""
    if text is None:
        return DescriptorSpec()
    if isinstance(text, DescriptorSpec):
        return text
    source = str(text).strip()
    head, *options = [part.strip() for part in source.split(",")]
    kind, _, layer_text = head.partition(":")
    kind = kind.strip().lower()
    if kind not in DESCRIPTOR_KINDS:
        raise DescriptorError(
            f"descriptor {source!r}: unknown kind {kind!r} (expected one of {', '.join(DESCRIPTOR_KINDS)})"
        )
    if kind not in MAP_KINDS:
        if layer_text or options:
            raise DescriptorError(f"descriptor {source!r}: {kind!r} takes no layers or options")
        return DescriptorSpec(kind=kind)
    layers = tuple(name.strip() for name in layer_text.split("+")) if layer_text.strip() else ()
    if not layers or any(not name for name in layers):
        raise DescriptorError(f"descriptor {source!r}: name the feature maps, e.g. {kind}:block10+final")
    if len(set(layers)) != len(layers):
        raise DescriptorError(f"descriptor {source!r}: a feature map is named twice")
    perspective = False
    levels: tuple[int, ...] = (1,)
    for option in options:
        name, _, value = option.partition("=")
        name = name.strip().lower()
        if name == "perspective" and not value:
            perspective = True
        elif name == "levels" and value:
            parts = value.split("+")
            if not all(part.strip().isdigit() for part in parts):
                raise DescriptorError(f"descriptor {source!r}: levels must be cells per side joined by '+', e.g. 1+2")
            levels = tuple(int(part) for part in parts)
            if any(not 1 <= level <= MAX_LEVEL for level in levels) or len(set(levels)) != len(levels):
                raise DescriptorError(f"descriptor {source!r}: levels must be distinct, from 1 to {MAX_LEVEL}")
        else:
            raise DescriptorError(
                f"descriptor {source!r}: unknown option {option!r} (expected perspective or levels=...)"
            )
    return DescriptorSpec(kind=kind, layers=layers, perspective=perspective, levels=levels)


def compact_map(values: np.ndarray, side: int = COMPACT_SIDE) -> dict[str, Any]:
    """A smooth ``(H, W)`` weight map as a small JSON-ready dict (area-averaged to ``side``).

    A map constant along its rows (Mall's ``pMapN`` depends on the image row only) keeps one
    column, at full height. :func:`expand_map` gives the map back at its full size.
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.size == 0 or not np.isfinite(array).all():
        raise DescriptorError(f"perspective map: expected a finite 2-D array, got shape {array.shape}")
    height, width = array.shape
    one_column = np.allclose(array, array[:, :1], rtol=1e-6, atol=0)
    columns = 1 if one_column else min(width, side)
    # A one-column map is small even at full height (Mall: 480 numbers): kept exactly.
    rows = min(height, PROFILE_ROWS if one_column else side)
    small = (
        cv2.resize(array, (columns, rows), interpolation=cv2.INTER_AREA) if (rows, columns) != array.shape else array
    )
    small = np.asarray(small, dtype=np.float64).reshape(rows, columns)
    return {"shape": [height, width], "values": [[float(f"{v:.6g}") for v in row] for row in small]}


def expand_map(code: dict[str, Any]) -> np.ndarray:
    """Inverse of :func:`compact_map`: the map at its recorded full size, float32."""
    height, width = (int(side) for side in code["shape"])
    small = np.asarray(code["values"], dtype=np.float64)
    if small.ndim != 2 or small.size == 0 or height < 1 or width < 1 or not np.isfinite(small).all():
        raise DescriptorError(f"perspective map: malformed compact map of shape {small.shape}")
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR).astype(np.float32)


def _cell_membership(size: int, parts: int) -> np.ndarray:
    """``(parts, size)`` 0/1 matrix: cell ``i`` holds pixels ``[floor(i*size/parts), floor((i+1)*size/parts))``.

    A partition (no overlap), so the cells of a level sum to the whole frame."""
    edges = (np.arange(parts + 1) * size) // parts
    pixels = np.arange(size)
    return ((pixels >= edges[:-1, None]) & (pixels < edges[1:, None])).astype(np.float32)


def region_sums(fmap: np.ndarray, weight: np.ndarray, levels: tuple[int, ...], mean: bool = False) -> np.ndarray:
    """``(B, C, h, w)`` maps and an ``(h, w)`` weight -> ``(B, sum(L*L for L in levels) * C)``.

    Per level ``L``, per cell of its ``L x L`` grid (row-major), the weighted sum of each
    channel; ``mean`` divides by the cell's total weight (0 where a cell has no weight).
    """
    from counting.features.backbones.base import single_threaded_blas

    batch, channels, height, width = fmap.shape
    weight = np.asarray(weight, dtype=np.float32)
    weighted = np.asarray(fmap, dtype=np.float32) * weight[None, None]
    parts = []
    with single_threaded_blas():
        for level in levels:
            rows, cols = _cell_membership(height, level), _cell_membership(width, level)
            # Two plain products (columns, then rows): measured 400x faster than np.einsum's
            # path on a (16, 40, 60, 80) map, which it turned into a large intermediate.
            per_cell = np.matmul(rows, weighted @ cols.T)  # (B, C, level, level)
            sums = per_cell.transpose(0, 2, 3, 1).reshape(batch, level * level, channels)
            if mean:
                total = (rows @ weight @ cols.T).reshape(level * level, 1)
                sums = np.divide(sums, total, out=np.zeros_like(sums), where=total > 0)
            parts.append(sums.reshape(batch, level * level * channels))
    return np.concatenate(parts, axis=1).astype(np.float32, copy=False)


@dataclass
class Descriptor:
    """A descriptor spec plus what it needs besides the image (the perspective map).

    Build with :meth:`build` (checks the spec against the available perspective map).
    """

    spec: DescriptorSpec = field(default_factory=DescriptorSpec)
    perspective_code: dict[str, Any] | None = None  # compact_map() of the perspective map
    _weights: dict[tuple, tuple[Any, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)
    _perspective: np.ndarray | None = field(default=None, repr=False, compare=False)
    _dims: dict[tuple, int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(
        cls, spec: str | DescriptorSpec | None, perspective_map: np.ndarray | None = None, source: str = "dataset"
    ) -> Descriptor:
        """The descriptor of ``spec``; ``perspective_map`` (full-size) is kept only if the spec weights by it."""
        parsed = parse_descriptor(spec)
        if not parsed.perspective:
            return cls(parsed)
        if perspective_map is None:
            raise DescriptorError(f"descriptor {parsed.text!r}: {source} has no perspective map (drop ',perspective')")
        return cls(parsed, compact_map(perspective_map))

    @property
    def uses_maps(self) -> bool:
        return self.spec.uses_maps

    @property
    def pooled(self) -> bool:
        return self.spec.kind == "pooled"

    @property
    def text(self) -> str:
        return self.spec.text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record for the model file."""
        return {"spec": self.spec.text, "perspective_map": self.perspective_code}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Descriptor:
        spec = parse_descriptor(data["spec"])
        code = data.get("perspective_map")
        if spec.perspective and code is None:
            raise DescriptorError(f"descriptor {spec.text!r}: the model file lacks its perspective map")
        descriptor = cls(spec, code if spec.perspective else None)
        if code is not None and spec.perspective:
            descriptor.perspective_full()  # a malformed map fails at load, not at the first count
        return descriptor

    def fingerprint(self) -> dict[str, Any] | str:
        """What decides the descriptor besides backbone and preprocessing (cache key content)."""
        if not self.uses_maps:
            return self.spec.kind
        code = None
        if self.perspective_code is not None:
            code = hashlib.sha256(repr(self.perspective_code).encode()).hexdigest()
        return {"spec": self.spec.text, "perspective_sha256": code}

    def check(self, backbone: Any) -> None:
        """DescriptorError unless every named map exists in ``backbone`` (or it is the kind's own network)."""
        own = OWN_BACKBONE.get(self.spec.kind)
        if own is not None and backbone.name != own:
            raise DescriptorError(f"descriptor {self.spec.text!r} comes from the {own} network, not {backbone.name}")
        known = ["final", *getattr(backbone, "taps", {})]
        for name in self.spec.layers:
            if name not in known:
                raise DescriptorError(
                    f"descriptor {self.spec.text!r}: {backbone.name} has no feature map {name!r} (known: {', '.join(known)})"
                )

    def dim(self, backbone: Any) -> int:
        """Length of one image's descriptor with ``backbone``."""
        if self.spec.kind in ("scores", *DETECTOR_KINDS):
            return int(backbone.feature_dim)
        if self.spec.kind == "pooled":
            return int(backbone.pooled_dim)
        self.check(backbone)
        key = (backbone.name, self.spec.layers)
        if key not in self._dims:
            # The channel counts from a tiny probe pass (one export per list of maps, reused later).
            maps = backbone.feature_maps(np.zeros((1, 3, 64, 64), np.float32), self.spec.layers)
            self._dims[key] = sum(int(maps[name].shape[1]) for name in self.spec.layers)
        cells = sum(level * level for level in self.spec.levels)
        return cells * self._dims[key]

    def perspective_full(self) -> np.ndarray | None:
        if self.perspective_code is None:
            return None
        if self._perspective is None:
            self._perspective = expand_map(self.perspective_code)
        return self._perspective

    def weight(self, size: tuple[int, int], roi_mask: np.ndarray | None) -> np.ndarray:
        """``(h, w)`` weight of a feature map's pixels: ROI area fraction x mean perspective."""
        height, width = size
        key = (height, width, None if roi_mask is None else id(roi_mask))
        cached = self._weights.get(key)
        if cached is not None and cached[0] is roi_mask:
            return cached[1]
        weight = np.ones((height, width), np.float32)
        if roi_mask is not None:
            weight *= cv2.resize(np.asarray(roi_mask, np.float32), (width, height), interpolation=cv2.INTER_AREA)
        perspective = self.perspective_full()
        if perspective is not None:
            weight *= cv2.resize(perspective, (width, height), interpolation=cv2.INTER_AREA)
        if len(self._weights) > 32:  # many image sizes: keep the memory bounded
            self._weights.clear()
        # The mask itself is kept beside its weight: an id is only unique while it lives.
        self._weights[key] = (roi_mask, weight)
        return weight

    def from_maps(self, maps: dict[str, np.ndarray], roi_mask: np.ndarray | None) -> np.ndarray:
        """Descriptors ``(B, D)`` from named feature maps of one batch (layers in spec order)."""
        parts = []
        for name in self.spec.layers:
            fmap = maps[name]
            weight = self.weight(fmap.shape[2:], roi_mask)
            parts.append(region_sums(fmap, weight, self.spec.levels, mean=self.spec.kind == "mean"))
        return np.concatenate(parts, axis=1)

    def compute(self, backbone: Any, batch: Any, roi_mask: np.ndarray | None = None) -> np.ndarray:
        """Descriptors ``(B, D)`` of a batch of prepared images: one trunk pass."""
        if self.spec.kind in ("scores", *DETECTOR_KINDS):
            return backbone.forward(batch)
        if self.spec.kind == "pooled":
            return backbone.forward_pooled(batch)
        self.check(backbone)
        return self.from_maps(backbone.feature_maps(batch, self.spec.layers), roi_mask)


def as_descriptor(value: Descriptor | DescriptorSpec | str | None, pooled: bool = False) -> Descriptor:
    """A Descriptor from what callers pass (``None``: scores, or pooled with the old flag)."""
    if isinstance(value, Descriptor):
        return value
    if value is None:
        return Descriptor(DescriptorSpec(kind="pooled" if pooled else "scores"))
    return Descriptor.build(value)
