"""Per-class density heads for multi-class counting (VOC): boxes as supervision, not just counts.

An image-level regressor learns 20 counts from one descriptor per photo (419 rows on the
coco-voc20 split). Here every cell of a late feature map is a supervised row: each annotated
box puts mass 1 for its class onto the map grid (its centre as a dot, a Gaussian whose sigma
follows the box size, or spread uniformly over the box), and a linear map from the cell's
standardised channels to the 20 class densities is fitted in closed form. A class's count is
the sum of its map.

The maps are on their own grid (stride 32: the final 1280-channel map and blocks 11-15 are at
that resolution; finer layers are average-pooled onto it), cached per layer in the feature
cache under their own key (:mod:`counting.heads.density.maps` keeps stride 16 for Mall/ShanghaiTech).

The fit is the Gram-matrix machinery of :mod:`counting.heads.density.ridge.fitting` with a 20-column
right-hand side: Gram matrices are accumulated image by image *per fold*, so a head fitted
without any set of folds is one Cholesky solve (total minus those folds) for all 20 classes,
and an image's region sums of its features give its counts under any such head without another
pass over its cells. The ridge penalty is chosen per class on out-of-fold counts.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.linalg

from counting.core.errors import ModelFileError
from counting.features.backbones import Backbone, Preprocessing
from counting.features.cache import FeatureCache
from counting.features.extract import batch_shape
from counting.heads.density.maps import extract_maps, head_grid, resample
from counting.heads.density.regions import region_weights
from counting.heads.density.ridge.fitting import channel_statistics
from counting.heads.density.ridge.head import MapHead
from counting.heads.density.sections import checked_layers, checked_settings, decode_array, encode_array
from counting.heads.density.targets import density_map

__all__ = [
    "CLASS_MAP_STRIDE",
    "PENALTIES",
    "SPREADS",
    "ClassDensityHead",
    "ClassGrams",
    "accumulate_grams",
    "class_head_from_document",
    "class_head_to_document",
    "fit_class_head",
    "annotation_path",
    "class_density_targets",
    "class_grid",
    "extract_class_maps",
    "read_boxes",
]

CLASS_MAP_STRIDE = 32
# Ridge penalties relative to the mean diagonal of the Gram matrix (channels are standardised).
PENALTIES = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
# How a box's mass is laid on the grid: its centre (all in the cell holding it), a Gaussian with
# sigma = 1/4 of the box side (about the box's own spread), or uniform over the box.
SPREADS = ("dot", "gauss", "box")


def class_grid(input_size: tuple[int, int]) -> tuple[int, int]:
    """``(h, w)`` of the stride-32 grid for a network input of ``(height, width)`` pixels."""
    return head_grid(input_size, CLASS_MAP_STRIDE)


# -- boxes and targets ------------------------------------------------------------------------


def read_boxes(xml_path: str | os.PathLike[str], class_names: Sequence[str], include_difficult: bool = False):
    """``(k, 4)`` xmin, ymin, xmax, ymax and ``(k,)`` class indices of a VOC annotation's objects.

    The same objects as :func:`counting.data.datasets.voc.count_objects` counts (difficult ones left
    out by default); the annotation was already validated by the dataset reader.
    """
    index = {name: i for i, name in enumerate(class_names)}
    boxes, labels = [], []
    for obj in ElementTree.parse(xml_path).getroot().iter("object"):
        if not include_difficult and (obj.findtext("difficult") or "0").strip() == "1":
            continue
        box = obj.find("bndbox")
        assert box is not None
        boxes.append([float(box.findtext(tag) or "nan") for tag in ("xmin", "ymin", "xmax", "ymax")])
        labels.append(index[(obj.findtext("name") or "").strip()])
    return np.array(boxes, dtype=float).reshape(-1, 4), np.array(labels, dtype=int)


def _box_masses(low: np.ndarray, high: np.ndarray, length: float, cells: int) -> np.ndarray:
    """``(k, cells)``: the share of each interval ``[low, high]`` of ``[0, length]`` in each cell."""
    edges = np.linspace(0.0, length, cells + 1)
    low = np.clip(low, 0.0, length)
    high = np.maximum(np.clip(high, 0.0, length), low + 1e-6)
    overlap = np.clip(np.minimum(high[:, None], edges[None, 1:]) - np.maximum(low[:, None], edges[None, :-1]), 0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def class_density_targets(
    boxes: np.ndarray,
    labels: np.ndarray,
    image_size: tuple[int, int],
    map_size: tuple[int, int],
    n_classes: int,
    spread: str = "gauss",
) -> np.ndarray:
    """``(K, h, w)`` per-class densities of an ``(H, W)`` image's boxes; class k sums to its count."""
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {', '.join(SPREADS)}, got {spread!r}")
    height, width = image_size
    rows, cols = map_size
    out = np.zeros((n_classes, rows, cols))
    for k in np.unique(labels):
        chosen = np.asarray(boxes, dtype=float)[labels == k]
        if spread == "box":
            along_x = _box_masses(chosen[:, 0], chosen[:, 2], width, cols)
            along_y = _box_masses(chosen[:, 1], chosen[:, 3], height, rows)
            out[k] = along_y.T @ along_x
            continue
        centres = np.stack([(chosen[:, 0] + chosen[:, 2]) / 2, (chosen[:, 1] + chosen[:, 3]) / 2], axis=1)
        side = np.sqrt(np.clip(chosen[:, 2] - chosen[:, 0], 1, None) * np.clip(chosen[:, 3] - chosen[:, 1], 1, None))
        sigmas = 0.0 if spread == "dot" else side / 4.0
        out[k] = density_map(centres, (height, width), map_size, sigmas)
    return out


