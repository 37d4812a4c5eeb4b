"""Training pipeline: dataset -> descriptors (cached) -> AGP regressor -> CountingModel.

The train split is divided into a part the regressor is fitted on and a calibration part it
never sees; the calibration part gives the model's validation figures and the split-conformal
count interval. With a grid, the regressor learns per-tile counts (from the head dots) from
per-tile descriptors of one forward pass, and a frame's count is the sum over its tiles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import DatasetError, TrainingError
from counting.core.metrics import crowd_metrics, voc_metrics
from counting.data.datasets.splits import cv_folds
from counting.features.layouts import check_layout, model_features, training_rows, training_weights
from counting.heads.kinds import HeadRows, TrainingInputs
from counting.heads.multiclass import apply_gate, check_transform, choose_gate, forward_transform
from counting.heads.registry import head_kind_for
from counting.model.counting_model import CountingModel
from counting.train.familiarity import familiarity_from_rows

CALIBRATION_MODES = defaults.CALIBRATION_MODES
# Frames per contiguous block of the "blocks" calibration hold-out.
CALIBRATION_BLOCK = 10
# Frames per run dealt to the cross-validation folds on sequences (None: one run per fold).
CV_BLOCK: int | None = 10


@dataclass
class TrainingConfig:
    """Everything that decides a training run (recorded in the model file)."""

    backbone: str = defaults.BACKBONE
    weights: str | None = None
    input_size: int | None = defaults.INPUT_SIZE
    grid: tuple[int, int] | None = defaults.GRID
    # One of counting.features.layouts.LAYOUTS; None: "frame" without a grid, else "tiles", or
    # "tiles+frame" with whole_frame_rows.
    layout: str | None = None
    whole_frame_rows: bool = defaults.WHOLE_FRAME_ROWS
    use_roi: bool = True
    kernel: str = defaults.KERNEL
    n_centers: int = defaults.N_CENTERS
    n_validation: int | None = None  # None: defaults.N_VALIDATION, fewer on small training sets
    max_epochs: int | None = None  # None: the regressor's default
    interval_level: float = defaults.INTERVAL_LEVEL
    calibration: str = "auto"  # one of CALIBRATION_MODES
    calibration_fraction: float = defaults.CALIBRATION_FRACTION
    min_calibration: int = defaults.MIN_CALIBRATION
    seed: int = defaults.SEED
    batch_size: int = defaults.BATCH_SIZE
    # counting.features.descriptors spec: "scores" (class scores), "pooled", "sum:block10+final,perspective", ...
    descriptor: str = "scores"
    # counting.heads.multiclass: targets the regressor fits (one-row-per-image layouts), and per-class
    # presence thresholds chosen on the out-of-fold (or held-out) predictions of the train images.
    target_transform: str = "none"
    gate: bool = False
    # Whole-frame descriptors averaged with the mirrored photo's (counting.features.flip).
    flip_average: bool = False
    # A density head on intermediate feature maps (counting.heads.density); the AGP then regresses the
    # count from the head's sums over the ROI and each --grid cell, one "frame" row per image.
    density_head: bool = False
    # The head's kind (ridge, rff, conv) and the layers it reads (None: the kind's default).
    density_kind: str = "ridge"
    density_layers: tuple[str, ...] | None = None

    def resolved_layout(self) -> str:
        """The layout these settings train (checked against the grid)."""
        if self.density_head:
            return "frame"
        if self.layout is not None:
            return check_layout(self.layout, self.grid)
        if self.grid is None:
            return "frame"
        return "tiles+frame" if self.whole_frame_rows else "tiles"

    def record(self) -> dict:
        """JSON-ready copy for the model file (the weights path is machine-specific: name only)."""
        data = asdict(self)
        data["layout"] = self.resolved_layout()
        data["grid"] = None if self.grid is None else list(self.grid)
        data["density_layers"] = None if self.density_layers is None else list(self.density_layers)
        data["weights"] = None if self.weights is None else Path(self.weights).name
        return data


def calibration_split(
    indices: np.ndarray, mode: str, fraction: float, minimum: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(fit, calibration)`` of the train samples.

    ``tail`` holds out the last frames of a sequence: neighbouring frames are near copies, so a
    random hold-out would be scored almost in-sample and the interval would come out too narrow.
    """
    n = len(indices)
    positions = np.arange(n)
    if mode == "none":
        return positions, positions[:0]
    size = max(int(minimum), int(round(fraction * n)))
    if size >= n:
        raise DatasetError(
            f"train split: {n} samples are too few to hold out {size} for interval calibration "
            "(use more training images or --calibration none)"
        )
    if mode == "tail":
        order = np.argsort(indices, kind="stable")
        return np.sort(order[: n - size]), np.sort(order[n - size :])
    if mode == "blocks":
        # Whole runs of neighbouring frames spread over the sequence: representative of all of
        # it (unlike the tail) and, but for block edges, not next to a fitted frame (unlike random).
        order = np.argsort(indices, kind="stable")
        blocks = [order[k : k + CALIBRATION_BLOCK] for k in range(0, n, CALIBRATION_BLOCK)]
        chosen: list[np.ndarray] = []
        for b in np.random.default_rng(seed).permutation(len(blocks)):
            if sum(len(c) for c in chosen) >= size:
                break
            chosen.append(blocks[b])
        held = np.sort(np.concatenate(chosen))
        return np.setdiff1d(positions, held), held
    if mode == "random":
        held = np.random.default_rng(seed).choice(n, size=size, replace=False)
        return np.setdiff1d(positions, held), np.sort(held)
    raise ValueError(f"calibration {mode!r}: expected one of {', '.join(CALIBRATION_MODES)}")


