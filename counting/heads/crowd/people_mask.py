"""Which cells of a density map hold people: a small per-cell classifier on the same frozen maps.

The crowd model's general heads put most of their mass on an everyday photo off its people: a
brick wall above a class photo's children, gravel, a woven placemat read as a distant crowd
(docs/density.md, "Where the heads' excess lies"). Their target is a density, and a pixel loss
barely notices a thin background (0.005 people a cell over 3,000 cells is 15 people), so neither a
count term nor more everyday crops taught them otherwise. A classifier of cells, people or not,
learns exactly that question: each cell's standardised channels and their mean over the
``(2 * context + 1)``-cell square about it, through one hidden layer of ReLUs, to the chance that
a head lies in the cell. The head's density is multiplied by a ramp of that chance (0 below
``low``, 1 above ``high``), so cells the classifier is sure of keep their mass whole.

Fitted on the cells of the heads' own training pictures: people are cells where the head-dot
target holds more than ``PEOPLE_LEVEL``, background the cells with no dot mass within two cells;
the rest (a head's fringe) is left out. ``scripts/foreground_mask_study.py`` chose the form on the
validation parts (the general heads' count without the gate, coco-voc20 heads alone 10.15 ->
4.29, ShanghaiTech A 95.41 -> 95.11; ShanghaiTech B and Mall, which go to their specialists,
unchanged). Not in the shipped model: fitted on the pictures alone, it did not hold on their
grayscale and WebP copies, and fitted on the copies' cells too it kept more of a texture in colour
(docs/density.md, "A people mask for the general heads" and "The people mask with its copies").

The classifier is scikit-learn's ``MLPClassifier``; counting runs its two layers in NumPy (its
arrays are kept in the model file, never a pickle). The context mean is linear, so it is taken of
the hidden layer's share of the channels (``hidden`` maps) rather than of every channel.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

__all__ = ["PEOPLE_LEVEL", "MaskCells", "PeopleMask", "cell_labels", "fit_people_mask", "mask_cells"]

# A cell holds people where the head-dot target puts this much in it (a dot's Gaussian of sigma
# 4 px puts 0.2-1 of a person in its own stride-8 cell).
PEOPLE_LEVEL = 0.02
# Background: no cell within this many cells of it holds more than BACKGROUND_LEVEL of a dot.
BACKGROUND_REACH = 2
BACKGROUND_LEVEL = 1e-3
# Cells drawn per picture and class for the fit (a 1024x768 photo has 6,912 cells).
CELLS_PER_CLASS = 120
DEFAULT_CONTEXT = 5
DEFAULT_HIDDEN = 32
DEFAULT_RAMP = (0.4, 0.95)


@dataclass
class PeopleMask:
    """``weights(maps)``: the share of each cell's density a head keeps (0..1), see the module."""

    x_mean: np.ndarray  # (C,) the standardisation of the maps' channels
    x_scale: np.ndarray  # (C,)
    hidden_weight: np.ndarray  # (2C, hidden): the cell's channels, then their context mean
    hidden_bias: np.ndarray  # (hidden,)
    out_weight: np.ndarray  # (hidden,)
    out_bias: float
    context: int = DEFAULT_CONTEXT
    low: float = DEFAULT_RAMP[0]
    high: float = DEFAULT_RAMP[1]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n_channels(self) -> int:
        return int(self.x_mean.shape[0])

    def probabilities(self, maps: np.ndarray) -> np.ndarray:
        """``(n, C, h, w)`` maps -> ``(n, h, w)`` chance that a cell holds people."""
        array = np.asarray(maps, dtype=np.float32)
        channels = self.n_channels
        mean = self.x_mean.astype(np.float32)[:, None, None]
        scale = self.x_scale.astype(np.float32)[:, None, None]
        first = self.hidden_weight.astype(np.float32)
        out = np.empty((array.shape[0], *array.shape[2:]), dtype=np.float64)
        for index, picture in enumerate(array):
            cells = ((picture - mean) / scale).reshape(channels, -1).T  # (h*w, C)
            own = cells @ first[:channels]
            around = (cells @ first[channels:]).T.reshape(-1, *picture.shape[1:])
            window = 2 * self.context + 1
            around = ndimage.uniform_filter(around, size=(1, window, window), mode="nearest")
            hidden = np.maximum(own + around.reshape(len(around), -1).T + self.hidden_bias.astype(np.float32), 0.0)
            logits = hidden.astype(np.float64) @ self.out_weight + self.out_bias
            out[index] = _sigmoid(logits).reshape(picture.shape[1:])
        return out

    def weights(self, maps: np.ndarray) -> np.ndarray:
        """``(n, h, w)`` share of each cell's density kept: the chance of people ramped from
        ``low`` (0) to ``high`` (1)."""
        return np.clip((self.probabilities(maps) - self.low) / (self.high - self.low), 0.0, 1.0)


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -60.0, 60.0)))


def cell_labels(target: np.ndarray) -> np.ndarray:
    """``(h, w)`` int8 of a head-dot density target: 1 people, 0 background, -1 left out."""
    labels = np.full(target.shape, -1, dtype=np.int8)
    near = ndimage.maximum_filter(target, size=2 * BACKGROUND_REACH + 1, mode="constant") > BACKGROUND_LEVEL
    labels[~near] = 0
    labels[target > PEOPLE_LEVEL] = 1
    return labels


