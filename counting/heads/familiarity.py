"""Familiarity: how much a picture resembles the pictures a model was trained on.

A model counts well only on pictures like its training pictures (Mall's camera, ShanghaiTech's
streets); elsewhere it answers with confidence and is wrong (issue 21). Each picture gets a
*probe*, a vector the counting pass already computes:

* descriptor models (class scores, pooled features, feature-map sums; per-class density sums):
  the regressor's input row(s) of the picture;
* density-head models: the per-channel mean and standard deviation of the feature maps the head
  reads (:func:`map_statistics`), the picture's "style" at the depths the head sees.

Probes are standardised with the training pictures' means and scales and projected on their
first principal axes (PCA, ``components``); a picture's distance is the mean Euclidean distance
to its ``neighbours`` nearest training pictures there. The score is calibrated on out-of-fold
training pictures (each one's distance to the training pictures of the other folds, the folds
contiguous runs so a video frame's near-twins are not its neighbours): the familiarity of a
picture is the fraction of those calibration distances at least as large as its own,
``(1 + #{d_cal >= d}) / (1 + n_cal)``, in (0, 1]. For a picture drawn like the training
pictures it is uniform on (0, 1]; a threshold ``t`` marks about a fraction ``t`` of such
pictures, and pictures unlike every training picture get the smallest value, ``1/(1+n_cal)``.

Stored in the model file's JSON metadata as base64 float32 arrays (no pickle), a few hundred KB.
scripts/familiarity_study.py measured the choices (PCA dimension, whitening, neighbours).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from counting.heads.results import CountBatch
    from counting.heads.stage import Pictures

__all__ = [
    "FAMILIARITY_VERSION",
    "Familiarity",
    "FamiliarityError",
    "familiarity_fields",
    "fit_familiarity",
    "map_statistics",
    "unfamiliar_summary",
]

FAMILIARITY_VERSION = 1
# Chosen on scripts/familiarity_study.py: fitted on Mall frames 1-600, the fraction of held-out
# frames 601-800 / of the 559 coco-voc20 photos below 0.01, for the models default (class
# scores), mall-sums (map sums), mall-accurate (conv head, map statistics):
#   16 axes, whitened, 5-NN:    1.0 / 99.8 %,  0.0 / 100 %,  0.0 / 100 %   (chosen)
#   16 axes, not whitened, 5-NN: 1.0 / 98.6 %, 0.0 / 95.9 %, 0.5 / 100 %
#   32 axes, whitened, 5-NN:    1.0 / 100 %,  0.0 / 100 %,  0.5 / 100 % (2.0 % of held-out below 0.05)
#    8 axes: coco 35-53 % for the descriptor models (too few axes to see what differs).
N_COMPONENTS = 16  # PCA axes kept (fewer when there are fewer pictures or dimensions)
WHITEN = True  # each axis divided by its spread
NEIGHBOURS = 5  # training pictures a distance averages over
N_FOLDS = 5  # out-of-fold calibration
FLAG_RATE = 0.01  # default threshold: about 1 % of pictures like the training ones are marked
# Distance below which a reference is the probe itself (references are stored as float32; whitened
# distances between different pictures are of order 1).
IDENTICAL = 1e-4
# Training pictures kept as references: enough for a 5-NN distance, bounded so the model file stays small.
MAX_REFERENCES = 4000
_SMALL = 1e-8


class FamiliarityError(ValueError):
    """A familiarity section that cannot be read (the model loader names the file)."""


def map_statistics(maps: np.ndarray) -> np.ndarray:
    """``(n, C, h, w)`` (or one ``(C, h, w)``) feature maps -> ``(n, 2C)``: each channel's mean,
    then its standard deviation, over the map (returned as float64)."""
    array = np.asarray(maps)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4:
        raise ValueError(f"expected maps shaped (n, C, h, w), got {array.shape}")
    flat = array.reshape(array.shape[0], array.shape[1], -1)
    # In the maps' own float32 (NumPy's pairwise sums): 4 ms for a 720-px conv-head map, where
    # float64 accumulation took 23 ms; the statistics differ by ~1e-7 relative.
    mean = flat.mean(axis=2)
    std = flat.std(axis=2)
    return np.concatenate([mean, std], axis=1).astype(np.float64)


@dataclass
class Familiarity:
    """A fitted familiarity score (see the module docstring)."""

    mean: np.ndarray  # (D,) probe means of the training pictures
    scale: np.ndarray  # (D,) their standard deviations (floored)
    components: np.ndarray  # (D, k) principal axes
    references: np.ndarray  # (n, k) the training pictures, projected
    calibration: np.ndarray  # (m,) sorted out-of-fold distances of the training pictures
    threshold: float = FLAG_RATE
    neighbours: int = NEIGHBOURS
    probe: str = "descriptor"  # "descriptor" (the regressor's input) or "map-statistics"
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def project(self, probes: np.ndarray) -> np.ndarray:
        """``(n, D)`` probes -> ``(n, k)`` standardised, on the principal axes."""
        array = np.asarray(probes, dtype=np.float64).reshape(len(probes), -1)
        if array.shape[1] != self.dim:
            raise ValueError(f"familiarity probes have {array.shape[1]} numbers, the model's {self.dim}")
        return ((array - self.mean) / self.scale) @ self.components

    def distances(self, probes: np.ndarray) -> np.ndarray:
        """Mean distance of each probe to its nearest training pictures (NaN rows give NaN)."""
        projected = self.project(probes)
        return _knn_distance(projected, self.references, self.neighbours)

    def scores(self, probes: np.ndarray) -> np.ndarray:
        """Familiarity in (0, 1] per probe (NaN for a NaN probe: a picture that failed)."""
        distance = self.distances(probes)
        return self.scores_of_distances(distance)

    def scores_without_self(self, probes: np.ndarray) -> np.ndarray:
        """Scores of training pictures as a new picture would get them: a reference identical
        to the probe (the picture itself) is not one of its neighbours. What a model fitted on
        training pictures' familiarity (the sparse gate) must see, or it learns from scores
        that new pictures never reach."""
        return self.scores_without(probes, probes)

    def scores_without(self, probes: np.ndarray, own: np.ndarray) -> np.ndarray:
        """Scores of pictures whose ``own`` probes (one row each) are training pictures: the
        reference identical to a picture's own probe is not one of its neighbours. A recompressed
        copy of a training picture (``own``: the original's probe) is scored as a new picture
        would be, not against its own original."""
        projected = self.project(probes)
        near = projected if own is probes else self.project(own)
        distance = _knn_distance(projected, self.references, self.neighbours, skip_near=near)
        return self.scores_of_distances(distance)

    def scores_of_distances(self, distance: np.ndarray) -> np.ndarray:
        calibration = self.calibration
        # Calibration distances >= d: those from the first one above d (side="left" counts ties as >=).
        at_least = calibration.size - np.searchsorted(calibration, np.nan_to_num(distance, nan=0.0), side="left")
        score = (1.0 + at_least) / (1.0 + calibration.size)
        return np.where(np.isfinite(distance), score, np.nan)

    def unfamiliar(self, scores: np.ndarray) -> np.ndarray:
        """True where a score lies below the threshold (NaN scores are not marked)."""
        values = np.asarray(scores, dtype=float)
        return np.isfinite(values) & (values < self.threshold)

    # ------------------------------------------------------------------ model file section
    def to_document(self) -> dict[str, Any]:
        return {
            "version": FAMILIARITY_VERSION,
            "probe": self.probe,
            "neighbours": int(self.neighbours),
            "threshold": float(self.threshold),
            "mean": _encode(self.mean),
            "scale": _encode(self.scale),
            "components": _encode(self.components),
            "references": _encode(self.references),
            "calibration": _encode(self.calibration),
            "settings": self.settings,
        }

    @classmethod
    def from_document(cls, document: Any) -> Familiarity:
        """Read :meth:`to_document`'s record; FamiliarityError saying what is wrong."""
        if not isinstance(document, dict):
            raise FamiliarityError("familiarity: expected an object")
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FAMILIARITY_VERSION:
            raise FamiliarityError(f"familiarity: version {version!r:.20} is not one this counting reads")
        probe = document.get("probe")
        if probe not in ("descriptor", "map-statistics"):
            raise FamiliarityError(f"familiarity.probe: {probe!r:.40} is not descriptor or map-statistics")
        neighbours = document.get("neighbours")
        if not isinstance(neighbours, int) or isinstance(neighbours, bool) or not 1 <= neighbours <= 1000:
            raise FamiliarityError(f"familiarity.neighbours: {neighbours!r:.20} is not a whole number from 1 to 1000")
        threshold = document.get("threshold")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise FamiliarityError(f"familiarity.threshold: {threshold!r:.20} is not a number from 0 to 1")
        mean = _decode(document.get("mean"), "mean", 1)
        scale = _decode(document.get("scale"), "scale", 1)
        components = _decode(document.get("components"), "components", 2)
        references = _decode(document.get("references"), "references", 2)
        calibration = _decode(document.get("calibration"), "calibration", 1)
        dim = mean.shape[0]
        if scale.shape != (dim,) or components.shape[0] != dim:
            raise FamiliarityError(f"familiarity: mean, scale and components disagree on the probe size ({dim})")
        if references.shape[1] != components.shape[1] or len(references) < neighbours:
            raise FamiliarityError("familiarity.references: do not fit the components or the neighbours")
        if calibration.size == 0 or not np.all(np.diff(calibration) >= 0):
            raise FamiliarityError("familiarity.calibration: expected sorted distances")
        if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise FamiliarityError("familiarity.scale: expected positive numbers")
        settings = document.get("settings") or {}
        if not isinstance(settings, dict):
            raise FamiliarityError("familiarity.settings: expected an object")
        return cls(
            mean=mean,
            scale=scale,
            components=components,
            references=references,
            calibration=calibration,
            threshold=float(threshold),
            neighbours=neighbours,
            probe=probe,
            settings=settings,
        )


@dataclass(frozen=True)
class FamiliarityStage:
    """The count's familiarity stage (counting.heads.stage): each picture's familiarity from the
    probe its head's rows hold. Owns the model file's ``familiarity`` section."""

    familiarity: Familiarity

    def __call__(self, batch: CountBatch, pictures: Pictures) -> CountBatch:
        probes = pictures.rows.probes
        return batch if probes is None else replace(batch, familiarity=self.scores(probes))

    def scores(self, probes: np.ndarray) -> np.ndarray:
        """Each picture's familiarity from its probe (a row, or the rows of its views, flattened)."""
        array = np.asarray(probes, dtype=float)
        return self.familiarity.scores(array.reshape(len(array), -1))


def fit_familiarity(
    probes: np.ndarray,
    *,
    probe: str = "descriptor",
    n_components: int = N_COMPONENTS,
    neighbours: int = NEIGHBOURS,
    n_folds: int = N_FOLDS,
    flag_rate: float = FLAG_RATE,
    whiten: bool = WHITEN,
    order: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    settings: dict[str, Any] | None = None,
) -> Familiarity:
    """Fit the score on the training pictures' ``probes`` ``(n, D)`` (rows with NaN are left out).

    ``order``: the pictures' frame numbers (contiguous folds follow them; default: as given).
    ``groups``: a label per picture (its dataset, for a model trained on several): each group
    is cut into ``n_folds`` contiguous runs on its own, so every fold holds part of every
    group (one fold holding a whole dataset would calibrate on distances to other datasets).
    ``whiten``: divide each principal axis by its spread (every axis counts alike).
    """
    array = np.asarray(probes, dtype=np.float64).reshape(len(probes), -1)
    keep = np.isfinite(array).all(axis=1)
    labels = np.zeros(len(array), dtype=np.int64) if groups is None else np.unique(groups, return_inverse=True)[1]
    positions = np.lexsort((np.arange(len(array)) if order is None else np.asarray(order), labels))
    positions = positions[keep[positions]]
    labels = labels[positions]
    array = array[positions]
    n = len(array)
    if n < max(2 * n_folds, neighbours + 2):
        raise ValueError(f"{n} training pictures are too few for a familiarity score (at least {2 * n_folds})")
    mean = array.mean(axis=0)
    scale = np.maximum(array.std(axis=0), _SMALL * max(1.0, float(np.abs(array).max())))
    standard = (array - mean) / scale
    k = int(min(n_components, array.shape[1], n - 1))
    # Principal axes of the standardised probes (economy SVD: n x D, n at most a few thousand).
    _, singular, vt = np.linalg.svd(standard, full_matrices=False)
    components = vt[:k].T
    if whiten:
        components = components / np.maximum(singular[:k] / np.sqrt(n), _SMALL)
    projected = standard @ components
    # Contiguous runs in frame order, within each group.
    runs = [np.array_split(np.flatnonzero(labels == label), n_folds) for label in np.unique(labels)]
    folds = [np.concatenate([parts[k] for parts in runs]) for k in range(n_folds)]
    calibration = np.empty(n)
    for fold in folds:
        rest = np.setdiff1d(np.arange(n), fold, assume_unique=True)
        calibration[fold] = _knn_distance(projected[fold], projected[rest], neighbours)
    references = projected
    if n > MAX_REFERENCES:  # evenly spaced in frame order: keeps every scene
        references = projected[np.linspace(0, n - 1, MAX_REFERENCES).round().astype(int)]
    return Familiarity(
        mean=mean,
        scale=scale,
        components=components,
        references=references,
        calibration=np.sort(calibration),
        threshold=float(flag_rate),
        neighbours=int(neighbours),
        probe=probe,
        settings={
            "n_pictures": int(n),
            "n_components": k,
            "whiten": bool(whiten),
            "n_folds": int(n_folds),
            "flag_rate": float(flag_rate),
        }
        | (settings or {}),
    )


def familiarity_fields(model: Any, familiarity: np.ndarray | None, k: int) -> dict[str, Any]:
    """``familiarity`` and ``unfamiliar`` of picture ``k`` as records carry them (count's rows,
    count_frames' records), from ``model``'s familiarity section (None and None: unknown)."""
    section = getattr(model, "familiarity", None)
    if section is None or familiarity is None or not np.isfinite(familiarity[k]):
        return {"familiarity": None, "unfamiliar": None}
    value = float(familiarity[k])
    return {"familiarity": value, "unfamiliar": bool(section.unfamiliar(np.array([value]))[0])}


def unfamiliar_summary(n_unfamiliar: int, n_scored: int, what: str = "pictures") -> str | None:
    """The one warning line for a run (None when no picture is marked)."""
    if n_unfamiliar <= 0:
        return None
    verb = "is" if n_unfamiliar == 1 else "are"
    return (
        f"{n_unfamiliar} of {n_scored} {what} {verb} unlike this model's training pictures; their counts are unreliable"
    )


def _knn_distance(
    queries: np.ndarray, references: np.ndarray, neighbours: int, skip_near: np.ndarray | None = None
) -> np.ndarray:
    """Mean Euclidean distance of each query row to its ``neighbours`` nearest reference rows
    (``skip_near``, one row per query: references at distance ~0 from its row are not counted,
    e.g. a training picture's own reference)."""
    out = np.full(len(queries), np.nan)
    finite = np.isfinite(queries).all(axis=1)
    if not finite.any():
        return out
    from scipy.spatial.distance import cdist

    count = max(1, min(neighbours, len(references) - int(skip_near is not None)))
    rows = np.flatnonzero(finite)
    for start in range(0, len(rows), 1024):  # bounds the (queries x references) block
        part = rows[start : start + 1024]
        distance = cdist(queries[part], references)
        if skip_near is not None:
            # Stored as float32: a picture's own reference lies within rounding of it.
            own = distance if skip_near is queries else cdist(skip_near[part], references)
            distance[own < IDENTICAL] = np.inf
        nearest = np.partition(distance, count - 1, axis=1)[:, :count]
        out[part] = nearest.mean(axis=1)
    return out


def _encode(array: np.ndarray) -> dict[str, Any]:
    values = np.ascontiguousarray(array, dtype="<f4")
    return {"shape": list(values.shape), "dtype": "float32", "data": base64.b64encode(values.tobytes()).decode()}


def _decode(record: Any, name: str, ndim: int) -> np.ndarray:
    if not isinstance(record, dict) or record.get("dtype") != "float32" or not isinstance(record.get("data"), str):
        raise FamiliarityError(f"familiarity.{name}: expected a base64 float32 array")
    shape = record.get("shape")
    if not isinstance(shape, list) or len(shape) != ndim or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise FamiliarityError(f"familiarity.{name}: expected a shape of {ndim} whole numbers")
    try:
        raw = base64.b64decode(record["data"], validate=True)
    except ValueError:
        raise FamiliarityError(f"familiarity.{name}: not base64") from None
    if len(raw) != 4 * int(np.prod(shape)):
        raise FamiliarityError(f"familiarity.{name}: {len(raw)} bytes do not hold shape {shape}")
    values = np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise FamiliarityError(f"familiarity.{name}: holds NaN or infinite values")
    return values
