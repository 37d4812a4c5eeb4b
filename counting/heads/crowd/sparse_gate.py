"""The sparse gate: a crowd model hands sparse pictures to the COCO detector's person count.

Contract. A :class:`SparseGate` is a logistic regression on :func:`gate_features` (per picture:
``log(1 + head count)``, the detector's person quantities as
:mod:`counting.features.detector.descriptor` stores them, ``log(familiarity)`` and the first
``axes`` principal axes of the familiarity probe). :meth:`SparseGate.apply` returns, per
picture, the detector's person count at threshold ``count_index`` where the probability is above
one half, and the head's count elsewhere or where an input is missing (no familiarity). It is
fitted by :func:`fit_sparse_gate` on pictures the density head never trained on, to tell where
the detector's count is the closer one; the model file keeps only its standardisation,
coefficients and intercept (JSON numbers, no pickle), so applying it is one dot product.

**The head's limit.** No picture whose head count is above ``head_limit`` (``HEAD_LIMIT_FACTOR``
times the largest head count of a sparse fitting picture the detector counted closer; the
pictures set it, not their copies) is handed over: :meth:`SparseGate.within_limit`.

**Disputed counts.** Where the logistic says sparse but the limit keeps the head's count, the
count is disputed: :meth:`SparseGate.apply` with ``limited=False`` gives the reading it is
disputed by, which the model's records mark ``disputed`` and its interval reaches.

**Wide pictures.** A picture wider or taller than 2:1 is read tile by tile
(:meth:`SparseGate.apply_tiles`): each detector tile is a picture with its share of the head
count (:func:`tile_shares`); the picture's count is the sum over its tiles (``counted_by``
:data:`BY_BOTH` where some tiles were handed over and some not). Fitting reads each picture's
average photo (:func:`per_photo`).

**The screen.** A second logistic regression on the inputs that need no detector
(:class:`Screen`) says which pictures the detector must run on at all; elsewhere the head's
count stands and the picture cannot be disputed.

Why each part is built as it is (the cases behind the limit, the copies the gate is fitted on,
the weighted label, tile by tile): docs/sparse-gate.md; the measurements: docs/density.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "BY_BOTH",
    "PartPeople",
    "SparseGate",
    "SparseGateError",
    "boxes_in_tiles",
    "by_detector_alone",
    "disputed_summary",
    "fit_sparse_gate",
    "gate_features",
    "people_in_pixels",
    "per_photo",
    "person_density",
    "photos_in",
    "routes",
    "tile_probes",
    "tile_shares",
    "tiled_density",
]

# Pictures with at most this many people count as sparse when the gate is fitted: the detector's
# top-100 decode and its recall on small people limit it to sparse scenes (on the held-out crowd
# pictures its error overtakes the density head's between 10 and 30 people).
SPARSE_MAX = 20.0
# Inverse regularisation strengths the fit chooses among by cross-validated log-loss.
C_GRID = tuple(float(c) for c in np.logspace(-2, 2, 9))
# Familiarity axes the fit chooses among (with C, by cross-validated log-loss).
AXES_GRID = (0, 4, 8, 16)
FOLDS = 5
# Added to each fitting picture's weight (people): pictures where both routes err alike still count.
WEIGHT_FLOOR = 0.1
# The gate hands no picture over whose head count exceeds this many times the largest head count
# of a sparse fitting picture the detector counted closer (module docstring, "The head's limit").
HEAD_LIMIT_FACTOR = 2.0


# How far (map cells, a Gaussian's sigma) a person the detector counted is spread in the map of a
# picture counted by the heads and the detector both (tiled_density).
PERSON_SPREAD = 1.0

# The ``counted_by`` of a gated model's picture: its density head's count, or the detector's, or
# (a wide picture, "Wide pictures" in the module's docstring) the head's in some tiles and the
# detector's in the others.
BY_HEAD, BY_DETECTOR, BY_BOTH = "density", "detector", "density+detector"
# The interval route of a picture handed to the detector that found no one in it: "no one found"
# errs unlike "n found" (a group missed whole, against one person too many or too few), so a model
# calibrates it apart (a Mondrian split of the detector's route; docs/density.md, "No one found").
DETECTOR_FOUND_NONE = "detector-none"


class PartPeople(np.ndarray):
    """The ``(m, 5)`` person boxes of a wide picture the gate handed to the detector only in some
    tiles (:data:`BY_HEAD` counted the others): an array like any picture's boxes, so that
    everything that draws or places the detector's people reads it as it is; only the picture's
    route (:func:`routes`) and interval differ."""

    @classmethod
    def of(cls, boxes: np.ndarray) -> PartPeople:
        return np.asarray(boxes, dtype=np.float64).reshape(-1, 5).view(cls)


def routes(people: Sequence[np.ndarray | None]) -> np.ndarray:
    """``counted_by`` of each picture from the gate's ``people`` (``CountingModel._gated``:
    the boxes the detector's count took, None where the head counted, :class:`PartPeople` where
    it counted some of a wide picture's tiles)."""
    return np.array([_route(found) for found in people], dtype=object)


