"""The general crowd model: one conv density head on several head-dot sets, the AGP's correction.

The sets (``counting.data.datasets.crowd``) differ by two orders of magnitude in count and by
their number of pictures (Mall: 600 near-identical frames; ShanghaiTech A: 225 dense photos), so
training crops are drawn **balanced per set** (each set the same share of crops, whatever its
size), and Mall's frames are thinned (every ``sequence_stride``-th frame: neighbours are near
copies, and every map is held in memory while the head trains).

One head (not the four-head ensemble of ``train --head-kind conv``) keeps the model fast enough
for photos (docs/density.md, "General crowd model"): it is trained on three quarters of the train
pictures, and the AGP learns, from the other quarter's region sums, how the count differs from
the head's sum; the model adds ``correction_weight`` of that correction to the head's sum.
"""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from counting.core.files import atomic_write_text
from counting.core.metrics import crowd_metrics
from counting.heads.density.conv.fitting import ConvSettings
from counting.heads.kinds import HeadRows
from counting.model.counting_model import CountingModel
from counting.model.pictures import person_rows
from counting.train.pipeline import TrainingConfig, assemble_model, calibrate, fit_rows, plan_training

__all__ = [
    "CrowdSettings",
    "GateInputs",
    "add_specialists",
    "balanced_weights",
    "crowd_figures",
    "fit_crowd_gate",
    "gate_inputs",
    "head_rows",
    "head_validation_samples",
    "read_out_of_fold",
    "route_intervals",
    "thinned_train_part",
    "train_crowd_model",
    "write_out_of_fold",
]


# The gate's copy families (CrowdSettings.gate_copy_family), as a model file describes its gate's.
COPY_FAMILIES = {
    "wider": "saved again as JPEG or WebP at quality 60-95, half of them also 0.6-1.0 of their size, "
    "a quarter also grayscale, a quarter blurred 0.4-1.5 px",
    "recompressed": "saved again as JPEG or WebP at quality 60-95, half of them also 0.6-1.0 of their size",
}


@dataclass(frozen=True)
class CrowdSettings:
    """How the crowd model is trained (the defaults are the shipped model's)."""

    # Short side of the network input in pixels (every set is resized to it).
    input_size: int = 576
    grid: tuple[int, int] = (2, 2)
    # Every k-th frame of a video set (Mall) is trained on.
    sequence_stride: int = 3
    # Crops drawn per set: "balanced" (each set an equal share) or "uniform" (each picture alike).
    sampling: str = "balanced"
    # With balanced sampling: (set, relative share) pairs for sets that get more or fewer crops
    # than the others (default share 1).
    # Shipped (2026-11-25): Mall half the others' share. coco-voc20 had twice (run B) while the
    # head alone counted sparse photos; the sparse gate now sends them to the detector, and equal
    # shares gave ShanghaiTech B and Mall more (docs/density.md, "The ensemble").
    shares: tuple[tuple[str, float], ...] = (("coco-voc20", 1.0), ("mall", 0.5))
    steps: int = 5000
    width: int = 32
    depth: int = 3
    # Weight of the crops' count error beside the cells' (ConvSettings.count_weight; 0: cells only).
    count_weight: float = 0.0
    # The model's count: the head's sum plus this much of the AGP's correction. 0 was best on three
    # of the four validation parts at 0 / 0.25 / 0.5 / 0.75 / 1 in both runs (docs/density.md): the
    # correction, learnt on a quarter mixing 0 and 3,000 people, follows the dense sets.
    correction_weight: float = 0.0
    # Heads trained (1: one head on three quarters; K > 1: K heads, each on all folds but one, and
    # the model counts with their mean; every train picture then has an out-of-fold count).
    folds: int = 4
    # Share of training crops drawn from grayscale copies of the train pictures (0: none); with
    # it, add_specialists also fits the router on the copies' statistics. Without copies a
    # grayscale frame of a colour scene was miscounted: Mall frames as their grayscale copies
    # scored MAE 14.79 against 2.36 in colour. The shipped model gives its specialists 0.25 and
    # its general heads none (docs/density.md, "Grayscale pictures").
    gray_share: float = 0.0
    # Share of training crops drawn from degraded copies (counting.data.copies.degraded_pixels:
    # blurred or made smaller, saved again as JPEG or WebP), for the general heads and the
    # specialists alike; with it, add_specialists also fits the router on the copies' statistics.
    # docs/density.md, "Soft and recompressed photos".
    degraded_share: float = 0.0
    # Everyday copies (counting.data.copies: saved again as JPEG or WebP, half of them smaller) of
    # each picture the sparse gate is fitted on, fitted on beside it (0: none). Without them the
    # gate read recompression as "not an everyday photo": the coco-voc20 validation photos saved
    # again at JPEG quality 95 scored MAE 1.71 instead of 1.14 (docs/density.md, "Recompressed
    # photos").
    gate_copies: int = 1
    # Which copies: "wider" (a quarter of them also grayscale, a quarter blurred) or "recompressed"
    # (the gate's copies until 2026-11-27). Recompressed alone, the gate kept the heads' 269 for a
    # grayscale copy of a photo of 12 children on grass (docs/density.md, "Grayscale and blurred
    # copies for the gate").
    gate_copy_family: str = "wider"
    # A people mask on the general heads (counting.heads.crowd.people_mask): their density kept
    # where a cell classifier sees people; the specialists, trained on their own scenes, get none.
    # Off in the shipped model: fitted on the pictures alone, it took most of the heads' excess
    # off everyday photos (coco-voc20 validation RMSE 5.97 -> 3.37) but not off their grayscale
    # and WebP copies, and the gate refitted on the masked counts lowered its head limit (825.8 ->
    # 311.4), so a grayscale placemat was kept at 587 people; drawing the copies' cells too, as it
    # does now, kept the colour placemat at 355 (coco-voc20 RMSE 30.83; docs/density.md, "A people
    # mask for the general heads" and "The people mask with its copies").
    people_mask: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        self.conv_settings()  # refuses what the heads would refuse (shares of copies outside [0, 1)), here
        if self.gate_copies not in (0, 1):
            raise ValueError(f"gate_copies {self.gate_copies}: expected 0 or 1 (copies of each gate picture)")
        if self.gate_copy_family not in COPY_FAMILIES:
            raise ValueError(f"gate_copy_family {self.gate_copy_family!r}: expected one of {', '.join(COPY_FAMILIES)}")

    def conv_settings(self) -> ConvSettings:
        # One head, weights averaged (EMA), last weights kept; its validation quarter is measured
        # once at the end (every evaluation counts every validation picture).
        return ConvSettings(
            width=self.width,
            depth=self.depth,
            count_weight=self.count_weight,
            max_steps=self.steps,
            eval_every=self.steps,
            ema=0.995,
            keep="last",
            folds=self.folds,
            seed=self.seed,
            gray_share=self.gray_share,
            degraded_share=self.degraded_share,
            people_mask=self.people_mask,
        )

    def record(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__} | {
            "grid": list(self.grid),
            "shares": dict(self.shares),
        }