# -- maps -------------------------------------------------------------------------------------


def extract_class_maps(
    paths: Sequence[str | os.PathLike[str]],
    backbone: Backbone,
    prep: Preprocessing,
    layers: Sequence[str],
    cache: FeatureCache | None = None,
    batch_size: int = 8,
    progress: bool = False,
    errors: dict[str, str] | None = None,
) -> list[np.ndarray]:
    """``(C, h, w)`` float32 maps of ``layers`` on the stride-32 grid, one per image (cached per layer):
    :func:`counting.heads.density.maps.extract_maps` at that stride.

    Images that cannot be read raise an ImageError, or, given an ``errors`` dict, are recorded
    there (path -> one-line message) and get None in place of a map.
    """
    found = extract_maps(
        paths,
        backbone,
        prep,
        layers,
        cache,
        batch_size,
        progress=progress,
        on_error="raise" if errors is None else "skip",
        stride=CLASS_MAP_STRIDE,
    )
    if errors is not None:
        errors.update(found.errors)
    return found.maps  # type: ignore[return-value]


# -- the head ---------------------------------------------------------------------------------


@dataclass
class ClassDensityHead(MapHead):
    """A fitted linear per-cell regressor from standardised channels to ``K`` class densities."""

    layers: tuple[str, ...]
    x_mean: np.ndarray  # (C,)
    x_scale: np.ndarray  # (C,)
    coef: np.ndarray  # (C, K)
    intercept: np.ndarray  # (K,)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return int(self.coef.shape[1])

    def density(self, maps: np.ndarray) -> np.ndarray:
        """``(C, h, w)`` map -> ``(K, h, w)`` class densities (objects per cell)."""
        channels, rows, cols = maps.shape
        if channels != self.n_channels:
            raise ValueError(f"expected {self.n_channels}-channel maps, got {channels}")
        pixels = (maps.reshape(channels, -1).T - self.x_mean) / self.x_scale
        return (pixels @ self.coef + self.intercept).T.reshape(self.n_classes, rows, cols)

    def region_counts(self, maps: np.ndarray) -> np.ndarray:
        """``(K * (1 + cells),)``: class by class, its whole-image sum, then its sums over the grid's cells."""
        density = self.density(maps)
        weights = region_weights(None, density.shape[1:], self.grid)  # (regions, h*w)
        return (density.reshape(self.n_classes, -1) @ weights.T).ravel()