def _route(found: np.ndarray | None) -> str:
    if found is None:
        return BY_HEAD
    return BY_BOTH if isinstance(found, PartPeople) else BY_DETECTOR


def by_detector_alone(people: Sequence[np.ndarray | None]) -> np.ndarray:
    """True for each picture the detector counted whole (its interval is the detector's)."""
    return np.array([_route(found) == BY_DETECTOR for found in people], dtype=bool)


def tile_probes(maps: np.ndarray, tiles: Sequence[Any]) -> np.ndarray:
    """``(tiles, 2C)`` familiarity probes (:func:`~counting.heads.familiarity.map_statistics`) of
    each tile's core of one picture's ``(C, h, w)`` feature maps: what each tile looks like to the
    backbone, as a photo of its own would (a crowd beside an empty photo is, whole, half unlike
    a crowd)."""
    from counting.features.detector.evidence import core_cells
    from counting.heads.familiarity import map_statistics

    array = np.asarray(maps)
    along_rows = tiles[0].along_rows
    inside = core_cells(array.shape[-2] if along_rows else array.shape[-1], tiles)
    parts = [array[:, cells] if along_rows else array[:, :, cells] for cells in inside]
    # A core narrower than a map cell (a tiny picture) reads the whole picture's statistics.
    return np.concatenate([map_statistics(part if part.size else array) for part in parts])


def tile_shares(density: np.ndarray | None, tiles: Sequence[Any]) -> np.ndarray:
    """``(tiles,)`` share of a ``(h, w)`` density map's mass (negative density clipped to 0) in each
    detector tile's core (:func:`~counting.features.detector.evidence.detector_tiles`, their cores
    partition the picture's long side; a map cell belongs to the core holding its centre). A map
    without mass, or None, shares by core length. One tile: ``[1.0]``."""
    if len(tiles) == 1:
        return np.ones(1)
    cores = np.array([[tile.core_start, tile.core_stop] for tile in tiles], dtype=np.float64)
    by_length = (cores[:, 1] - cores[:, 0]) / tiles[0].length
    if density is None:
        return by_length
    mass = np.clip(np.asarray(density, dtype=np.float64), 0.0, None)
    profile = mass.sum(axis=1) if tiles[0].along_rows else mass.sum(axis=0)
    total = float(profile.sum())
    if total <= 0:
        return by_length
    from counting.features.detector.evidence import core_cells

    return (core_cells(len(profile), tiles) @ profile) / total


def boxes_in_tiles(boxes: np.ndarray, tiles: Sequence[Any], chosen: np.ndarray) -> np.ndarray:
    """The boxes (fractions of the picture, :func:`~counting.features.detector.evidence.person_boxes`)
    whose centre lies in the core of a ``chosen`` tile (as the detector counted them)."""
    found = np.asarray(boxes, dtype=np.float64).reshape(-1, 5)
    if len(tiles) == 1:
        return found if bool(np.asarray(chosen).reshape(-1)[0]) else found[:0]
    along = [1, 3] if tiles[0].along_rows else [0, 2]
    places = found[:, along].mean(axis=1) * tiles[0].length
    keep = np.zeros(len(found), dtype=bool)
    for tile, taken in zip(tiles, np.asarray(chosen, dtype=bool), strict=True):
        if taken:
            keep |= (places >= tile.core_start) & (places < tile.core_stop)
    return found[keep]


def tiled_density(
    density: np.ndarray, count: float, people: np.ndarray, tiles: Sequence[Any], handed: np.ndarray
) -> np.ndarray:
    """The ``(h, w)`` map of a wide picture the gate counted partly by the detector: the head's
    map, scaled to ``count`` (the picture's head count, before the gate), in the cores of the
    tiles the head counted, and one person about each box centre of ``people`` in the others; it
    sums to the picture's count, so zones share it by where the people are. Each person is spread
    over a few cells (a Gaussian of one cell, :data:`PERSON_SPREAD`), as the heads' map spreads
    theirs: this map is drawn as heat beside the heads' (annotated pictures), and a whole person
    in one cell made the picture's top, dimming the crowd's heat to a fraction of it."""
    from scipy.ndimage import gaussian_filter

    from counting.features.detector.evidence import core_cells

    head = np.clip(np.asarray(density, dtype=np.float64), 0.0, None)
    rows, cols = head.shape
    along_rows = tiles[0].along_rows
    detected = core_cells(rows if along_rows else cols, tiles)[np.asarray(handed, dtype=bool)].any(axis=0)
    mass = float(head.sum())
    head = head * (count / mass) if mass > 0 else head
    if along_rows:
        head[detected, :] = 0.0
    else:
        head[:, detected] = 0.0
    points = person_density(people, (rows, cols))
    spread = gaussian_filter(points, PERSON_SPREAD, mode="constant")
    total = float(spread.sum())  # less than the people where one stands at the picture's edge
    return head + (spread * (points.sum() / total) if total > 0 else spread)