def thinned_train_part(dataset: Any, stride: int) -> Any:
    """The dataset with its train part only, every ``stride``-th frame of the video sets kept."""
    sources = dataset.source_names()
    kept = []
    counter: dict[str, int] = {}
    for sample, source in zip(dataset.samples, sources, strict=True):
        if sample.split != "train":
            continue
        position = counter.get(source, 0)
        counter[source] = position + 1
        if source in VIDEO_SETS and position % stride:
            continue
        kept.append(sample)
    return replace(dataset, samples=kept)


# Sets whose pictures are frames of one video.
VIDEO_SETS = ("mall",)


def balanced_weights(sources: np.ndarray, shares: dict[str, float] | None = None) -> np.ndarray:
    """Per-picture draw weights giving every set the same share of crops (1 / its pictures), or
    the relative share ``shares`` names for it (default 1)."""
    names, inverse, sizes = np.unique(np.asarray(sources, dtype=str), return_inverse=True, return_counts=True)
    share = np.array([(shares or {}).get(name, 1.0) for name in names])
    return share[inverse] / sizes[inverse]


def train_crowd_model(
    dataset: Any,
    settings: CrowdSettings = CrowdSettings(),
    *,
    cache: Any = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    out_of_fold: dict[str, np.ndarray] | None = None,
) -> CountingModel:
    """Train the crowd model on the train part of a :class:`~counting.data.datasets.crowd.CrowdDataset`.

    ``out_of_fold``, when given, gets each validated train picture's region sums by the head that
    never trained on it (path -> ``(1 + cells,)`` row): what :func:`fit_crowd_gate` can fit on."""

    if settings.sampling not in ("balanced", "uniform"):
        raise ValueError(f"sampling must be 'balanced' or 'uniform', got {settings.sampling!r}")
    started = time.perf_counter()
    train = thinned_train_part(dataset, settings.sequence_stride)
    plan = _crowd_plan(train, settings, cache, progress, log)
    inputs = plan.inputs
    sources = train.source_names()
    weights = balanced_weights(sources, dict(settings.shares)) if settings.sampling == "balanced" else None
    head, frame = _fit_crowd_heads(plan, train, settings, cache, progress, log, sample_weights=weights)
    head.settings |= {"crowd": settings.record()}
    kept = ~np.isnan(frame).any(axis=1)
    if out_of_fold is not None:
        out_of_fold.update(
            {str(sample.path): row for sample, row, keep in zip(inputs.samples, frame, kept, strict=True) if keep}
        )
    rows = HeadRows(
        samples=[sample for sample, keep in zip(inputs.samples, kept, strict=True) if keep],
        frame=frame[kept],
        density_head=head,
        count_offset="head_sum",
        correction_weight=settings.correction_weight,
    )
    fitted = fit_rows(plan, rows, log)
    model = assemble_model(plan, rows, fitted, "standard")
    calibrate(model, plan, rows, fitted, log)
    model.training["crowd"] = settings.record() | {"seconds": round(time.perf_counter() - started, 1)}
    return model