def cell_features(maps: np.ndarray, x_mean: np.ndarray, x_scale: np.ndarray, context: int) -> np.ndarray:
    """``(h * w, 2C)`` float32 of one picture's ``(C, h, w)`` maps: each cell's standardised
    channels, then their mean over the context square (what :meth:`PeopleMask.probabilities` reads)."""
    standard = (np.asarray(maps, dtype=np.float32) - x_mean[:, None, None]) / x_scale[:, None, None]
    window = 2 * context + 1
    around = ndimage.uniform_filter(standard, size=(1, window, window), mode="nearest")
    return np.concatenate([standard, around]).reshape(2 * len(standard), -1).T.astype(np.float32)


@dataclass
class MaskCells:
    """Cells drawn for a mask's fit: ``features`` ``(k, 2C)``, ``labels`` ``(k,)`` (1 people, 0
    background), ``pictures`` ``(k,)`` the index of the picture each came from."""

    features: np.ndarray
    labels: np.ndarray
    pictures: np.ndarray
    x_mean: np.ndarray
    x_scale: np.ndarray
    context: int

    def of(self, keep: np.ndarray) -> MaskCells:
        """The cells of the pictures ``keep`` (a boolean per picture) marks."""
        chosen = np.asarray(keep, dtype=bool)[self.pictures]
        return MaskCells(
            self.features[chosen], self.labels[chosen], self.pictures[chosen], self.x_mean, self.x_scale, self.context
        )


def mask_cells(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    x_mean: np.ndarray,
    x_scale: np.ndarray,
    *,
    seed: int = 0,
    context: int = DEFAULT_CONTEXT,
    pictures: Sequence[int] | None = None,
) -> MaskCells:
    """Up to ``CELLS_PER_CLASS`` people and background cells (:func:`cell_labels`) of each
    picture's ``(C, h, w)`` maps, by its head-dot density target (the heads' own,
    :func:`counting.heads.density.data.density_targets`). ``pictures``: the picture each map is
    of (a copy's is its picture's, so leaving a picture out leaves its copies out; default: each
    map its own)."""
    if len(maps) != len(targets):
        raise ValueError(f"{len(maps)} maps for {len(targets)} targets")
    owners = np.arange(len(maps)) if pictures is None else np.asarray(pictures, dtype=int)
    if owners.shape != (len(maps),):
        raise ValueError(f"{len(owners)} picture indices for {len(maps)} maps")
    rng = np.random.default_rng(seed)
    mean = np.asarray(x_mean, dtype=np.float32)
    scale = np.asarray(x_scale, dtype=np.float32)
    rows: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    drawn: list[np.ndarray] = []
    for index, (picture, target) in enumerate(zip(maps, targets, strict=True)):
        found = cell_labels(np.asarray(target)).ravel()
        features = None
        for value in (0, 1):
            cells = np.flatnonzero(found == value)
            if not cells.size:
                continue
            if features is None:
                features = cell_features(picture, mean, scale, context)
            chosen = rng.choice(cells, min(CELLS_PER_CLASS, cells.size), replace=False)
            rows.append(features[chosen])
            labels.append(np.full(chosen.size, value, dtype=np.int8))
            drawn.append(np.full(chosen.size, owners[index]))
    width = 2 * len(mean)
    return MaskCells(
        np.concatenate(rows) if rows else np.zeros((0, width), np.float32),
        np.concatenate(labels) if labels else np.zeros(0, np.int8),
        np.concatenate(drawn) if drawn else np.zeros(0, int),
        mean.astype(np.float64),
        scale.astype(np.float64),
        context,
    )


def fit_people_mask(
    cells: MaskCells, *, seed: int = 0, hidden: int = DEFAULT_HIDDEN, ramp: tuple[float, float] = DEFAULT_RAMP
) -> PeopleMask:
    """A :class:`PeopleMask` fitted on drawn cells (:func:`mask_cells`): scikit-learn's
    ``MLPClassifier``, one hidden layer, early-stopped on a tenth of the cells."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    if len(np.unique(cells.labels)) < 2:
        raise ValueError("a people mask needs cells of people and of background; the targets hold only one kind")
    classifier = MLPClassifier(
        (hidden,), alpha=1e-3, batch_size=512, max_iter=30, early_stopping=True, random_state=seed
    )
    with warnings.catch_warnings():
        # 30 epochs is the budget, chosen with early stopping on (the shipped mask stops by itself
        # or at the budget); not converging within it is no fault to report.
        warnings.simplefilter("ignore", ConvergenceWarning)
        classifier.fit(cells.features, cells.labels)
    (first, second), (bias, out_bias) = classifier.coefs_, classifier.intercepts_
    return PeopleMask(
        x_mean=cells.x_mean,
        x_scale=cells.x_scale,
        hidden_weight=first.astype(np.float64),
        hidden_bias=bias.astype(np.float64),
        out_weight=second[:, 0].astype(np.float64),
        out_bias=float(out_bias[0]),
        context=cells.context,
        low=float(ramp[0]),
        high=float(ramp[1]),
        settings={
            "cells": int(len(cells.labels)),
            "pictures": int(len(np.unique(cells.pictures))),
            "people_share": round(float(cells.labels.mean()), 4),
            "validation_accuracy": round(float(classifier.best_validation_score_), 4),
            "epochs": int(classifier.n_iter_),
            "hidden": hidden,
            "seed": seed,
        },
    )
