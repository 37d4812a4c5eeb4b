"""`counting train`: fit a counting model on a dataset's train split."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from counting.apply.distributed.session import ClusterExtraction
from counting.cli.common import (
    console,
    feature_cache,
    informational,
    on_interrupt,
    open_dataset,
    refuse_outputs_on_inputs,
    use_runtime,
)
from counting.cli.options import (
    GRID_DEFAULT,
    INPUT_SIZE_DEFAULT,
    LOCALISED,
    PROGRESS_DEFAULT,
    REGRESSOR,
    RUN,
    BackboneOption,
    BatchSizeOption,
    CacheDirOption,
    CalibrationOption,
    CentersOption,
    ClusterOption,
    CountsCsvOption,
    DatasetOption,
    DensityHeadOption,
    DescriptorOption,
    DifficultOption,
    EpochsOption,
    FlipAverageOption,
    GateOption,
    GridOption,
    HeadKindOption,
    HeadLayersOption,
    InputSizeOption,
    KernelOption,
    LayoutOption,
    NoCacheOption,
    ProgressOption,
    QuietOption,
    RoiOption,
    RootOption,
    RuntimeOption,
    SeedOption,
    SplitOption,
    TargetTransformOption,
    ThreadsOption,
    WeightsOption,
    detector_spelling,
    out_option,
)
from counting.core import defaults
from counting.core.errors import TrainingError
from counting.core.files import printable


def print_figures(rows: list[tuple[str, dict]]) -> None:
    """One table: a row per evaluation (held-out train images, test split), a column per metric."""
    rows = [(label, figures) for label, figures in rows if figures]
    if not rows:
        return
    keys = [k for k in ("mae", "mse", "rmse", "mrmse", "m_rel_rmse", "mrmse_nz", "m_rel_rmse_nz") if k in rows[0][1]]
    names = {"mae": "MAE", "mse": "MSE", "rmse": "RMSE", "mrmse": "mRMSE", "m_rel_rmse": "m-relRMSE"}
    names |= {"mrmse_nz": "mRMSE-nz", "m_rel_rmse_nz": "m-relRMSE-nz"}
    table = Table(title="Figures", title_justify="left")
    table.add_column("images")
    for key in keys:
        table.add_column(names[key], justify="right")
    for label, figures in rows:
        table.add_row(label, *("–" if figures.get(key) is None else f"{figures[key]:.3f}" for key in keys))
    console.print(table)


def _head_layers(text: str | None) -> tuple[str, ...] | None:
    """The maps ``--head-layers`` names (None: not given, the head kind's default). A list that
    names none (``,``) is refused: read as not given, it trained the default layers in silence."""
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise TrainingError(f"--head-layers {text!r} names no layer: give LAYER,... (e.g. block7,block10)")
    return names


def _check_density_options_given(context: typer.Context, density_head: bool) -> None:
    """Refuse ``--head-kind`` or ``--head-layers`` typed without ``--density-head``, whatever their
    value: ``--head-kind ridge`` (the default kind) asks for a density head as much as ``conv`` does,
    and the model trained would have none. Only the command line can tell typed from left out
    (click's parameter source); the settings' own check (``heads.kinds.check_head_choice``)
    covers the Python API."""
    if density_head:
        return
    # By name: typer 0.29 runs its own copy of click, whose ParameterSource is not click's.
    typed = [
        flag
        for flag, name in (("--head-kind", "head_kind"), ("--head-layers", "head_layers"))
        if getattr(context.get_parameter_source(name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")
    ]
    if typed:
        verb = "choose" if len(typed) > 1 else "chooses"
        raise TrainingError(f"{' and '.join(typed)} {verb} the density head: add --density-head")


def train(
    context: typer.Context,
    dataset: DatasetOption,
    root: RootOption,
    out: Annotated[Path, out_option("Model file to write (.npz).")],
    split: SplitOption = "standard",
    counts_csv: CountsCsvOption = None,
    include_difficult: DifficultOption = False,
    backbone: BackboneOption = defaults.BACKBONE,
    weights: WeightsOption = None,
    input_size: InputSizeOption = INPUT_SIZE_DEFAULT,
    grid: GridOption = GRID_DEFAULT,
    layout: LayoutOption = None,
    descriptor: DescriptorOption = "scores",
    flip_average: FlipAverageOption = False,
    whole_frame_rows: Annotated[
        bool,
        typer.Option(help="With --grid: the same as --layout tiles+frame.", rich_help_panel=LOCALISED),
    ] = defaults.WHOLE_FRAME_ROWS,
    roi: RoiOption = True,
    density_head: DensityHeadOption = False,
    head_kind: HeadKindOption = "ridge",
    head_layers: HeadLayersOption = None,
    kernel: KernelOption = defaults.KERNEL,
    centers: CentersOption = defaults.N_CENTERS,
    epochs: EpochsOption = None,
    validation: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            metavar="N",
            help=f"Rows the regressor holds out to pick its best epoch (default {defaults.N_VALIDATION}, fewer "
            "on small sets).",
            show_default=False,
            rich_help_panel=REGRESSOR,
        ),
    ] = None,
    interval_level: Annotated[
        float,
        typer.Option(
            min=0.5, max=0.999, metavar="X", help="Nominal coverage of count intervals.", rich_help_panel=REGRESSOR
        ),
    ] = defaults.INTERVAL_LEVEL,
    calibration: CalibrationOption = "auto",
    seed: SeedOption = defaults.SEED,
    target_transform: TargetTransformOption = "none",
    gate: GateOption = False,
    evaluate: Annotated[
        bool,
        typer.Option(
            help="Evaluate on the test split after training and store the figures in the model.",
            rich_help_panel=RUN,
        ),
    ] = True,
    batch_size: BatchSizeOption = defaults.BATCH_SIZE,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = False,
    progress: ProgressOption = PROGRESS_DEFAULT,
    quiet: QuietOption = False,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
    cluster: ClusterOption = None,
) -> None:
    """Train a counting model (AGP on CNN descriptors) on a dataset's train split.

    Prints the loss per epoch, saves the model and its loss curve (MODEL_STEM.loss.png) beside it.
    """
    use_runtime(runtime, threads)
    say = informational(quiet)
    progress = progress and not quiet
    from counting.core.files import check_writable, special_kind
    from counting.evaluate.evaluation import evaluate_model
    from counting.evaluate.plots import plot_loss
    from counting.heads.kinds import check_head_choice
    from counting.train.pipeline import TrainingConfig, train_model

    check_writable(out)  # before training: the model must have somewhere to go
    loss_png = None if special_kind(out) else out.with_name(f"{out.stem}.loss.png")
    cache = feature_cache(cache_dir, not no_cache)
    refuse_outputs_on_inputs(
        [out, loss_png], inputs=[counts_csv, weights], data_root=root, cache=cache, cache_dir=cache_dir
    )

    backbone, descriptor = detector_spelling(backbone, descriptor)  # --backbone centernet: the detector
    config = TrainingConfig(
        backbone=backbone,
        weights=None if weights is None else str(weights),
        input_size=input_size,
        grid=grid,
        layout=layout,
        whole_frame_rows=whole_frame_rows,
        use_roi=roi,
        kernel=kernel,
        n_centers=centers,
        n_validation=validation,
        max_epochs=epochs,
        interval_level=interval_level,
        calibration=calibration,
        seed=seed,
        batch_size=batch_size,
        descriptor=descriptor,
        target_transform=target_transform,
        gate=gate,
        flip_average=flip_average,
        density_head=density_head,
        density_kind=head_kind,
        density_layers=_head_layers(head_layers),
    )
    _check_density_options_given(context, density_head)
    check_head_choice(config)  # a mistake in the options is said before the dataset loads
    data = open_dataset(dataset, root, split, counts_csv, include_difficult)
    parts = data.describe()["splits"]
    say(
        f"[bold]{data.name}[/] at {escape(printable(str(data.root)))} (split {escape(str(split))}): "
        + ", ".join(f"{part} {info.get('n')} images" for part, info in parts.items()),
        soft_wrap=True,
    )
    existed, saved = out.exists(), []
    on_interrupt(lambda: _kept_after_interrupt(out, existed, bool(saved), cache))
    extract = ClusterExtraction(cluster) if cluster is not None else None
    model = train_model(data, config, cache=cache, progress=progress, log=say, split=split, extract=extract)
    if model.training.get("best_epoch") is not None:
        say(f"best epoch on the regressor's validation rows: {model.training['best_epoch']}")
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
            f": coverage {interval['coverage']:.1%}, mean width {interval['mean_width']:.2f}{where}" if interval else ""
        )
        console.print(
            f"count interval: {model.interval.level:.0%} split conformal ({model.interval.scale} scale){coverage}"
        )
    path = model.save(out)
    saved.append(path)
    if loss_png is not None and model.history.get("train_loss"):  # a device (/dev/null) has no "beside"
        plot_loss(model.history, loss_png, model.training.get("best_epoch"))
        say(f"loss curve: {escape(printable(str(loss_png)))}")
    size = f" ({path.stat().st_size / 1024:.0f} KB)" if loss_png is not None else ""
    say(f"[green]model saved:[/] {escape(printable(str(path)))}{size}")


def _kept_after_interrupt(out: Path, existed: bool, saved: bool, cache: Any) -> str:
    """What a Ctrl-C kept, in one line: the model file is written whole or not at all."""
    if saved:
        return f"model saved to {out}; its loss curve was not written"
    previous = f"{out} is unchanged" if existed else f"{out} was not created"
    cached = "; the descriptors computed so far are in the feature cache" if cache is not None and cache.enabled else ""
    return f"no model written ({previous}){cached}"