def _given_gate_out_of_fold(
    model: CountingModel,
    dataset: Any,
    settings: CrowdSettings,
    out_of_fold: dict[str, np.ndarray] | None,
    gate_out_of_fold: GateOutOfFold | None,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None:
    """The routes of the gate's out-of-fold counts passed to :func:`add_specialists`, checked to be
    the model's gate's (before any head is trained); None where none were passed."""
    if gate_out_of_fold is None:
        return None
    if model.sparse_gate is None or out_of_fold is None:
        raise ValueError(f"{model.name}: the gate's out-of-fold counts need a gate and the heads' out-of-fold rows")
    return _checked_gate_out_of_fold(model, dataset, settings, out_of_fold, gate_out_of_fold)


def _check_specialist_sets(train: Any, sets: tuple[str, ...]) -> None:
    """One clear line for a set without train pictures, or named as an interval's route is."""
    from counting.heads.crowd.routing import ROUTE_GENERAL
    from counting.heads.crowd.sparse_gate import BY_DETECTOR, DETECTOR_FOUND_NONE

    known = set(train.source_names().tolist())
    unknown = [name for name in sets if name not in known]
    if unknown:
        raise ValueError(f"no train pictures of set {unknown[0]!r} (sets: {', '.join(sorted(known))})")
    taken = [name for name in sets if name in (ROUTE_GENERAL, BY_DETECTOR, DETECTOR_FOUND_NONE)]
    if taken:  # the intervals' routes are named by set, beside these three
        raise ValueError(f"a set named {taken[0]!r} cannot have a specialist: the name is a route's")


def _trained_specialists(
    train: Any,
    sets: tuple[str, ...],
    settings: CrowdSettings,
    folds: int,
    cache: Any,
    progress: bool,
    log: Callable[[str], None] | None,
) -> tuple[dict[str, Any], dict[str, tuple[list, np.ndarray]]]:
    """``(specialists, held_out)``: each set's conv heads, trained on its train pictures alone
    (``folds`` heads, no people mask), and its pictures with their sums by the heads that never
    trained on them (what its route's interval is calibrated on)."""
    specialists = {}
    held_out: dict[str, tuple[list, np.ndarray]] = {}
    for name in sets:
        part = train.of_source(name)
        plan = _crowd_plan(part, settings, cache, progress, log)
        if log is not None:
            log(f"specialist {name}: {len(part.samples)} train pictures")
        specialist, sums = _fit_crowd_heads(
            plan, part, replace(settings, folds=folds, people_mask=False), cache, progress, log
        )
        specialist.settings |= {"specialist_of": name}
        specialists[name] = specialist
        held_out[name] = (list(plan.inputs.samples), sums)
    return specialists, held_out


def _router_pictures(
    plain: CountingModel, train: Any, settings: CrowdSettings, cache: Any
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(statistics, labels, probes)``: the map statistics the router is fitted on, of every
    readable train picture and of its copies of each kind the specialists trained on, labelled by
    set, and the pictures' own probes by path. A picture that cannot be read is one clear error."""
    from counting.heads.density.conv.training import copy_kinds

    paths = [str(sample.path) for sample in train.samples]
    statistics, ok, errors = plain.probe_paths(paths, cache=cache)
    if errors:
        raise ValueError(f"{len(errors)} train pictures could not be read: {next(iter(errors.values()))}")
    labels = train.source_names()[ok]
    statistics = statistics[ok]
    # The specialists learnt their set's copies (grayscale, degraded): the router must send them there too.
    for share, change in copy_kinds(settings.conv_settings()):
        if share:
            copies, seen, _ = plain.seeing(**change).probe_paths(paths, cache=cache)
            statistics = np.concatenate([statistics, copies[seen]])
            labels = np.concatenate([labels, train.source_names()[seen]])
    probes = dict(zip(np.array(paths)[ok].tolist(), statistics[: int(ok.sum())], strict=True))
    return statistics, labels, probes


def _fitted_router(statistics: np.ndarray, labels: np.ndarray, seed: int, log: Callable[[str], None] | None) -> Any:
    """The set router (counting.heads.crowd.routing) fitted on the pictures' statistics and sets."""
    from counting.heads.crowd.routing import fit_set_router

    router = fit_set_router(statistics, labels, seed=seed)
    if log is not None:
        log(
            f"router: C={router.settings['C']:g}, train accuracy {router.settings['train_accuracy']:.3f} "
            f"on {len(labels)} pictures of {len(router.classes)} sets"
        )
    return router


def _refitted_gate_out_of_fold(
    model: CountingModel,
    dataset: Any,
    settings: CrowdSettings,
    cache: Any,
    out_of_fold: dict[str, np.ndarray] | None,
    probes: dict[str, np.ndarray],
    log: Callable[[str], None] | None,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None:
    """The gate's own out-of-fold routes again (fit_crowd_gate's fit, same pictures and seed), the
    general and detector routes' calibration; None without a gate or the heads' out-of-fold rows."""
    if model.sparse_gate is None or out_of_fold is None:
        return None
    # As the gate was fitted: with its copies, or without them (a gate fitted before they were),
    # of the family it recorded (recompressed alone before it recorded one).
    copies = int(model.sparse_gate.settings.get("copies", 0))
    family = str(model.sparse_gate.settings.get("copy_family", "recompressed"))
    refit = replace(settings, gate_copies=copies, gate_copy_family=family)
    inputs = gate_inputs(model, dataset, refit, cache, 4, out_of_fold, probes, log=log)
    _, counts, sent = inputs.fitted(settings.seed, with_sent=True)
    return GateOutOfFold(inputs.paths, inputs.truth, counts, sent).gated()


def add_specialists(
    model: CountingModel,
    dataset: Any,
    sets: tuple[str, ...],
    settings: CrowdSettings = CrowdSettings(),
    *,
    cache: Any = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    folds: int = 1,
    out_of_fold: dict[str, np.ndarray] | None = None,
    gate_out_of_fold: GateOutOfFold | None = None,
) -> CountingModel:
    """The crowd model with a specialist head for each set in ``sets``, the router that mixes
    them into its density (:mod:`counting.heads.crowd.routing`), and its interval per route
    (:func:`route_intervals`).

    Each specialist is a conv head trained as the general head is (``settings``: input size,
    width, steps), on the train pictures of its set alone: one head on three quarters of them (the
    fourth is measured), or with ``folds`` K > 1 an ensemble of K heads, each on all folds but one.
    The router is fitted on the map statistics of every train picture of every set, labelled by set
    (with ``settings.gray_share`` or ``degraded_share`` > 0 also on each picture's grayscale or
    degraded copy, which the specialists then train on too). ``out_of_fold``: the general heads' out-of-fold region sums of the train
    pictures (:func:`train_crowd_model`); with them and a sparse gate the general and detector
    routes get intervals of their own too, calibrated on the gate's out-of-fold counts:
    ``gate_out_of_fold`` (what :func:`fit_crowd_gate` found for this gate), or else the gate is
    fitted again as fit_crowd_gate fitted it (same pictures and seed: the same fit). The model's
    count, gate and familiarity are kept."""
    head = model.density_head
    if getattr(head, "kind", None) != "conv":
        raise ValueError(f"{model.name}: specialists join a conv density head, the model has none")
    given = _given_gate_out_of_fold(model, dataset, settings, out_of_fold, gate_out_of_fold)
    started = time.perf_counter()
    train = thinned_train_part(dataset, settings.sequence_stride)
    _check_specialist_sets(train, sets)
    specialists, held_out = _trained_specialists(train, sets, settings, folds, cache, progress, log)
    statistics, labels, probes = _router_pictures(general_heads(model), train, settings, cache)
    router = _fitted_router(statistics, labels, settings.seed, log)
    routed = replace(model, density_head=replace(head, specialists=specialists, router=router))
    record: dict[str, Any] = {"sets": list(sets), "folds": folds, "router": router.settings}
    if model.interval is not None:
        gated = given
        if gated is None:
            gated = _refitted_gate_out_of_fold(model, dataset, settings, cache, out_of_fold, probes, log)
        routes, record["intervals"] = route_intervals(
            routed, held_out, probes, out_of_fold, gated, cache=cache, seed=settings.seed, log=log
        )
        routed.interval = replace(model.interval, by_route=routes)
    routed.training = dict(model.training) | {
        "specialists": record | {"seconds": round(time.perf_counter() - started, 1)}
    }
    return routed


def _checked_gate_out_of_fold(
    model: CountingModel,
    dataset: Any,
    settings: CrowdSettings,
    out_of_fold: dict[str, np.ndarray],
    found: GateOutOfFold,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``found``'s routes, once they are seen to be the model's gate's: the pictures the gate was
    fitted on, in order, and the out-of-fold MAE its fit recorded."""
    expected = [str(sample.path) for sample in _gate_samples(dataset, settings, out_of_fold)]
    recorded = model.sparse_gate.settings.get("out_of_fold_mae")
    if list(found.paths) != expected:
        raise ValueError(
            f"the gate's out-of-fold counts hold {len(found.paths)} pictures, not the {len(expected)} "
            f"{model.name}'s gate was fitted on (another --out-of-fold or data folder?)"
        )
    if recorded is None or abs(found.mae() - float(recorded)) > 1e-5:
        raise ValueError(
            f"the gate's out-of-fold counts (MAE {found.mae():.6f}) are not those of {model.name}'s gate "
            f"(MAE {recorded}): pass the file fit_crowd_gate.py wrote with this model"
        )
    return found.gated()


@dataclass
class _RouteCalibration:
    """The intervals calibrated so far, per route, and what each was calibrated on (the record a
    model keeps); a route with too few pictures for ``level`` keeps the model's interval."""

    level: float
    seed: int
    log: Callable[[str], None] | None
    intervals: dict[str, Any] = field(default_factory=dict)
    record: dict[str, dict] = field(default_factory=dict)

    def calibrate(self, route: str, truth: np.ndarray, counts: np.ndarray, facts: dict) -> None:
        """The interval of ``route`` from its pictures' true counts and counts, where they suffice."""
        self.record[route] = {"pictures": len(truth)} | facts
        fitted = _route_interval(truth, counts, self.level, self.seed)
        if fitted is None:
            self.record[route]["kept"] = "the model's interval: too few pictures for the level"
        else:
            self.intervals[route] = fitted
            self.record[route] |= {
                "scale": fitted.scale,
                "out_of_fold_mae": round(float(np.mean(np.abs(counts - truth))), 4),
            }
        if self.log is not None:
            self.log(f"interval for route {route}: {len(truth)} pictures, {self._width(route, truth)}")

    def _width(self, route: str, truth: np.ndarray) -> str:
        """How wide ``route``'s interval is at its median count (for the log)."""
        mine = self.intervals.get(route)
        if mine is None:
            return "keeps the model's"
        return (
            f"{mine.scale} scale, +/- {mine.half_width(np.array([np.median(truth)]))[0]:.1f} "
            f"at its median count {np.median(truth):g}; out-of-fold MAE {self.record[route]['out_of_fold_mae']:.2f}"
        )


@dataclass(frozen=True)
class _Mixing:
    """How counting mixes a picture's heads: the model's router and specialists (``head``) over
    the specialists' sets (``names``), and the model counting by its general heads alone."""

    head: Any
    names: list[str]
    plain: CountingModel
    cache: Any

    def weights(self, statistics: np.ndarray) -> np.ndarray:
        """``(n, 1 + sets)`` weights of the general heads and each specialist (SetRouter.mixture)."""
        return self.head.router.mixture(statistics, self.names)

    def routes(self, weights: np.ndarray) -> np.ndarray:
        """Each picture's route from its weights (SetRouter.routes)."""
        return self.head.router.routes(weights, self.names)

    def mixed(
        self, name: str, weights: np.ndarray, general: np.ndarray, own: np.ndarray, paths: list[str]
    ) -> np.ndarray:
        """Region sums of pictures of set ``name`` as counting mixes them: ``weights`` on the general
        heads' sums, on ``name``'s specialist's (``own``) and on the other specialists' (made here)."""
        mixed = weights[:, :1] * general + weights[:, 1 + self.names.index(name), None] * own
        for other, specialist in self.head.specialists.items():
            share = weights[:, 1 + self.names.index(other)]
            if other != name and share.any():
                counted = replace(self.plain, density_head=specialist)
                mixed[share > 0] += share[share > 0, None] * head_rows(
                    counted, np.array(paths)[share > 0].tolist(), self.cache
                )
        return mixed


def _general_part(
    plain: CountingModel, paths: list[str], general_sums: dict[str, np.ndarray] | None, cache: Any
) -> tuple[np.ndarray, str]:
    """``(sums, what they are)`` of the general heads on ``paths``: their out-of-fold rows where
    ``general_sums`` has every picture, else the general head's own (in-sample) sums."""
    if general_sums is not None and all(path in general_sums for path in paths):
        return np.stack([general_sums[path] for path in paths]), "general heads' out-of-fold sums"
    return head_rows(plain, paths, cache), "general head's own sums (in-sample)"


def _specialist_pairs(
    mixing: _Mixing,
    name: str,
    samples: list,
    sums: np.ndarray,
    probes: dict[str, np.ndarray],
    general_sums: dict[str, np.ndarray] | None,
    sent_paths: set[str],
) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(truth, counts, facts)`` a specialist's route is calibrated on (:func:`route_intervals`):
    its set's held-out pictures the router sends it and the gate keeps from the detector, each
    counted as counting mixes it."""
    paths = [str(sample.path) for sample in samples]
    usable = ~np.isnan(sums).any(axis=1) & np.array([path in probes and path not in sent_paths for path in paths])
    weights = np.zeros((len(paths), 1 + len(mixing.names)))
    weights[usable] = mixing.weights(np.stack([probes[path] for path in np.array(paths)[usable]]))
    mine = usable & (mixing.routes(weights) == name)
    chosen = [path for path, keep in zip(paths, mine, strict=True) if keep]
    general, source = _general_part(mixing.plain, chosen, general_sums, mixing.cache)
    mixed = mixing.mixed(name, weights[mine], general, sums[mine], chosen)
    truth = np.array([float(sample.count) for sample, keep in zip(samples, mine, strict=True) if keep])
    facts = {
        "routed_elsewhere": int((usable & ~mine).sum()),
        "sent_to_detector": sum(path in sent_paths for path in paths),
        "general_part": source,
    }
    return truth, mixing.plain.predict_features(mixed), facts


def _gated_routes(
    mixing: _Mixing, probes: dict[str, np.ndarray], paths: list[str], counts: np.ndarray, sent: np.ndarray
) -> np.ndarray:
    """Each gated picture's route: the detector's where the gate sent it, else the router's; ""
    for a picture without probes or count."""
    from counting.heads.crowd.sparse_gate import BY_DETECTOR

    known = np.array([path in probes for path in paths]) & np.isfinite(counts)
    routes = np.full(len(paths), "", dtype=object)
    statistics = np.stack([probes[path] for path in np.array(paths)[known]])
    routes[known] = mixing.routes(mixing.weights(statistics))
    routes[known & sent] = BY_DETECTOR
    return routes


def _calibrate_gated_routes(
    calibration: _RouteCalibration,
    mixing: _Mixing,
    probes: dict[str, np.ndarray],
    gated: tuple[list[str], np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """The ``detector-none``, ``general`` and ``detector`` routes on the gate's out-of-fold counts
    (:func:`route_intervals`); ``detector-none`` first, its pictures left on ``detector`` where
    they are too few."""
    from counting.heads.crowd.routing import ROUTE_GENERAL
    from counting.heads.crowd.sparse_gate import BY_DETECTOR, DETECTOR_FOUND_NONE

    paths, truth, counts, sent = gated
    routes = _gated_routes(mixing, probes, paths, counts, sent)
    found_none = (routes == BY_DETECTOR) & (counts == 0)  # the detector's count: whole people
    facts = {"counted": "the gate's out-of-fold counts"}
    calibration.calibrate(DETECTOR_FOUND_NONE, truth[found_none], counts[found_none], facts)
    if DETECTOR_FOUND_NONE in calibration.intervals:
        routes[found_none] = DETECTOR_FOUND_NONE
    else:
        calibration.record[DETECTOR_FOUND_NONE]["kept"] = (
            "the detector route's interval: too few pictures for the level"
        )
    for route in (ROUTE_GENERAL, BY_DETECTOR):
        chosen = routes == route
        calibration.calibrate(route, truth[chosen], counts[chosen], facts)


def route_intervals(
    model: CountingModel,
    held_out: dict[str, tuple[list, np.ndarray]],
    probes: dict[str, np.ndarray],
    general_sums: dict[str, np.ndarray] | None = None,
    gated: tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None = None,
    *,
    cache: Any = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, dict]]:
    """``(intervals, record)``: the model's interval per route (Mondrian conformal,
    counting.heads.uncertainty; ``CountingModel.interval_routes`` names a picture's route) and
    what each was calibrated on.

    **A specialist's route** (the router's largest weight is its specialist's): its set's train
    pictures, ``held_out[set]`` (the pictures and their region sums by the specialist heads that
    never trained on them; ``folds`` > 1: every picture; one head: its validation quarter, NaN
    elsewhere, left out). Each is counted as counting mixes it: the router's weights (from
    ``probes``, path -> map statistics) on the general heads' sums (``general_sums``, their
    out-of-fold rows; without them the general head's own sums, in-sample, which the record says),
    its specialist's held-out sums and the other specialists' sums. Pictures of the set the router
    sends elsewhere are left out and counted in the record (``routed_elsewhere``); train pictures
    of other sets it sends to the specialist are not calibrated on (the router fits its train
    pictures: it sent none on the shipped data).

    **The ``general`` and ``detector`` routes**, with ``gated`` = ``(paths, truth, counts, sent)``:
    the gate's out-of-fold counts of the train pictures (``fit_sparse_gate(..., with_sent=True)``)
    and the mask it sent to the detector. ``detector``: the pictures sent; ``general``: the others
    the router leaves to the general heads. A picture the gate sends to the detector is on the
    detector's route, whichever set it is of, so it is left out of its specialist's too. Of the
    pictures sent, those the detector found no one in make ``detector-none`` (calibrated first:
    with too few of them for the level, they stay on ``detector``).

    A route with too few pictures for the level keeps the model's interval (``record`` says so)."""
    head = model.density_head
    level = model.interval.level if model.interval is not None else 0.9
    mixing = _Mixing(head, list(head.specialists), general_heads(model), cache)
    sent_paths = set() if gated is None else {path for path, sent in zip(gated[0], gated[3], strict=True) if sent}
    calibration = _RouteCalibration(level, seed, log)
    for name, (samples, sums) in held_out.items():
        calibration.calibrate(name, *_specialist_pairs(mixing, name, samples, sums, probes, general_sums, sent_paths))
    if gated is not None:
        _calibrate_gated_routes(calibration, mixing, probes, gated)
    return calibration.intervals, calibration.record


def _route_interval(truth: np.ndarray, counts: np.ndarray, level: float, seed: int) -> Any:
    """A split-conformal interval on one route's pairs, its scale chosen on them; None when
    they are too few for ``level``."""
    from counting.heads.uncertainty import ConformalInterval, choose_scale, conformal_rank

    if len(truth) == 0 or conformal_rank(len(truth), level) > len(truth):
        return None
    scale, _ = choose_scale(truth, counts, level=level, seed=seed)
    return ConformalInterval.fit(truth, counts, level=level, scale=scale)


def _crowd_plan(dataset: Any, settings: CrowdSettings, cache: Any, progress: bool, log: Any) -> Any:
    """The training plan of the crowd route's conv heads (maps of CONV_LAYERS, no ROI)."""
    from counting.heads.density.conv.training import CONV_LAYERS

    config = TrainingConfig(
        input_size=settings.input_size,
        grid=settings.grid,
        density_head=True,
        density_kind="conv",
        density_layers=CONV_LAYERS,
        seed=settings.seed,
        use_roi=False,
    )
    return plan_training(dataset, config, cache=cache, progress=progress, log=log)


def _fit_crowd_heads(
    plan: Any,
    dataset: Any,
    settings: CrowdSettings,
    cache: Any,
    progress: bool,
    log: Any,
    sample_weights: np.ndarray | None = None,
) -> tuple[Any, np.ndarray]:
    """``(head, out-of-fold region sums)``: the conv heads ``settings`` describe, on the plan's pictures."""
    from counting.heads.density.conv.training import CONV_LAYERS, fit_conv_descriptors

    inputs = plan.inputs
    return fit_conv_descriptors(
        inputs.samples,
        dataset,
        inputs.backbone,
        inputs.preprocessing,
        settings.grid,
        is_sequence=False,
        seed=settings.seed,
        cache=cache,
        progress=progress,
        log=log,
        layers=CONV_LAYERS,
        settings=settings.conv_settings(),
        sample_weights=sample_weights,
    )


def head_validation_samples(dataset: Any, settings: CrowdSettings = CrowdSettings()) -> list:
    """The train pictures a one-head model (``folds=1``) never trained on: the quarter of the
    thinned train part it is early-stopped on (:func:`~counting.heads.density.conv.training.validation_part`), the rows its
    AGP learns from. What the sparse gate is fitted on."""
    from counting.heads.density.conv.training import validation_part

    train = thinned_train_part(dataset, settings.sequence_stride)
    indices = np.array([sample.index for sample in train.samples])
    held = validation_part(indices, False, settings.seed)
    return [sample for sample, keep in zip(train.samples, held, strict=True) if keep]


def fit_crowd_gate(
    model: CountingModel,
    dataset: Any,
    settings: CrowdSettings = CrowdSettings(),
    *,
    cache: Any = None,
    batch_size: int = 4,
    log: Callable[[str], None] | None = None,
    out_of_fold: dict[str, np.ndarray] | None = None,
    gate_out_of_fold: GateOutOfFold | None = None,
) -> CountingModel:
    """The model with a sparse gate (counting.heads.crowd.sparse_gate) fitted on the head's held-out
    quarter, and its interval recalibrated on the gate's out-of-fold counts there.

    The model needs its familiarity section first (``scripts/familiarize_several.py``): the gate
    reads the familiarity, taken without each picture's own reference (it is a training picture).
    ``out_of_fold`` (path -> region sums, from :func:`train_crowd_model`): fit on those pictures
    and the head counts of those sums instead; with ``folds`` > 1 they are every train picture, each counted by the
    head that never trained on it (the model's own head, the ensemble, trained on all of them).
    With ``settings.gate_copies`` the gate is also fitted on an everyday copy of each picture
    (:func:`_copy_inputs`); the interval is calibrated on the pictures' counts alone.
    ``gate_out_of_fold``: filled with the gate's out-of-fold counts of the pictures and the ones it
    sent to the detector (what :func:`add_specialists` calibrates the general and detector routes
    on; :func:`write_gate_out_of_fold` keeps them, so that step need not fit the gate again).
    """
    from counting.heads.uncertainty import ConformalInterval, choose_scale

    if model.familiarity is None:
        raise ValueError(f"{model.name}: the sparse gate reads familiarity; add it first (counting familiarize)")
    folds = int(model.training.get("crowd", {}).get("folds", 1))
    if out_of_fold is None and folds > 1:
        # The ensemble trained on every train picture: its own counts of them are in-sample.
        raise ValueError(
            f"{model.name}: an ensemble of {folds} heads needs its out-of-fold rows to fit the gate "
            "(scripts/train_crowd_model.py --out-of-fold FILE, then fit_crowd_gate.py --out-of-fold FILE)"
        )
    started = time.perf_counter()
    inputs = gate_inputs(model, dataset, settings, cache, batch_size, out_of_fold, log=log)
    paths, truth, heads = inputs.paths, inputs.truth, inputs.heads
    gate, oof, sent = inputs.fitted(settings.seed, with_sent=True)
    if gate_out_of_fold is not None:
        found = gate_out_of_fold
        found.paths, found.truth, found.counts, found.sent = list(paths), truth, oof, sent
    level = model.interval.level if model.interval is not None else 0.9
    scale, widths = choose_scale(truth, oof, level=level, seed=settings.seed)
    interval = ConformalInterval.fit(truth, oof, level=level, scale=scale)
    gate.settings |= {
        "copies": settings.gate_copies,
        "copy_family": settings.gate_copy_family,
        "fitted_on": f"{len(paths)} train pictures, each counted by a head that never trained on it"
        + (
            ""
            if inputs.copies is None
            else f", and an everyday copy of each ({COPY_FAMILIES[settings.gate_copy_family]})"
        ),
        "out_of_fold_mae": float(np.mean(np.abs(oof - truth))),
        "head_mae": float(np.mean(np.abs(np.clip(heads, 0, None) - truth))),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if log is not None:
        log(
            f"sparse gate: C={gate.settings['C']:g}, detector threshold {gate.settings['detector_threshold']:g}, "
            f"{gate.settings['n_detector_closer']} of {gate.settings['n_pictures']} held-out pictures counted closer "
            f"by the detector ({gate.settings['n_sparse']} sparse); "
            f"out-of-fold MAE {gate.settings['out_of_fold_mae']:.2f} (head alone {gate.settings['head_mae']:.2f}); "
            f"interval scale {scale}"
        )
    gated = replace(model, sparse_gate=gate, interval=interval)
    gated.training = dict(model.training) | {"sparse_gate": gate.settings, "interval_scale_widths_gated": widths}
    return gated


@dataclass
class GateOutOfFold:
    """The gate's out-of-fold counts of its train pictures (each counted by the gate fitted
    without its fold) and which of them it sent to the detector: what the general and detector
    routes' intervals are calibrated on (:func:`route_intervals`)."""

    paths: list[str] = field(default_factory=list)
    truth: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sent: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def mae(self) -> float:
        return float(np.mean(np.abs(np.asarray(self.counts) - np.asarray(self.truth))))

    def gated(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        return self.paths, np.asarray(self.truth), np.asarray(self.counts), np.asarray(self.sent, dtype=bool)


def write_gate_out_of_fold(path: str | os.PathLike[str], found: GateOutOfFold) -> None:
    """CSV ``image,truth,count,sent`` of :func:`fit_crowd_gate`'s ``gate_out_of_fold``, written atomically."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["image", "truth", "count", "sent"])
    writer.writerows(
        [source, f"{truth:g}", f"{count:.6f}", int(bool(sent))]
        for source, truth, count, sent in zip(found.paths, found.truth, found.counts, found.sent, strict=True)
    )
    atomic_write_text(path, text.getvalue())


def read_gate_out_of_fold(path: str | os.PathLike[str]) -> GateOutOfFold:
    """The counts :func:`write_gate_out_of_fold` wrote; one clear line for a file that is not one."""
    try:
        with open(path, newline="") as handle:
            table = list(csv.reader(handle))
        if not table or table[0] != ["image", "truth", "count", "sent"]:
            raise ValueError("its header is not image,truth,count,sent")
        rows = table[1:]
        return GateOutOfFold(
            [row[0] for row in rows],
            np.array([float(row[1]) for row in rows]),
            np.array([float(row[2]) for row in rows]),
            np.array([row[3] == "1" for row in rows], dtype=bool),
        )
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path}: not the gate's out-of-fold counts (fit_crowd_gate.py --gate-out-of-fold): {error}"
        ) from None


@dataclass
class GateInputs:
    """What the sparse gate is fitted on: train pictures each counted by a head that never
    trained on them, with the detector's person rows and the familiarity the gate reads."""

    paths: list[str]
    truth: np.ndarray
    heads: np.ndarray  # the heads' counts
    persons: np.ndarray  # the detector's person rows
    familiarity: np.ndarray  # without each picture's own reference
    projected: np.ndarray  # the probes on the familiarity's principal axes
    # The same of each picture's everyday copy (counting.data.copies), in the same order; None: no copies.
    copies: GateInputs | None = None
    # How many photos the gate reads each picture as (sparse_gate.photos_in); None: one each.
    photos: np.ndarray | None = None

    def fitted(self, seed: int, with_sent: bool = False) -> tuple:
        """:func:`~counting.heads.crowd.sparse_gate.fit_sparse_gate` on the pictures and their copies
        (a picture and its copy held out together; the detector's threshold chosen on the
        pictures alone): the gate, then the out-of-fold counts (and the sent mask) of the
        pictures, not of the copies."""
        from counting.heads.crowd.sparse_gate import fit_sparse_gate

        parts = [self] if self.copies is None else [self, self.copies]
        n = len(self.paths)

        def joined(name: str) -> np.ndarray:
            return np.concatenate([getattr(part, name) for part in parts])

        fitted = fit_sparse_gate(
            joined("heads"),
            joined("persons"),
            joined("familiarity"),
            joined("projected"),
            joined("truth"),
            seed=seed,
            with_sent=with_sent,
            photos=None if any(part.photos is None for part in parts) else joined("photos"),
            groups=np.tile(np.arange(n), len(parts)),
            originals=np.arange(n * len(parts)) < n,
        )
        return (fitted[0], *(part[:n] for part in fitted[1:]))


def gate_inputs(
    model: CountingModel,
    dataset: Any,
    settings: CrowdSettings,
    cache: Any,
    batch_size: int,
    out_of_fold: dict[str, np.ndarray] | None,
    known_probes: dict[str, np.ndarray] | None = None,
    log: Callable[[str], None] | None = None,
) -> GateInputs:
    """The gate's pictures (every one with ``out_of_fold`` rows, else the one head's held-out
    quarter) and what :func:`~counting.heads.crowd.sparse_gate.fit_sparse_gate` reads of them.
    ``known_probes`` (path -> probe, of readable pictures): probes already made, not made again."""
    samples = _gate_samples(dataset, settings, out_of_fold)
    paths = [str(sample.path) for sample in samples]
    truth = np.array([float(sample.count) for sample in samples])
    plain = replace(model, sparse_gate=None)
    general_counts = None  # the general heads' counts of the pictures, where a pass made them
    if out_of_fold is not None:
        # The heads' counts are the out-of-fold ones: only the probes need the maps (running the
        # ensemble over them too would compute counts that are thrown away).
        if known_probes is not None and all(path in known_probes for path in paths):
            probes, ok = np.stack([known_probes[path] for path in paths]), np.ones(len(paths), dtype=bool)
        elif settings.gate_copies:
            # The copies are compared with the general heads' counts of the pictures: one pass
            # over the maps gives those and the probes.
            general = general_heads(model)
            found = _head_pass(general, paths, cache, batch_size, with_probes=True)
            probes, ok, general_counts = found.probes, found.ok, general.predict_features(found.features)
        else:
            probes, ok, _ = plain.probe_paths(paths, cache=cache, batch_size=batch_size)
        rows = np.stack([out_of_fold[path] for path in paths])
        heads = np.where(ok, plain.predict_features(rows), np.nan)
    else:
        # One pass over the maps gives both the head's rows and the familiarity probes.
        found = _head_pass(plain, paths, cache, batch_size, with_probes=True)
        heads, probes = plain.predict_features(found.features), found.probes
    familiarity = model.familiarity.scores_without_self(probes)
    grids: dict[int, tuple[int, int]] = {}

    def keep_grid(k: int, tensor: Any) -> None:
        grids[k] = plain.density_grid(tensor)

    backbone = plain.get_backbone()
    persons, _, _ = person_rows(paths, np.isfinite(heads), {}, backbone, plain.preprocessing(), keep_grid)
    projected = model.familiarity.project(probes)
    photos = model.gate_photos([grids.get(k, (0, 0)) for k in range(len(paths))])
    inputs = GateInputs(paths, truth, heads, persons, familiarity, projected, photos=photos)
    if settings.gate_copies:
        wider = settings.gate_copy_family == "wider"
        inputs.copies = _copy_inputs(inputs, model, probes, settings.seed, cache, log, general_counts, wider)
    return inputs


def _gate_samples(dataset: Any, settings: CrowdSettings, out_of_fold: dict[str, np.ndarray] | None) -> list:
    """The pictures the gate is fitted on, in the dataset's order: every one with ``out_of_fold``
    rows, else the one head's held-out quarter."""
    if out_of_fold is not None:
        return [sample for sample in dataset.samples if str(sample.path) in out_of_fold]
    return head_validation_samples(dataset, settings)


def _copy_inputs(
    inputs: GateInputs,
    model: CountingModel,
    probes: np.ndarray,
    seed: int,
    cache: Any,
    log: Callable[[str], None] | None,
    general_counts: np.ndarray | None = None,
    wider: bool = True,
) -> GateInputs:
    """What the gate reads of each picture's everyday copy (counting.data.copies;
    ``recipe_for(seed, k, wider=wider)`` for the k-th picture); NaN rows where the picture has no
    head count.

    The copy's head count is the picture's (out-of-fold) count moved by what the copy changes:
    ``heads[k] + general(copy) - general(picture)``, both counted by the model's general heads
    (the picture's from its maps, through ``cache``, unless ``general_counts`` holds them; the
    copy's are made here and not kept). The
    head that never trained on the picture is one member of the ensemble, which the model file
    does not name; the shift keeps the picture's out-of-fold error and adds the copy's effect.
    The copy's familiarity leaves out the picture's own reference (it is a training picture), as
    the picture's does. One picture at a time: the copies differ in size."""
    from counting.data.copies import everyday_copy, recipe_for
    from counting.data.imaging import load_image
    from counting.features.detector.evidence import person_evidence
    from counting.heads.applied import Chunking
    from counting.model.counting_model import DENSITY_BATCH, DENSITY_CHUNK

    general = general_heads(model)
    backbone = general.get_backbone()
    chunking = Chunking(DENSITY_CHUNK, DENSITY_BATCH)
    n = len(inputs.paths)
    heads = np.full(n, np.nan)
    persons = np.full_like(inputs.persons, np.nan)
    copy_probes = np.full_like(np.asarray(probes, dtype=np.float64), np.nan)
    photos = np.ones(n, dtype=int)
    started = time.perf_counter()
    counted = np.flatnonzero(np.isfinite(inputs.heads))
    if log is not None:
        log(f"sparse gate: an everyday copy of each of {len(counted)} pictures (a few minutes on 2 cores)")
    if general_counts is None:
        own = general.predict_features(head_rows(general, [inputs.paths[k] for k in counted], cache))
    else:
        own = np.asarray(general_counts, dtype=np.float64)[counted]
    for k, picture_count in zip(counted, own, strict=True):
        copy = everyday_copy(load_image(inputs.paths[k]), recipe_for(seed, int(k), wider=wider))
        tensor = general.prepare_image(copy)
        rows = general.applied_head.rows_of_prepared(general, [tensor], None, chunking)
        copied = general.predict_features(rows.features, source="frames")[0]
        heads[k] = max(0.0, inputs.heads[k] + copied - picture_count)
        copy_probes[k] = rows.probes[0]
        persons[k] = person_evidence([tensor], backbone.normalisation)[0]
        photos[k] = model.gate_photos([general.density_grid(tensor)])[0]
    familiarity = model.familiarity.scores_without(copy_probes, np.asarray(probes, dtype=np.float64))
    if log is not None:
        log(f"sparse gate: {int(np.isfinite(heads).sum())} copies in {time.perf_counter() - started:.0f} s")
    projected = model.familiarity.project(copy_probes)
    return GateInputs(inputs.paths, inputs.truth, heads, persons, familiarity, projected, photos=photos)


def general_heads(model: CountingModel) -> CountingModel:
    """The model counting by its general heads alone: no specialists, router or sparse gate."""
    return replace(model, density_head=replace(model.density_head, specialists={}, router=None), sparse_gate=None)


def head_rows(model: CountingModel, paths: list, cache: Any = None, batch_size: int = 4) -> np.ndarray:
    """``(n, 1 + cells)`` region sums of the model's head on image files (what its AGP reads;
    NaN rows for pictures that cannot be read), by the model's own chunked map loop."""
    return np.asarray(_head_pass(model, paths, cache, batch_size).features, dtype=float)


def _head_pass(model: CountingModel, paths: list, cache: Any, batch_size: int, with_probes: bool = False) -> Any:
    """The model's head kind over image files (``PathRows``: rows, ok, errors, probes)."""
    from counting.heads.applied import Chunking
    from counting.model.counting_model import DENSITY_BATCH, DENSITY_CHUNK

    sources = [str(path) for path in paths]
    chunking = Chunking(DENSITY_CHUNK, DENSITY_BATCH)
    return model.applied_head.rows_of_paths(
        model, sources, None, cache, batch_size, False, chunking, with_probes=with_probes
    )


def crowd_figures(
    model: CountingModel,
    dataset: Any,
    part: str = "test",
    cache: Any = None,
    correction_weights: tuple[float, ...] = (),
) -> dict[str, dict[str, Any]]:
    """Per set: MAE / MSE / RMSE of the model on ``part`` (the validation part), the head's sum
    alone, the interval coverage, and the head's figures at other ``correction_weights``
    (without the sparse gate)."""
    figures: dict[str, dict[str, Any]] = {}
    chosen = dataset.subset(part)
    sources = chosen.source_names()
    for name in dict.fromkeys(sources):
        members = [sample for sample, source in zip(chosen.samples, sources, strict=True) if source == name]
        truth = np.array([sample.count for sample in members], dtype=float)
        rows = head_rows(model, [sample.path for sample in members], cache)
        # The model's own counts (sparse gate included), as `counting count` gives them.
        result = model.count_paths([sample.path for sample in members], cache=cache, batch_size=4)
        counts, low, high = result.counts, result.low, result.high
        entry: dict[str, Any] = {"n": len(members)} | crowd_metrics(truth, counts)
        entry["head_mae"] = float(np.mean(np.abs(np.clip(rows[:, 0], 0, None) - truth)))
        if low is not None:
            entry["coverage"] = float(np.mean((truth >= low) & (truth <= high)))
        for weight in correction_weights:
            other = replace(model, correction_weight=weight, sparse_gate=None).predict_features(rows)
            entry[f"mae_w{weight:g}"] = float(np.mean(np.abs(other - truth)))
        figures[name] = entry
    return figures


def write_out_of_fold(path: str | os.PathLike[str], rows: dict[str, np.ndarray]) -> None:
    """CSV ``image,sum,cell_1..`` of :func:`train_crowd_model`'s ``out_of_fold`` rows (each
    picture's region sums by the head that never trained on it), written atomically."""
    cells = len(next(iter(rows.values()))) - 1 if rows else 0
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["image", "sum", *(f"cell_{k + 1}" for k in range(cells))])
    writer.writerows([source, *(f"{value:.6f}" for value in row)] for source, row in rows.items())
    atomic_write_text(path, text.getvalue())


def read_out_of_fold(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The rows :func:`write_out_of_fold` wrote (path -> region sums), for :func:`fit_crowd_gate`;
    one clear line for a file that is not one (as :func:`read_gate_out_of_fold`)."""
    try:
        with open(path, newline="") as handle:
            table = list(csv.reader(handle))
        if not table or table[0][:2] != ["image", "sum"]:
            raise ValueError("its header is not image,sum,cell_1,...")
        return {row[0]: np.array([float(value) for value in row[1:]]) for row in table[1:]}
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path}: not the heads' out-of-fold rows (train_crowd_model.py --out-of-fold): {error}"
        ) from None