def make_regressor(config: TrainingConfig, n_rows: int, log: Callable[[str], None] | None = None) -> Any:
    """An AGPRegressor for ``n_rows`` training rows with the config's settings."""
    from agp import AGPRegressor

    n_validation = config.n_validation
    if n_validation is None:
        # Keep the paper's 100 validation rows when there is room, fewer on small sets.
        n_validation = int(min(defaults.N_VALIDATION, max(5, n_rows // 5)))
    epochs = {} if config.max_epochs is None else {"max_epochs": config.max_epochs}
    return AGPRegressor(
        n_centers=config.n_centers,
        kernel=config.kernel,
        validation_fraction=n_validation,
        random_state=config.seed,
        callback=None if log is None else _epoch_logger(log),
        **epochs,
    )


def _epoch_logger(log: Callable[[str], None]) -> Callable[[int, float, float], None]:
    """Live line per epoch (epoch 0 is the regressor's grid-search start)."""

    def on_epoch(epoch: int, train_loss: float, val_loss: float) -> None:
        label = "grid start" if epoch == 0 else f"epoch {epoch:>4}"
        log(f"{label:>10}  train loss {train_loss:10.4f}  validation loss {val_loss:10.4f}")

    return on_epoch


def _json_history(regressor: Any) -> dict:
    history = regressor.history_
    return {key: [float(value) for value in values] for key, values in history.items()}


def _fit_regressor(
    config: TrainingConfig,
    X: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | None,
    root: Any,
    log: Callable[[str], None] | None,
) -> Any:
    regressor = make_regressor(config, len(X), log)
    try:
        regressor.fit(X, y, sample_weight=weights)
    except ValueError as error:
        # agp reports bad settings for the data (more centres than rows, ...) as ValueError.
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise TrainingError(f"{root}: cannot fit the regressor on {len(X)} rows ({detail})") from None
    # The logger is a closure over the console: not part of the model (nor JSON-able).
    regressor.callback = None
    return regressor


def train_model(
    dataset: Any,
    config: TrainingConfig | None = None,
    cache: Any = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    split: str | None = None,
    extract: Callable[..., Any] | None = None,
) -> CountingModel:
    """Fit a CountingModel on the train split of ``dataset`` (a loaded CountingDataset).

    The stages: every setting is checked (:func:`plan_training`, before any work); the head kind
    the config names (:mod:`counting.heads.kinds`) turns the train images into the AGP's rows;
    the AGP is fitted on them (:func:`fit_rows`); the model is assembled (:func:`assemble_model`)
    and its interval calibrated (:func:`calibrate`).

    Calibration (``config.calibration``): ``cv`` fits the regressor on all train images and
    calibrates the interval on out-of-fold predictions of every train image (K extra fits);
    ``tail`` / ``blocks`` / ``random`` hold a part out of the fit; ``none`` skips the interval.
    ``split`` is the split string the dataset was loaded with, recorded in the model file.
    ``extract`` replaces ``extract_features`` (same signature), e.g. on a Dask cluster.
    """
    plan = plan_training(dataset, config or TrainingConfig(), cache=cache, progress=progress, log=log, extract=extract)
    rows = head_kind_for(plan.config, plan.inputs.multi_output).rows(plan.inputs)
    fitted = fit_rows(plan, rows, log)
    model = assemble_model(plan, rows, fitted, split)
    calibrate(model, plan, rows, fitted, log)
    familiarity_from_rows(  # how much a new picture resembles these (counting.heads.familiarity)
        model,
        rows,
        plan.inputs.layout,
        cache=cache,
        batch_size=plan.config.batch_size,
        dataset=f"{dataset.name} {split or dataset.split}",
        log=log,
    )
    return model


@dataclass
class TrainingPlan:
    """A checked training run: its inputs (shared with the head kinds) and what the AGP learns."""

    config: TrainingConfig
    inputs: TrainingInputs
    roi_mask: np.ndarray | None
    tile_targets: np.ndarray | None


@dataclass
class FittedRows:
    """The AGP fitted on the rows, and how the train images were split for calibration."""

    regressor: Any
    targets: np.ndarray  # per image, transformed and (conv ensemble) minus the head's count
    fit: np.ndarray  # positions the regressor was fitted on
    held: np.ndarray  # positions that calibrate the interval
    folds: list[np.ndarray]  # cross-validation folds (mode "cv"), else empty
    mode: str
    n_rows: int


def plan_training(
    dataset: Any,
    config: TrainingConfig,
    *,
    cache: Any = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    extract: Callable[..., Any] | None = None,
) -> TrainingPlan:
    """Check every setting against the dataset, then load the backbone: no image is read yet."""
    from counting.features.backbones import Preprocessing, get_backbone
    from counting.features.descriptors import OWN_BACKBONE, Descriptor
    from counting.features.tiles import dot_tile_counts

    samples = list(dataset.subset("train").samples)
    if not samples:
        raise DatasetError(f"{dataset.root}: the train split of {dataset.name} is empty")
    multi_output = dataset.class_names is not None
    roi_mask = dataset.roi_mask if config.use_roi else None
    layout = config.resolved_layout()
    tile_targets = None
    if layout in ("tiles", "tiles+frame"):
        if multi_output:
            raise DatasetError(
                f"{dataset.root}: a --grid with tiles needs head dots, which {dataset.name} does not have"
            )
        tile_targets = dot_tile_counts(samples, config.grid, roi_mask, dataset.name)
    descriptor = Descriptor.build(
        config.descriptor, getattr(dataset, "perspective_map", None), source=str(dataset.root)
    )
    if descriptor.uses_maps and layout != "frame":
        raise TrainingError(f"descriptor {descriptor.text!r}: per-cell sums come from its levels=..., not a --grid")
    kind = head_kind_for(config, multi_output)
    kind.check(config, descriptor, dataset.root)
    if extract is not None and not kind.distributes:  # was dropped in silence: trained here
        raise TrainingError(
            f"--cluster extracts descriptors on a Dask cluster; a {kind.name} head learns from feature maps "
            "made here: leave out --cluster"
        )
    check_multiclass_settings(config, layout, multi_output, dataset.root)
    # A descriptor kind with its own network (the detector) names its backbone itself.
    own = OWN_BACKBONE.get(descriptor.spec.kind)
    backbone = get_backbone(own) if own else get_backbone(config.backbone, weights=config.weights)
    descriptor.check(backbone)
    inputs = TrainingInputs(
        config=config,
        dataset=dataset,
        samples=samples,
        layout=layout,
        descriptor=descriptor,
        backbone=backbone,
        preprocessing=Preprocessing(input_size=config.input_size, roi_mask=roi_mask),
        is_sequence=dataset.name in defaults.SEQUENCE_DATASETS,
        multi_output=multi_output,
        cache=cache,
        progress=progress,
        log=log,
        extract=extract,
    )
    return TrainingPlan(config=config, inputs=inputs, roi_mask=roi_mask, tile_targets=tile_targets)


def _rows(plan: TrainingPlan, rows: HeadRows, targets: np.ndarray, positions: np.ndarray) -> tuple:
    """``(X, y, weights)`` of the AGP for the train images at ``positions``."""
    layout, frame, cells = plan.inputs.layout, rows.frame, rows.cells
    X, y = training_rows(
        layout,
        None if frame is None else frame[positions],
        None if cells is None else cells[positions],
        targets[positions],
        None if plan.tile_targets is None else plan.tile_targets[positions],
    )
    return X, y, training_weights(layout, len(positions), 0 if cells is None else cells.shape[1])


def fit_rows(plan: TrainingPlan, rows: HeadRows, log: Callable[[str], None] | None) -> FittedRows:
    """Split the train images for calibration and fit the AGP on the fitted part's rows."""
    config = plan.config
    targets = forward_transform(rows.counts, config.target_transform)
    if rows.count_offset == "head_sum":
        from counting.heads.density.conv.training import correction_targets

        targets = correction_targets(rows.frame, targets)
    indices = rows.indices
    mode = "cv" if config.calibration == "auto" else config.calibration
    if mode == "cv":
        fit = held = np.arange(len(rows.samples))
        folds = cv_folds(indices, defaults.CALIBRATION_FOLDS, plan.inputs.is_sequence, config.seed, CV_BLOCK)
    else:
        fit, held = calibration_split(indices, mode, config.calibration_fraction, config.min_calibration, config.seed)
        folds = []
    X, y, weights = _rows(plan, rows, targets, fit)
    if log is not None:
        grid_text = "" if config.grid is None else f", {config.grid[0]}x{config.grid[1]} grid"
        log(
            f"fitting {config.kernel} AGP with {config.n_centers} centres on {len(X)} rows "
            f"({len(fit)} images, {plan.inputs.layout} layout{grid_text})"
        )
    regressor = _fit_regressor(config, X, y, weights, plan.inputs.dataset.root, log)
    return FittedRows(regressor, targets, fit, held, folds, mode, len(X))


def assemble_model(plan: TrainingPlan, rows: HeadRows, fitted: FittedRows, split: str | None) -> CountingModel:
    """The model file's contents: the fitted AGP, the head, and how images become its inputs."""
    config, inputs, regressor = plan.config, plan.inputs, fitted.regressor
    dataset, backbone = inputs.dataset, inputs.backbone
    indices = rows.indices
    return CountingModel(
        regressor=regressor,
        backbone=backbone.name,
        backbone_weights_sha256=backbone.weights_sha256,
        runtime=backbone.runtime,
        input_size=config.input_size,
        roi_mask=None if plan.roi_mask is None else np.asarray(plan.roi_mask, dtype=bool),
        flip_average=config.flip_average,
        grid=None if config.density_head else config.grid,
        layout=inputs.layout,
        class_names=list(dataset.class_names) if inputs.multi_output else None,
        target_transform=config.target_transform,
        density_head=rows.density_head,
        class_density_head=rows.class_density_head,
        count_offset=rows.count_offset,
        correction_weight=rows.correction_weight,
        dataset={
            "name": dataset.name,
            "root": str(dataset.root),
            "split": split or dataset.split,
            "n_train": len(rows.samples),
            "n_fit": int(len(fitted.fit)),
            "n_calibration": int(len(fitted.held)),
            "calibration": f"cv{len(fitted.folds)}" if fitted.mode == "cv" else fitted.mode,
            "train_indices": [int(indices.min()), int(indices.max())] if len(indices) else None,
        },
        training=config.record()
        | {
            "n_rows": fitted.n_rows,
            "n_validation_rows": len(regressor.validation_indices_),
            "best_epoch": _best_epoch(regressor),
            "count_offset": rows.count_offset,
            "correction_weight": rows.correction_weight,
        },
        history=_json_history(regressor),
        descriptor=None if inputs.descriptor.spec.kind == "scores" else inputs.descriptor,
    )


def calibrate(
    model: CountingModel, plan: TrainingPlan, rows: HeadRows, fitted: FittedRows, log: Callable[[str], None] | None
) -> None:
    """Validation figures, the gate (per-class models) and the conformal interval, from
    predictions on train images the regressor did not see (out of fold, or held out)."""
    from counting.heads.uncertainty import ConformalInterval, choose_scale, fit_class_group_interval

    config, held = plan.config, fitted.held
    if not len(held):
        return
    if fitted.mode == "cv" and log is not None:
        log(f"calibrating the interval on out-of-fold predictions ({len(fitted.folds)} folds)")
    predicted, where = held_out_predictions(model, plan, rows, fitted)
    truth = rows.counts[held]
    if config.gate:
        # Chosen on these same held-out predictions: the validation figures below include the choice.
        model.gate = [float(value) for value in choose_gate(truth, predicted)]
        predicted = apply_gate(predicted, model.gate)
        where += ", gate thresholds chosen on them"
    figures = voc_metrics(truth, predicted, model.class_names) if model.class_names else crowd_metrics(truth, predicted)
    model.validation_metrics = figures | {"on": where}
    if model.class_names:
        # Per class group on the pairs with objects (counting.heads.uncertainty): over all pairs,
        # mostly empty ones predicted ~0, the quantiles were ~0 and the intervals zero-width.
        model.interval = fit_class_group_interval(truth, predicted, level=config.interval_level)
        model.training["interval_calibration"] = class_interval_record(model.interval, truth, predicted, where)
        return
    scale, widths = choose_scale(truth, predicted, level=config.interval_level, seed=config.seed)
    model.interval = ConformalInterval.fit(truth, predicted, level=config.interval_level, scale=scale)
    model.training["interval_scale_widths"] = widths


def held_out_predictions(
    model: CountingModel, plan: TrainingPlan, rows: HeadRows, fitted: FittedRows
) -> tuple[np.ndarray, str]:
    """Counts of the train images the regressor did not see, and where they come from: mode
    ``cv`` refits the AGP once per fold (``fitted.folds``) and counts the fold left out; other
    modes count the held-out part with the model itself."""
    config, held = plan.config, fitted.held
    features = model_features(plan.inputs.layout, rows.frame, rows.cells)
    if fitted.mode != "cv":
        return model.predict_features(features[held]), f"{len(held)} held-out train images ({fitted.mode})"
    predicted = np.zeros_like(rows.counts)
    for fold in fitted.folds:
        rest = np.setdiff1d(fitted.fit, fold)
        fold_model = replace(
            model,
            regressor=_fit_regressor(config, *_rows(plan, rows, fitted.targets, rest), plan.inputs.dataset.root, None),
        )
        predicted[fold] = fold_model.predict_features(features[fold])
    where = f"out-of-fold predictions of {len(held)} train images ({len(fitted.folds)} folds"
    where += ", runs of consecutive frames)" if plan.inputs.is_sequence else ")"
    return predicted[held], where


def class_interval_record(interval: Any, truth: np.ndarray, predicted: np.ndarray, where: str) -> dict:
    """What a per-class-group interval was calibrated on, and its coverage there per group
    (the model file's ``training.interval_calibration``)."""
    from counting.heads.uncertainty import group_coverage

    def written(value: float) -> float | None:  # JSON has no NaN or infinity: a group without pairs
        if isinstance(value, int):
            return value
        return round(float(value), 4) if np.isfinite(value) else None

    groups = np.asarray(interval.class_groups)
    return {
        "on": where,
        "pairs": interval.calibrated_on,
        "scale": interval.scale,
        "groups": {
            str(group): {"quantile": written(np.asarray(interval.quantile)[groups == group][0])}
            | {key: written(value) for key, value in figures.items()}
            for group, figures in group_coverage(interval, truth, predicted, groups).items()
        },
    }


def check_multiclass_settings(config: TrainingConfig, layout: str, multi_output: bool, root: Any) -> None:
    """A target transform needs one row per image (a sum over tiles of transformed counts is no
    count); the gate is per class and is chosen on held-out predictions."""
    check_transform(config.target_transform)
    if config.target_transform != "none" and layout not in ("frame", "pyramid"):
        raise TrainingError(f"{root}: --target-transform needs one row per image (layout frame or pyramid)")
    if config.gate and not multi_output:
        raise TrainingError(f"{root}: --gate works on per-class counts (VOC); this dataset has one count")
    if config.gate and config.calibration == "none":
        raise TrainingError(f"{root}: --gate is chosen on held-out predictions; use a --calibration other than none")


def _best_epoch(regressor: Any) -> int:
    return int(regressor.best_epoch_)