def person_density(people: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``shape`` ``(h, w)`` map of one person at the grid cell of each box centre of ``people``
    (the boxes the gate's detector count took, :meth:`SparseGate.counted_boxes`): it sums to that
    count, so zones of a picture the detector counted split its people by where they are, not by
    the density head's reading of the picture."""
    rows, cols = shape
    boxes = np.asarray(people, dtype=np.float64).reshape(-1, 5)
    row = np.minimum(((boxes[:, 1] + boxes[:, 3]) / 2 * rows).astype(int), rows - 1)
    col = np.minimum(((boxes[:, 0] + boxes[:, 2]) / 2 * cols).astype(int), cols - 1)
    density = np.zeros((rows, cols))
    np.add.at(density, (row, col), 1.0)
    return density


def people_in_pixels(boxes: np.ndarray, frame_size: tuple[int, int]) -> np.ndarray:
    """``(m, 5)`` person boxes (``person_boxes``: fractions of the picture, then the score) in the
    pixels of a ``(height, width)`` frame."""
    height, width = frame_size
    return np.asarray(boxes, dtype=np.float64).reshape(-1, 5) * [width, height, width, height, 1.0]


class SparseGateError(ValueError):
    """A model file's sparse-gate section that cannot be read."""


def gate_features(
    head_counts: np.ndarray, persons: np.ndarray, familiarity: np.ndarray, axes: np.ndarray | None = None
) -> np.ndarray:
    """``(n, 2 + quantities + axes)`` gate inputs (NaN rows where any input is missing);
    ``axes``: the pictures' familiarity probes on the principal axes the gate reads."""
    head = np.log1p(np.clip(np.asarray(head_counts, dtype=np.float64).reshape(-1), 0.0, None))
    people = np.asarray(persons, dtype=np.float64).reshape(len(head), -1)
    known = np.asarray(familiarity, dtype=np.float64).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        familiar = np.log(np.where(known > 0, known, np.nan))
    columns = [head, people, familiar]
    if axes is not None:
        columns.append(np.asarray(axes, dtype=np.float64).reshape(len(head), -1))
    return np.column_stack(columns)


def photos_in(height: int, width: int) -> int:
    """How many photos the gate reads a ``height`` x ``width`` prepared input as: the detector's
    tiles of it (:func:`~counting.features.detector.evidence.detector_tiles`; 1 within 2:1)."""
    from counting.features.detector.evidence import detector_tiles

    return len(detector_tiles(int(height), int(width)))


def per_photo(
    head_counts: np.ndarray, persons: np.ndarray | None, photos: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The head counts and detector person rows of each picture's average photo: counts divided
    by ``photos``, the rows (square roots of counts, soft counts and heat mass) by its square
    root. ``photos`` None: the inputs as they are."""
    counts = np.asarray(head_counts, dtype=np.float64).reshape(-1)
    people = None if persons is None else np.asarray(persons, dtype=np.float64).reshape(len(counts), -1)
    if photos is None:
        return counts, people
    share = np.asarray(photos, dtype=np.float64).reshape(-1)
    return counts / share, None if people is None else people / np.sqrt(share)[:, None]


@dataclass
class Screen:
    """Which pictures need the detector at all (see the module's docstring): a logistic
    regression on ``[log(1 + head count), log(familiarity), axes]``, and the probability below
    which the gate cannot send a picture to the detector."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float

    def needs_detector(self, features: np.ndarray) -> np.ndarray:
        """True where the detector must run (NaN rows: False, the head's count stands)."""
        array = np.asarray(features, dtype=np.float64)
        finite = np.isfinite(array).all(axis=1)
        return finite & (_logistic(self, np.nan_to_num(array)) >= self.threshold)

    def to_document(self) -> dict[str, Any]:
        return _linear_document(self) | {"threshold": float(self.threshold)}

    @classmethod
    def from_document(cls, document: Any, dim: int) -> Screen:
        what = "the sparse gate's screen"
        mean, scale, coef, intercept = _read_linear(document, what, dim)
        try:
            threshold = float(document["threshold"])
        except (KeyError, TypeError, ValueError) as error:
            raise SparseGateError(f"{what} is incomplete or not numeric ({error})") from None
        if not 0.0 <= threshold < 1.0:
            raise SparseGateError(f"{what} needs a threshold in [0, 1), not {threshold:g}")
        return cls(mean, scale, coef, intercept, threshold)


def disputed_summary(n_disputed: int, n_counted: int, what: str = "pictures") -> str | None:
    """The one warning line for a run's disputed counts (the module's docstring, "Disputed
    counts"); None when there are none."""
    if n_disputed <= 0:
        return None
    one = n_disputed == 1
    return (
        f"{n_disputed} of {n_counted} {what} {'looks' if one else 'look'} sparse to the detector, but the density "
        f"heads count more than in any sparse training picture; {'its count is' if one else 'their counts are'} "
        "disputed and unreliable"
    )


def _logistic(part: Any, features: np.ndarray) -> np.ndarray:
    """A fitted logistic regression's probabilities (``part``: its standardisation, coefficients
    and intercept, as the gate and its screen hold them)."""
    logit = ((features - part.mean) / part.scale) @ part.coef + part.intercept
    return 1.0 / (1.0 + np.exp(-np.clip(logit, -60.0, 60.0)))


def _linear_document(part: Any) -> dict[str, Any]:
    """A fitted logistic regression's numbers (standardisation, coefficients) as JSON."""
    return {
        "mean": [float(v) for v in part.mean],
        "scale": [float(v) for v in part.scale],
        "coef": [float(v) for v in part.coef],
        "intercept": float(part.intercept),
    }


def _optional_number(value: Any, name: str) -> float | None:
    """A JSON number, or None for a missing one; TypeError for anything else (``true`` read as
    1.0 and ``"300"`` as 300 once passed for limits)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} {value!r} is not a number")
    return float(value)


def _read_linear(document: Any, what: str, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(mean, scale, coef, intercept)`` of :func:`_linear_document`, checked; SparseGateError
    (one line naming ``what``) when they are missing, of another size or not finite."""
    if not isinstance(document, dict):
        raise SparseGateError(f"{what} is not a JSON object")
    try:
        mean, scale, coef = (np.asarray(document[name], dtype=np.float64) for name in ("mean", "scale", "coef"))
        intercept = float(document["intercept"])
    except (KeyError, TypeError, ValueError) as error:
        raise SparseGateError(f"{what} is incomplete or not numeric ({error})") from None
    if any(array.shape != (dim,) for array in (mean, scale, coef)):
        raise SparseGateError(f"{what} needs {dim} numbers per array")
    if not all(np.isfinite(array).all() for array in (mean, scale, coef)) or not np.isfinite(intercept):
        raise SparseGateError(f"{what} holds non-finite numbers")
    if (scale <= 0).any():
        raise SparseGateError(f"{what} needs positive scales")
    return mean, scale, coef, intercept


def screen_features(head_counts: np.ndarray, familiarity: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """The gate's inputs that need no detector: ``[log(1 + head count), log(familiarity), axes]``."""
    head = np.asarray(head_counts, dtype=np.float64).reshape(-1)
    return gate_features(head, np.zeros((len(head), 0)), familiarity, axes)


@dataclass
class SparseGate:
    """A fitted gate (see the module's docstring); ``count_index`` picks the detector count used
    on sparse pictures (an index into the detector descriptor's score thresholds)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    count_index: int
    sparse_max: float = SPARSE_MAX
    axes: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    # None: the detector runs on every picture.
    screen: Screen | None = None
    # Head counts above this keep the head's count (None: no limit, a gate fitted before it).
    head_limit: float | None = None

    def __post_init__(self) -> None:
        # Here, not only where a file is read: a gate edited in Python was saved, and its file refused.
        limit = self.head_limit
        if limit is not None and not (np.isfinite(limit) and limit > 0):
            raise SparseGateError(f"the sparse gate's head_limit {limit:g} is not a positive count")

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def probability(self, features: np.ndarray) -> np.ndarray:
        """Chance that each picture holds at most ``sparse_max`` people (NaN rows give NaN)."""
        array = np.asarray(features, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != self.dim:
            raise ValueError(f"the sparse gate takes {self.dim} numbers per picture, got {array.shape}")
        return _logistic(self, array)

    def detector_counts(self, persons: np.ndarray) -> np.ndarray:
        """The detector's person count at the chosen threshold (rows stored as square roots)."""
        return np.rint(np.square(np.asarray(persons, dtype=np.float64)[:, self.count_index]))

    def counted_boxes(self, boxes: np.ndarray) -> np.ndarray:
        """The person boxes (:func:`~counting.features.detector.evidence.person_boxes`) that
        :meth:`detector_counts` counts: those scoring at least its threshold."""
        from counting.features.detector.descriptor import THRESHOLDS

        chosen = np.asarray(boxes, dtype=np.float64).reshape(-1, 5)
        return chosen[chosen[:, 4] >= THRESHOLDS[self.count_index]]

    def needs_detector(
        self,
        head_counts: np.ndarray,
        familiarity: np.ndarray,
        projected: np.ndarray,
        photos: np.ndarray | None = None,
    ) -> np.ndarray:
        """Pictures the detector must run on (all of them without a screen); ``photos``: as
        :meth:`apply`."""
        counts = per_photo(head_counts, None, photos)[0]
        if self.screen is None:
            return np.ones(len(counts), dtype=bool)
        axes = np.asarray(projected, dtype=np.float64).reshape(len(counts), -1)[:, : self.axes]
        return self.screen.needs_detector(screen_features(counts, familiarity, axes))

    def apply(
        self,
        head_counts: np.ndarray,
        persons: np.ndarray,
        familiarity: np.ndarray,
        projected: np.ndarray,
        photos: np.ndarray | None = None,
        limited: bool = True,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, sparse)``: the detector's count where the gate says sparse, else the head's.

        ``projected``: the familiarity probes on their principal axes
        (:meth:`~counting.heads.familiarity.Familiarity.project`). Pictures whose gate inputs are
        missing (no familiarity) keep the head's count. ``photos``: how many photos each picture
        is read as (:func:`photos_in`, the module's docstring, "Wide pictures"; None: one each).
        ``limited`` False: the head's limit lifted, the reading a disputed count is disputed by
        (the module's docstring, "Disputed counts")."""
        counts = np.asarray(head_counts, dtype=np.float64).reshape(-1)
        each, people = per_photo(counts, persons, photos)
        axes = np.asarray(projected, dtype=np.float64).reshape(len(counts), -1)[:, : self.axes]
        features = gate_features(each, people, familiarity, axes)
        finite = np.isfinite(features).all(axis=1)
        sparse = np.zeros(len(counts), dtype=bool)
        if finite.any():
            sparse[finite] = self.probability(features[finite]) > 0.5
        if limited:
            sparse &= self.within_limit(each)
        return np.where(sparse, self.detector_counts(persons), counts), sparse

    def needs_detector_tiles(
        self,
        head_counts: np.ndarray,
        shares: Sequence[np.ndarray],
        familiarity: np.ndarray,
        projected: np.ndarray,
        seen: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> np.ndarray:
        """Pictures the detector must run on, read tile by tile (:meth:`apply_tiles`): those with a
        tile the screen lets through (all of them without a screen)."""
        owner, head, familiar, axes = self._tiles(head_counts, shares, familiarity, projected, seen)
        # Each tile read as a picture of its own.
        wanted = self.needs_detector(head, familiar, axes)
        return np.bincount(owner, weights=wanted, minlength=len(shares)) > 0

    def apply_tiles(
        self,
        head_counts: np.ndarray,
        shares: Sequence[np.ndarray],
        tile_rows: Sequence[np.ndarray],
        familiarity: np.ndarray,
        projected: np.ndarray,
        seen: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
        limited: bool = True,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(counts, handed)``: :meth:`apply` on each detector tile of each picture (the module's
        docstring, "Wide pictures"). ``shares[k]``: picture ``k``'s share of its head count in
        each tile (:func:`tile_shares`; ``[1.0]`` for a picture within 2:1); ``tile_rows[k]``:
        the detector's ``(tiles, quantities)`` rows of those tiles (NaN where it did not run).
        ``familiarity`` and ``projected``: each picture's; ``seen[k]``, where given, picture
        ``k``'s tiles' own ``(familiarity, projected)`` (of :func:`tile_probes`), read instead.
        A picture's count is the sum of its tiles' counts (the detector's where the tile is
        handed over, the head's share elsewhere); ``handed[k]``: which of its tiles were handed
        over. A picture within 2:1 gets what :meth:`apply` gives it (``limited``: as there)."""
        owner, head, familiar, axes = self._tiles(head_counts, shares, familiarity, projected, seen)
        rows = (
            np.concatenate(
                [np.asarray(r, dtype=np.float64).reshape(len(s), -1) for r, s in zip(tile_rows, shares, strict=True)]
            )
            if len(shares)
            else np.zeros((0, 1))
        )
        each, sparse = self.apply(head, rows, familiar, axes, limited=limited)  # each tile a picture of its own
        counts = np.bincount(owner, weights=each, minlength=len(shares))
        # A picture with a NaN head count (unread) stays NaN, as in apply.
        counts[~np.isfinite(np.asarray(head_counts, dtype=np.float64).reshape(-1))] = np.nan
        edges = np.cumsum([len(s) for s in shares])[:-1]
        return counts, np.split(sparse, edges)

    def _tiles(
        self,
        head_counts: np.ndarray,
        shares: Sequence[np.ndarray],
        familiarity: np.ndarray,
        projected: np.ndarray,
        seen: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(owner, head, familiarity, axes)`` of every tile of every picture: the picture each
        tile belongs to, its head count, and its own familiarity and axes where ``seen`` has them
        (for as many tiles as ``shares`` gives the picture), its picture's elsewhere."""
        counts = np.asarray(head_counts, dtype=np.float64).reshape(-1)
        if len(shares) != len(counts):
            raise ValueError(f"{len(shares)} pictures' tile shares for {len(counts)} head counts")
        sizes = np.array([len(np.atleast_1d(part)) for part in shares], dtype=int)
        owner = np.repeat(np.arange(len(counts)), sizes)
        flat = (
            np.concatenate([np.asarray(part, dtype=np.float64).reshape(-1) for part in shares])
            if len(shares)
            else np.zeros(0)
        )
        familiar = np.asarray(familiarity, dtype=np.float64).reshape(-1)[owner]
        axes = np.asarray(projected, dtype=np.float64).reshape(len(counts), -1)[:, : self.axes][owner]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        for k, (own_familiarity, own_projected) in (seen or {}).items():
            if len(own_familiarity) == sizes[k]:
                familiar[starts[k] : starts[k + 1]] = own_familiarity
                axes[starts[k] : starts[k + 1]] = np.asarray(own_projected, dtype=np.float64)[:, : self.axes]
        return owner, counts[owner] * flat, familiar, axes

    def within_limit(self, head_counts: np.ndarray) -> np.ndarray:
        """True where the head's count allows a hand-over (module docstring, "The head's limit")."""
        counts = np.asarray(head_counts, dtype=np.float64).reshape(-1)
        if self.head_limit is None:
            return np.ones(len(counts), dtype=bool)
        return counts <= self.head_limit

    # ------------------------------------------------------------------ model file section
    def to_document(self) -> dict[str, Any]:
        return (
            _linear_document(self)
            | {
                "count_index": int(self.count_index),
                "sparse_max": float(self.sparse_max),
                "axes": int(self.axes),
                "settings": self.settings,
            }
            | ({} if self.head_limit is None else {"head_limit": float(self.head_limit)})
            | ({} if self.screen is None else {"screen": self.screen.to_document()})
        )

    @classmethod
    def from_document(cls, document: Any) -> SparseGate:
        from counting.features.detector.descriptor import QUANTITIES

        what = "the sparse gate"
        if not isinstance(document, dict):
            raise SparseGateError(f"{what} section is not a JSON object")
        try:
            count_index = int(document["count_index"])
            sparse_max = float(document.get("sparse_max", SPARSE_MAX))
            axes = int(document.get("axes", 0))
            head_limit = _optional_number(document.get("head_limit"), "head_limit")
        except (KeyError, TypeError, ValueError, OverflowError) as error:  # Overflow: int(Infinity)
            raise SparseGateError(f"{what} section is incomplete or not numeric ({error})") from None
        if not 0 <= axes <= max(AXES_GRID):
            raise SparseGateError(f"{what} reads 0 to {max(AXES_GRID)} familiarity axes, not {axes}")
        mean, scale, coef, intercept = _read_linear(document, what, 2 + len(QUANTITIES) + axes)
        if not 0 <= count_index < len(QUANTITIES) - 2:  # the last two are soft count and heat mass
            raise SparseGateError(f"{what}'s count_index {count_index} is not a detector threshold")
        settings = document.get("settings", {})
        screen = document.get("screen")
        return cls(
            mean,
            scale,
            coef,
            intercept,
            count_index,
            sparse_max,
            axes,
            settings if isinstance(settings, dict) else {},
            None if screen is None else Screen.from_document(screen, 2 + axes),
            head_limit,
        )


@dataclass(frozen=True)
class _GateRows:
    """What :func:`fit_sparse_gate` reads of its pictures: the whole pictures' head counts, the
    detector's person rows, true counts and familiarity axes, the head counts and gate inputs of
    each picture's average photo (:func:`per_photo`), and which rows the fit can use, which are
    sparse and which are pictures rather than copies."""

    head: np.ndarray
    people: np.ndarray
    truth: np.ndarray
    projected: np.ndarray
    each: np.ndarray  # the head count of each picture's average photo
    features: np.ndarray  # gate_features of each picture's average photo
    keep: np.ndarray  # every input known
    sparse: np.ndarray  # at most sparse_max people
    pictures: np.ndarray  # pictures, not copies (``originals``)


def _gate_rows(
    head_counts: np.ndarray,
    persons: np.ndarray,
    familiarity: np.ndarray,
    projected: np.ndarray,
    truth: np.ndarray,
    sparse_max: float,
    originals: np.ndarray | None,
    photos: np.ndarray | None,
) -> _GateRows:
    """:class:`_GateRows` of :func:`fit_sparse_gate`'s arguments; one clear error where too few
    pictures are usable or none of them is sparse."""
    head = np.asarray(head_counts, dtype=np.float64).reshape(-1)
    people = np.asarray(persons, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64).reshape(-1)
    projected = np.asarray(projected, dtype=np.float64).reshape(len(head), -1)
    each, each_people = per_photo(head, people, photos)
    features = gate_features(each, each_people, familiarity, projected)
    keep = np.isfinite(features).all(axis=1) & np.isfinite(truth)
    sparse = truth <= sparse_max
    if keep.sum() < 2 * FOLDS or not (keep & sparse).any():
        raise ValueError(
            f"the sparse gate needs at least {2 * FOLDS} pictures, some of them sparse (<= {sparse_max:g}) "
            f"({int(keep.sum())} usable, {int((keep & sparse).sum())} sparse)"
        )
    pictures = np.ones(len(head), dtype=bool) if originals is None else np.asarray(originals, dtype=bool)
    return _GateRows(head, people, truth, projected, each, features, keep, sparse, pictures)


def _detector_threshold(rows: _GateRows) -> tuple[int, list[float]]:
    """``(index, MAE by threshold)``: the detector's threshold that counts the usable sparse
    pictures (not their copies) best."""
    from counting.features.detector.descriptor import THRESHOLDS

    chosen_on = rows.keep & rows.sparse & rows.pictures
    sparse_truth = rows.truth[chosen_on]
    people = rows.people[chosen_on]
    errors = [np.mean(np.abs(np.rint(np.square(people[:, k])) - sparse_truth)) for k in range(len(THRESHOLDS))]
    return int(np.argmin(errors)), errors


def _gate_label(rows: _GateRows, count_index: int) -> tuple[np.ndarray, np.ndarray]:
    """``(label, weight)`` of each usable row: whether the detector's count is the closer one,
    weighted by ``log(1 + |head error - detector error|)`` plus :data:`WEIGHT_FLOOR`."""
    truth = rows.truth[rows.keep]
    detector = np.rint(np.square(rows.people[rows.keep, count_index]))
    saved = np.abs(rows.head[rows.keep] - truth) - np.abs(detector - truth)
    y = saved > 0  # the detector's count is the closer one
    weight = np.log1p(np.abs(saved)) + WEIGHT_FLOOR
    if y.all() or not y.any():
        raise ValueError("the sparse gate needs pictures where the detector counts better and some where it does not")
    return y, weight


def _head_limit(rows: _GateRows, y: np.ndarray) -> float | None:
    """The head's limit (module docstring): :data:`HEAD_LIMIT_FACTOR` times the largest head count
    of a sparse picture the detector counted closer; None where there is none."""
    # The limit comes from the pictures: a copy (grayscale grass) can lead the heads to hundreds
    # where the detector finds a few people, and through one the limit doubled.
    handed = y & rows.sparse[rows.keep] & rows.pictures[rows.keep]
    # Whole pictures' counts, though the limit is applied to a picture's average photo: a row of
    # photos the heads read as textures is evidence that so high a count can be sparse. From
    # its average photo the limit halved, and an empty texture photo (the heads 528) kept the
    # heads' count.
    return HEAD_LIMIT_FACTOR * float(np.max(rows.head[rows.keep][handed])) if handed.any() else None


@dataclass(frozen=True)
class _GateChoice:
    """The familiarity axes and regularisation the gate reads, chosen by cross-validated
    weighted log-loss, and that choice's out-of-fold probabilities of the usable rows."""

    axes: int
    C: float
    loss: float
    probability: np.ndarray


def _choose_by_cross_validation(
    rows: _GateRows, y: np.ndarray, weight: np.ndarray, seed: int, groups: np.ndarray | None
) -> _GateChoice:
    """The ``(axes, C)`` of :data:`AXES_GRID` x :data:`C_GRID` with the lowest weighted log-loss
    out of fold (``groups``: held out together)."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if groups is None:
        folds, fold_groups = StratifiedKFold(FOLDS, shuffle=True, random_state=seed), None
    else:
        folds = StratifiedGroupKFold(FOLDS, shuffle=True, random_state=seed)
        fold_groups = np.asarray(groups).reshape(-1)[rows.keep]
    choices = [(k, c) for k in AXES_GRID if k <= rows.projected.shape[1] for c in C_GRID]
    probabilities = _out_of_fold_probabilities(rows, y, weight, choices, folds.split, fold_groups)
    losses = [log_loss(y, probability, sample_weight=weight, labels=[False, True]) for probability in probabilities]
    best = int(np.argmin(losses))
    axes, c = choices[best]
    return _GateChoice(axes, c, losses[best], probabilities[best])


def _out_of_fold_probabilities(
    rows: _GateRows,
    y: np.ndarray,
    weight: np.ndarray,
    choices: list[tuple[int, float]],
    split: Callable[..., Any],
    fold_groups: np.ndarray | None,
) -> list[np.ndarray]:
    """Each ``(axes, C)``'s out-of-fold probabilities of the usable rows, the standardisation
    refitted inside every fold, so nothing of a held picture leaks into its own route.

    The folds are split and standardised once for every choice: per column, so a choice's first
    columns are standardised as they would be alone (what cross_val_predict with a
    StandardScaler pipeline computed, choice by choice, splitting the folds 36 times: 12 times
    the cost on 2,250 grouped rows)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    base = 2 + rows.people.shape[1]
    widest = base + max(k for k, _ in choices)
    probabilities = [np.zeros(int(rows.keep.sum())) for _ in choices]
    inputs = rows.features[rows.keep][:, :widest]
    for train, held in split(inputs, y, fold_groups):
        standardised = StandardScaler().fit(inputs[train])
        fitted_on, scored = standardised.transform(inputs[train]), standardised.transform(inputs[held])
        for probability, (k, c) in zip(probabilities, choices, strict=True):
            regression = LogisticRegression(C=c, max_iter=5000)
            regression.fit(fitted_on[:, : base + k], y[train], sample_weight=weight[train])
            probability[held] = regression.predict_proba(scored[:, : base + k])[:, 1]
    return probabilities


def _fitted_gate(
    rows: _GateRows,
    y: np.ndarray,
    weight: np.ndarray,
    choice: _GateChoice,
    count_index: int,
    errors: list[float],
    sparse_max: float,
) -> tuple[SparseGate, np.ndarray]:
    """``(gate, its inputs before standardising)``: the logistic regression of ``choice`` fitted on
    every usable row, with the settings a model file records (its screen not yet fitted)."""
    from sklearn.linear_model import LogisticRegression

    from counting.features.detector.descriptor import THRESHOLDS

    X = rows.features[rows.keep, : 2 + rows.people.shape[1] + choice.axes]
    mean, scale = X.mean(axis=0), np.maximum(X.std(axis=0), 1e-9)
    final = LogisticRegression(C=choice.C, max_iter=5000).fit((X - mean) / scale, y, sample_weight=weight)
    gate = SparseGate(
        mean=mean,
        scale=scale,
        coef=final.coef_[0].astype(np.float64),
        intercept=float(final.intercept_[0]),
        count_index=count_index,
        sparse_max=float(sparse_max),
        axes=int(choice.axes),
        head_limit=_head_limit(rows, y),
        settings={
            "C": choice.C,
            "axes": int(choice.axes),
            "log_loss": round(float(choice.loss), 4),
            "n_pictures": int(rows.keep.sum()),
            "n_sparse": int((rows.keep & rows.sparse).sum()),
            "n_detector_closer": int(y.sum()),
            "label": "the detector's count closer than the head's, weighted by log(1 + |head error - detector error|) + 0.1",
            "detector_threshold": float(THRESHOLDS[count_index]),
            "detector_mae_by_threshold": {
                f"{t:g}": round(float(e), 4) for t, e in zip(THRESHOLDS, errors, strict=True)
            },
        },
    )
    return gate, X


def _out_of_fold_counts(rows: _GateRows, gate: SparseGate, probability: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, sent)``: each usable picture gated by the fits without it (``probability``,
    out of fold, within the gate's head limit), NaN and not sent elsewhere."""
    handed_over = (probability > 0.5) & gate.within_limit(rows.each[rows.keep])
    oof = np.full(len(rows.head), np.nan)
    oof[rows.keep] = np.where(handed_over, gate.detector_counts(rows.people[rows.keep]), rows.head[rows.keep])
    sent = np.zeros(len(rows.head), dtype=bool)
    sent[rows.keep] = handed_over
    return oof, sent


def fit_sparse_gate(
    head_counts: np.ndarray,
    persons: np.ndarray,
    familiarity: np.ndarray,
    projected: np.ndarray,
    truth: np.ndarray,
    *,
    sparse_max: float = SPARSE_MAX,
    seed: int = 0,
    with_sent: bool = False,
    groups: np.ndarray | None = None,
    originals: np.ndarray | None = None,
    photos: np.ndarray | None = None,
) -> tuple:
    """``(gate, out-of-fold counts)`` from pictures the density head never trained on
    (``with_sent``: and, third, the mask of pictures those out-of-fold fits sent to the detector).

    ``projected``: the pictures' familiarity probes on its principal axes. The detector threshold
    is the one with the lowest MAE on the sparse pictures; the number of axes read and the
    regularisation are chosen by cross-validated log-loss. The out-of-fold counts (each picture
    gated by a fit without it) are what an interval is calibrated on.

    ``groups`` (one label per picture): pictures of one group are held out together by the
    cross-validation (a train picture and its recompressed copies, :mod:`counting.train.crowd`),
    so no picture's route is chosen by a fit that saw a copy of it. ``originals`` (a mask): the
    rows that are pictures, not copies; the detector's threshold and the gate's head limit
    (module docstring) are chosen on them alone, and the out-of-fold counts obey the limit.
    ``photos`` (one per picture, :func:`photos_in`): the gate reads each picture's average photo
    (:func:`per_photo`), as :meth:`SparseGate.apply` does; its counts, label and the head limit's
    evidence stay the picture's.
    """
    rows = _gate_rows(head_counts, persons, familiarity, projected, truth, sparse_max, originals, photos)
    count_index, errors = _detector_threshold(rows)
    y, weight = _gate_label(rows, count_index)
    choice = _choose_by_cross_validation(rows, y, weight, seed, groups)
    gate, X = _fitted_gate(rows, y, weight, choice, count_index, errors, sparse_max)
    known = np.asarray(familiarity, dtype=np.float64).reshape(-1)[rows.keep]
    gate.screen = _fit_screen(rows.each[rows.keep], known, rows.projected[rows.keep, : choice.axes], gate, X)
    gate.settings["screen_threshold"] = None if gate.screen is None else gate.screen.threshold
    oof, sent = _out_of_fold_counts(rows, gate, choice.probability)
    return (gate, oof, sent) if with_sent else (gate, oof)


def _fit_screen(
    head: np.ndarray,
    familiarity: np.ndarray,
    axes: np.ndarray,
    gate: SparseGate,
    features: np.ndarray,
) -> Screen | None:
    """The screen of a fitted gate: trained to find the pictures the gate sends to the detector;
    its threshold half the lowest probability it gives any of them. None (the detector runs on
    every picture) when the gate sends all of them or none.

    Trained on what the gate sends, not on what the detector counts better: near-ties among
    dense pictures are in the second set, and through them the screen let the detector run on
    three quarters of the Mall frames while the gate sent none of them."""
    from sklearn.linear_model import LogisticRegression

    needed = (gate.probability(features) > 0.5) & gate.within_limit(head)
    if needed.all() or not needed.any():
        return None
    inputs = screen_features(head, familiarity, axes)
    mean, scale = inputs.mean(axis=0), np.maximum(inputs.std(axis=0), 1e-9)
    fitted = LogisticRegression(max_iter=5000).fit((inputs - mean) / scale, needed)
    screen = Screen(mean, scale, fitted.coef_[0].astype(np.float64), float(fitted.intercept_[0]), 0.0)
    screen.threshold = float(np.min(_logistic(screen, inputs[needed]))) / 2
    return screen