@dataclass
class ClassGrams:
    """Per-fold sufficient statistics of the per-cell ridge (the last column is the intercept)."""

    gram: np.ndarray  # (folds, d, d)
    cross: np.ndarray  # (folds, d, K)
    sums: np.ndarray  # (n, regions, d): each image's region sums of its design rows
    fold_of: np.ndarray  # (n,)
    x_mean: np.ndarray
    x_scale: np.ndarray
    _factors: dict = field(default_factory=dict, repr=False)

    @property
    def scale(self) -> float:
        return float(np.trace(self.gram.sum(axis=0))) / self.gram.shape[1]

    def solve(self, held: Iterable[int], penalty: float) -> np.ndarray:
        """``(d, K)`` coefficients of the head fitted without the folds ``held``."""
        held = tuple(sorted(set(int(fold) for fold in held)))
        key = (held, float(penalty))
        if key not in self._factors:
            keep = np.ones(len(self.gram), dtype=bool)
            keep[list(held)] = False
            matrix = self.gram[keep].sum(axis=0)
            vector = self.cross[keep].sum(axis=0)
            ridge = np.full(matrix.shape[0], penalty * self.scale)
            ridge[-1] = 0.0  # the intercept is not shrunk
            self._factors[key] = scipy.linalg.solve(matrix + np.diag(ridge), vector, assume_a="pos", check_finite=False)
        return self._factors[key]

    def solve_per_class(self, held: Iterable[int], penalties: np.ndarray) -> np.ndarray:
        """``(d, K)``: each class's column from the solve with its own penalty."""
        held = tuple(held)
        columns = [self.solve(held, float(penalty))[:, k] for k, penalty in enumerate(penalties)]
        return np.stack(columns, axis=1)

    def counts(self, images: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``(len(images), K, regions)`` region counts of those images under coefficients ``weights``."""
        return np.einsum("nrd,dk->nkr", self.sums[images], weights)

    def choose_penalties(
        self, truth: np.ndarray, outside: Iterable[int] = (), penalties: Sequence[float] = PENALTIES
    ) -> np.ndarray:
        """``(K,)`` per-class penalty minimising the out-of-fold count MSE over the folds not in ``outside``.

        Each fold among the rest is predicted by the head fitted on the others (``outside`` is
        left out of every fit: the outer validation fold of a nested choice).
        """
        outside = set(int(fold) for fold in outside)
        folds = [fold for fold in range(len(self.gram)) if fold not in outside]
        errors = np.zeros((len(penalties), truth.shape[1]))
        for position, penalty in enumerate(penalties):
            for fold in folds:
                members = np.flatnonzero(self.fold_of == fold)
                predicted = self.counts(members, self.solve(outside | {fold}, penalty))[:, :, 0]
                errors[position] += ((predicted - truth[members]) ** 2).sum(axis=0)
        return np.asarray(penalties, dtype=float)[np.argmin(errors, axis=0)]

    def restricted(self, channels: np.ndarray | None = None, columns: np.ndarray | None = None) -> ClassGrams:
        """The statistics of a subset of the channels (a subset of the layers) and of the target columns.

        A Gram matrix of the concatenated layers holds those of every subset as sub-blocks, so
        one pass over the maps serves every layer set and every kind of target.
        """
        keep = (
            np.arange(self.gram.shape[1])
            if channels is None
            else np.append(np.asarray(channels), self.gram.shape[1] - 1)
        )
        wanted = np.arange(self.cross.shape[2]) if columns is None else np.asarray(columns)
        return ClassGrams(
            gram=self.gram[:, keep][:, :, keep],
            cross=self.cross[:, keep][:, :, wanted],
            sums=self.sums[:, :, keep],
            fold_of=self.fold_of,
            x_mean=self.x_mean[keep[:-1]],
            x_scale=self.x_scale[keep[:-1]],
        )

    def head(self, layers: Sequence[str], weights: np.ndarray, settings: dict[str, Any]) -> ClassDensityHead:
        """The head of coefficients ``weights`` (fitted on standardised channels)."""
        return ClassDensityHead(
            layers=tuple(layers),
            x_mean=self.x_mean,
            x_scale=self.x_scale,
            coef=weights[:-1],
            intercept=weights[-1],
            settings=dict(settings),
        )


def accumulate_grams(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    fold_of: np.ndarray,
    grid: tuple[int, int] | None = (2, 2),
) -> ClassGrams:
    """Per-fold Gram matrices of ``(C, h, w)`` maps against their ``(K, h, w)`` targets."""
    mean, scale = channel_statistics(maps)
    fold_of = np.asarray(fold_of, dtype=int)
    folds = int(fold_of.max()) + 1
    dim = len(mean) + 1
    classes = targets[0].shape[0]
    gram = np.zeros((folds, dim, dim))
    cross = np.zeros((folds, dim, classes))
    sums = []
    mean32, scale32 = mean.astype(np.float32), scale.astype(np.float32)
    for item, target, fold in zip(maps, targets, fold_of, strict=True):
        channels, rows, cols = item.shape
        design = np.empty((rows * cols, dim), dtype=np.float32)
        design[:, :-1] = (item.reshape(channels, -1).T - mean32) / scale32
        design[:, -1] = 1.0
        gram[fold] += design.T @ design
        cross[fold] += design.T @ target.reshape(classes, -1).T.astype(np.float32)
        sums.append(region_weights(None, (rows, cols), grid) @ design.astype(np.float64))
    return ClassGrams(gram=gram, cross=cross, sums=np.stack(sums), fold_of=fold_of, x_mean=mean, x_scale=scale)


def annotation_path(image_path: str | os.PathLike[str]) -> Path:
    """VOC layout: ``JPEGImages/ID.jpg`` -> ``Annotations/ID.xml``."""
    path = Path(image_path)
    return path.parent.parent / "Annotations" / f"{path.stem}.xml"


# -- fitting for a model ----------------------------------------------------------------------


def fit_class_head(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    counts: np.ndarray,
    layers: Sequence[str],
    fold_of: np.ndarray,
    grid: tuple[int, int] | None = None,
    penalties: Sequence[float] = PENALTIES,
) -> tuple[ClassDensityHead, np.ndarray]:
    """``(head on every image, (n, K * (1 + cells)) out-of-fold region sums)``.

    Per-class penalties are chosen on the out-of-fold whole-image counts; each image's sums come
    from the head fitted without its fold (the rows a regressor on the sums is trained on), in
    :meth:`ClassDensityHead.region_counts` order (class by class: whole image, then the cells).
    """
    grams = accumulate_grams(maps, targets, fold_of, grid)
    truth = np.asarray(counts, dtype=float)
    chosen = grams.choose_penalties(truth, penalties=penalties)
    out_of_fold = np.zeros((len(truth), truth.shape[1], grams.sums.shape[1]))
    for fold in np.unique(grams.fold_of):
        members = np.flatnonzero(grams.fold_of == fold)
        out_of_fold[members] = grams.counts(members, grams.solve_per_class({int(fold)}, chosen))
    head = grams.head(
        layers,
        grams.solve_per_class((), chosen),
        {"penalties": [float(value) for value in chosen], "grid": None if grid is None else list(grid)},
    )
    return head, out_of_fold.reshape(len(truth), -1)


# -- the head inside a model file -------------------------------------------------------------

CLASS_HEAD_KIND = "counting-class-density-head"
CLASS_HEAD_VERSION = 1
_CLASS_ARRAYS = ("x_mean", "x_scale", "coef", "intercept")
_MAX_CHANNELS = 100_000
_MAX_CLASSES = 1000
_MAX_GRID = 16


def class_head_to_document(head: ClassDensityHead) -> dict[str, Any]:
    """The head as a JSON-ready dict (arrays as base64 little-endian float64) for a model file."""
    return {
        "kind": CLASS_HEAD_KIND,
        "format_version": CLASS_HEAD_VERSION,
        "layers": list(head.layers),
        "settings": head.settings,
        "arrays": {name: encode_array(getattr(head, name)) for name in _CLASS_ARRAYS},
    }


def class_head_from_document(document: Any, source: str) -> ClassDensityHead:
    """Inverse of :func:`class_head_to_document`, validated: a damaged section is one ModelFileError line."""

    def fail(problem: str) -> ModelFileError:
        return ModelFileError(f"{source}: class density head: {problem}")

    if not isinstance(document, dict) or document.get("kind") != CLASS_HEAD_KIND:
        raise fail(f"kind is not {CLASS_HEAD_KIND!r}")
    version = document.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= CLASS_HEAD_VERSION:
        raise fail(f"format version {version!r} is not one this version reads ({CLASS_HEAD_VERSION})")
    layers = checked_layers(document, fail)
    settings = checked_settings(document, fail, _MAX_GRID, display_max=False)
    entries = document.get("arrays")
    if not isinstance(entries, dict) or set(entries) != set(_CLASS_ARRAYS):
        raise fail(f"arrays must be exactly {', '.join(_CLASS_ARRAYS)}")
    arrays: dict[str, np.ndarray] = {}
    for name, entry in entries.items():
        arrays[name] = decode_array(name, entry, fail)
        if not np.all(np.isfinite(arrays[name])):
            raise fail(f"array {name!r} must hold finite floats")
    channels = arrays["x_mean"].shape[0] if arrays["x_mean"].ndim == 1 else 0
    if not 1 <= channels <= _MAX_CHANNELS or arrays["x_scale"].shape != (channels,) or np.any(arrays["x_scale"] <= 0):
        raise fail(
            f"x_mean {arrays['x_mean'].shape} and x_scale {arrays['x_scale'].shape} must be matching positive (C,)"
        )
    coef = arrays["coef"]
    if coef.ndim != 2 or coef.shape[0] != channels or not 1 <= coef.shape[1] <= _MAX_CLASSES:
        raise fail(f"coef has shape {coef.shape}, expected ({channels}, classes)")
    if arrays["intercept"].shape != (coef.shape[1],):
        raise fail(f"intercept has shape {arrays['intercept'].shape}, expected ({coef.shape[1]},)")
    return ClassDensityHead(
        layers=tuple(layers),
        x_mean=arrays["x_mean"],
        x_scale=arrays["x_scale"],
        coef=coef,
        intercept=arrays["intercept"],
        settings=settings,
    )


# -- counting with a model's head -------------------------------------------------------------


def class_head_features(
    head: ClassDensityHead,
    paths: Sequence[str | os.PathLike[str]],
    backbone: Backbone,
    prep: Preprocessing,
    cache: FeatureCache | None = None,
    batch_size: int = 8,
) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """The regressor's rows for image files: ``(features (NaN where unreadable), ok, errors)``."""
    errors: dict[str, str] = {}
    maps = extract_class_maps(paths, backbone, prep, head.layers, cache, batch_size, errors=errors)
    width = head.n_classes * (1 + (0 if head.grid is None else head.grid[0] * head.grid[1]))
    features = np.full((len(maps), width), np.nan)
    for index, item in enumerate(maps):
        if item is not None:
            features[index] = head.region_counts(item)
    return features, np.array([item is not None for item in maps], dtype=bool), errors


def class_head_batch_features(head: ClassDensityHead, backbone: Backbone, batch: np.ndarray) -> np.ndarray:
    """The regressor's rows for a prepared ``(B, 3, H, W)`` batch of one shape (video frames)."""
    maps = backbone.feature_maps(batch, list(head.layers))
    size = class_grid(batch_shape(batch)[-2:])
    stacked = np.concatenate([resample(maps[name], size) for name in head.layers], axis=1)
    return np.stack([head.region_counts(item) for item in stacked])


def check_class_head(head: ClassDensityHead, backbone: Backbone, feature_dim: int, name: str) -> None:
    """ModelFileError unless the head's layers fit ``backbone`` and its sums fit the regressor."""
    from counting.heads.density.maps import layer_channels

    known = ["final", *getattr(backbone, "taps", {})]
    unknown = [layer for layer in head.layers if layer not in known]
    if unknown:
        raise ModelFileError(f"{name}: class density head reads {unknown[0]!r}, which {backbone.name} does not have")
    channels = sum(layer_channels(backbone, layer) for layer in head.layers)
    if channels != head.n_channels:
        raise ModelFileError(
            f"{name}: class density head layers {'+'.join(head.layers)} give {channels} channels "
            f"but the head takes {head.n_channels} (model file edited or corrupt)"
        )
    sums = head.n_classes * (1 + (0 if head.grid is None else head.grid[0] * head.grid[1]))
    if sums != feature_dim:
        raise ModelFileError(
            f"{name}: class density head gives {sums} sums per image but the regressor takes {feature_dim} "
            "(model file edited or corrupt)"
        )
