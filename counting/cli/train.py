"""`counting train`: fit a counting model on a dataset's train split."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from counting import defaults
from counting.cli.cluster import ClusterExtraction, ClusterOption
from counting.cli.common import (
    console,
    feature_cache,
    open_dataset,
    parse_grid_option,
    parse_input_size,
)


class DatasetName(str, Enum):
    ucsd = "ucsd"
    voc = "voc"
    mall = "mall"
    shanghaitech = "shanghaitech"
    folder = "folder"


class KernelName(str, Enum):
    center = "center"
    univariate = "univariate"
    diagonal = "diagonal"
    lowrank = "lowrank"
    full = "full"


DEFAULT_KERNEL = KernelName(defaults.KERNEL)


class CalibrationMode(str, Enum):
    auto = "auto"
    cv = "cv"
    tail = "tail"
    blocks = "blocks"
    random = "random"
    none = "none"


DATA, DESCRIPTORS, REGRESSOR, RUN = "Data", "Descriptors", "Regressor and interval", "Run"

DatasetOption = Annotated[
    DatasetName,
    typer.Option("--dataset", "-d", help="Dataset reader.", show_default=False, rich_help_panel=DATA),
]
RootOption = Annotated[
    Path, typer.Option("--root", "-r", help="Dataset folder.", show_default=False, rich_help_panel=DATA)
]
SplitOption = Annotated[
    str,
    typer.Option(
        "--split",
        help="'standard', 'train=A-B,test=C-D' (1-based frame ranges) or 'random:FRACTION[:SEED]'.",
        rich_help_panel=DATA,
    ),
]
CsvOption = Annotated[
    Optional[Path],
    typer.Option(
        "--csv",
        help="Counts CSV for --dataset folder (default ROOT/counts.csv).",
        show_default=False,
        rich_help_panel=DATA,
    ),
]
DifficultOption = Annotated[
    bool,
    typer.Option(
        "--include-difficult", help="VOC: count objects flagged difficult too.", rich_help_panel=DATA
    ),
]
CacheDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--cache-dir",
        help="Feature cache folder (default $COUNTING_CACHE_DIR or ~/.cache/counting/features).",
        show_default=False,
        rich_help_panel=RUN,
    ),
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Do not read or write the feature cache.", rich_help_panel=RUN)
]
WeightsOption = Annotated[
    Optional[Path],
    typer.Option(
        "--weights",
        help="Backbone weights file (resnet50: torchvision's state dict).",
        show_default=False,
        rich_help_panel=DESCRIPTORS,
    ),
]


def print_figures(rows: list[tuple[str, dict]]) -> None:
    """One table: a row per evaluation (held-out train images, test split), a column per metric."""
    rows = [(label, figures) for label, figures in rows if figures]
    if not rows:
        return
    keys = [k for k in ("mae", "mse", "rmse", "mrmse", "m_rel_rmse") if k in rows[0][1]]
    names = {"mae": "MAE", "mse": "MSE", "rmse": "RMSE", "mrmse": "mRMSE", "m_rel_rmse": "m-relRMSE"}
    table = Table(title="Figures", title_justify="left")
    table.add_column("images")
    for key in keys:
        table.add_column(names[key], justify="right")
    for label, figures in rows:
        table.add_row(label, *(f"{figures[key]:.3f}" for key in keys))
    console.print(table)


def train(
    dataset: DatasetOption,
    root: RootOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Model file to write (.npz).", show_default=False)],
    split: SplitOption = "standard",
    csv: CsvOption = None,
    include_difficult: DifficultOption = False,
    backbone: Annotated[
        str,
        typer.Option(help="ImageNet backbone: efficientnet-lite0 or resnet50.", rich_help_panel=DESCRIPTORS),
    ] = defaults.BACKBONE,
    weights: WeightsOption = None,
    input_size: Annotated[
        str,
        typer.Option(
            help="Short side in pixels the frame is resized to (whole frame kept), or 'native'.",
            rich_help_panel=DESCRIPTORS,
        ),
    ] = str(defaults.INPUT_SIZE or "native"),
    grid: Annotated[
        Optional[str],
        typer.Option(
            help="Localised counting: ROWSxCOLS tiles pooled from one pass (needs head dots), or 'none'.",
            rich_help_panel=DESCRIPTORS,
        ),
    ] = (None if defaults.GRID is None else f"{defaults.GRID[0]}x{defaults.GRID[1]}"),
    whole_frame_rows: Annotated[
        bool,
        typer.Option(help="With --grid, also train on whole-frame descriptors.", rich_help_panel=DESCRIPTORS),
    ] = defaults.WHOLE_FRAME_ROWS,
    roi: Annotated[
        bool,
        typer.Option(
            help="Mask pixels outside the dataset's ROI (when it has one).", rich_help_panel=DESCRIPTORS
        ),
    ] = True,
    kernel: Annotated[
        KernelName, typer.Option(help="AGP kernel kind.", rich_help_panel=REGRESSOR)
    ] = DEFAULT_KERNEL,
    centers: Annotated[
        int, typer.Option(min=1, help="Number of AGP centres.", rich_help_panel=REGRESSOR)
    ] = defaults.N_CENTERS,
    epochs: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Maximum training epochs (default: the regressor's).",
            show_default=False,
            rich_help_panel=REGRESSOR,
        ),
    ] = None,
    validation: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Rows the regressor holds out to pick its best epoch (default 100, fewer on small sets).",
            show_default=False,
            rich_help_panel=REGRESSOR,
        ),
    ] = None,
    interval_level: Annotated[
        float,
        typer.Option(
            min=0.5, max=0.999, help="Nominal coverage of count intervals.", rich_help_panel=REGRESSOR
        ),
    ] = defaults.INTERVAL_LEVEL,
    calibration: Annotated[
        CalibrationMode,
        typer.Option(
            help="Interval calibration: cv (out-of-fold predictions, model fitted on all images), or a hold-out: "
            "tail (last frames), blocks (runs of frames), random; none; auto = cv.",
            rich_help_panel=REGRESSOR,
        ),
    ] = CalibrationMode.auto,
    seed: Annotated[
        int, typer.Option(help="Seed for every random choice.", rich_help_panel=REGRESSOR)
    ] = defaults.SEED,
    evaluate: Annotated[
        bool,
        typer.Option(
            help="Evaluate on the test split after training and store the figures in the model.",
            rich_help_panel=RUN,
        ),
    ] = True,
    batch_size: Annotated[
        int, typer.Option(min=1, help="Images per forward pass.", rich_help_panel=RUN)
    ] = defaults.BATCH_SIZE,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = False,
    progress: Annotated[
        bool, typer.Option(help="Show a progress bar while extracting features.", rich_help_panel=RUN)
    ] = True,
    cluster: ClusterOption = None,
) -> None:
    """Train a counting model (AGP on CNN descriptors) on a dataset's train split.

    Prints the loss per epoch, saves the model and its loss curve (MODEL_STEM.loss.png) beside it.
    """
    from counting.evaluation import evaluate_model
    from counting.plots import plot_loss
    from counting.training import TrainingConfig, train_model

    config = TrainingConfig(
        backbone=backbone,
        weights=None if weights is None else str(weights),
        input_size=parse_input_size(input_size),
        grid=parse_grid_option(grid),
        whole_frame_rows=whole_frame_rows,
        use_roi=roi,
        kernel=kernel.value,
        n_centers=centers,
        n_validation=validation,
        max_epochs=epochs,
        interval_level=interval_level,
        calibration=calibration.value,
        seed=seed,
        batch_size=batch_size,
    )
    data = open_dataset(dataset.value, root, split, csv, include_difficult)
    description = data.describe() if hasattr(data, "describe") else {}
    parts = description.get("splits", {})
    console.print(
        f"[bold]{data.name}[/] at {data.root} (split {split}): "
        + ", ".join(f"{part} {info.get('n')} images" for part, info in parts.items()),
        soft_wrap=True,
    )
    cache = feature_cache(cache_dir, not no_cache)
    extract = ClusterExtraction(cluster) if cluster is not None else None
    model = train_model(data, config, cache=cache, progress=progress, log=console.print, split=split, extract=extract)
    if model.training.get("best_epoch") is not None:
        console.print(f"best epoch on the regressor's validation rows: {model.training['best_epoch']}")
    figure_rows = [
        (
            f"{model.dataset.get('n_calibration')} train, "
            + ("out-of-fold" if str(model.dataset.get("calibration")).startswith("cv") else "held out"),
            model.validation_metrics,
        )
    ]
    if evaluate and len(data.subset("test")):
        result = evaluate_model(
            model,
            data.subset("test"),
            cache=cache,
            weights=weights,
            batch_size=batch_size,
            progress=progress,
            split=split,
            extract=extract,
        )
        model.test_metrics = result.to_dict()
        figure_rows.append((f"{result.metrics.get('n')} test, per frame", result.metrics))
        if result.sequence_metrics is not None:
            figure_rows.append(
                (
                    f"{result.metrics.get('n')} test, smoothed ({result.smoothing_window})",
                    result.sequence_metrics,
                )
            )
    if extract is not None:
        extract.close()
    print_figures(figure_rows)
    if model.interval is not None:
        where = " on the test split" if model.test_metrics.get("interval") else ""
        interval = model.test_metrics.get("interval") or {}
        coverage = (
            f": coverage {interval['coverage']:.1%}, mean width {interval['mean_width']:.2f}{where}"
            if interval
            else ""
        )
        console.print(
            f"count interval: {model.interval.level:.0%} split conformal ({model.interval.scale} scale){coverage}"
        )
    path = model.save(out)
    loss_png = path.with_name(f"{path.stem}.loss.png")
    if model.history.get("train_loss"):
        plot_loss(model.history, loss_png, model.training.get("best_epoch"))
        console.print(f"loss curve: {loss_png}")
    size_kb = path.stat().st_size / 1024
    console.print(f"[green]model saved:[/] {path} ({size_kb:.0f} KB)")
