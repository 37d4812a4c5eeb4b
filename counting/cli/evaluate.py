"""`counting evaluate`: a model's figures on a dataset's test split."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from counting.apply.distributed.session import cluster_extraction
from counting.cli.common import (
    console,
    evaluate_on_test_split,
    load_model_option,
    optional_cache,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.options import (
    CacheDirOption,
    ClusterOption,
    CountsCsvOption,
    DatasetOption,
    DifficultOption,
    JsonOption,
    ModelOption,
    ProgressOption,
    RootOption,
    RuntimeOption,
    SplitOption,
    ThreadsOption,
    WeightsOption,
    smooth_option,
)
from counting.core import defaults

SMOOTH_HELP = "Centred (offline) temporal smoothing window of the sequence figures (ucsd, mall)"


def figures_table(result) -> Table:
    """Per-frame, sequence and interval figures side by side."""
    table = Table(
        title=f"{result.dataset}: {result.metrics.get('n')} test images",
        title_justify="left",
        caption=f"split {result.split}",
        caption_justify="left",
    )
    if result.is_voc_like:
        from counting.cli.multiclass_output import voc_figures_table

        return voc_figures_table(
            [("per image", result.metrics)],
            f"{result.dataset}: {result.metrics.get('n')} test images",
            f"split {result.split}; -nz: images holding the class only",
        )
    table.add_column("figures")
    for name in ("MAE", "MSE", "RMSE"):
        table.add_column(name, justify="right")
    rows = [("per frame", result.metrics)]
    if result.sequence_metrics is not None:
        rows.append((f"smoothed ({result.smoothing})", result.sequence_metrics))
    for label, figures in rows:
        table.add_row(label, f"{figures['mae']:.3f}", f"{figures['mse']:.3f}", f"{figures['rmse']:.3f}")
    return table


def evaluate(
    dataset: DatasetOption,
    root: RootOption,
    model: ModelOption = None,
    split: SplitOption = "standard",
    smooth: Annotated[int, smooth_option(SMOOTH_HELP)] = defaults.SMOOTHING_WINDOW,
    json_path: JsonOption = None,
    predictions: Annotated[
        Optional[Path],
        typer.Option("--predictions", help="Write per-image true and predicted counts as CSV.", show_default=False),
    ] = None,
    weights: WeightsOption = None,
    cache_dir: CacheDirOption = None,
    counts_csv: CountsCsvOption = None,
    include_difficult: DifficultOption = False,
    progress: ProgressOption = True,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
    cluster: ClusterOption = None,
) -> None:
    """Evaluate a model on a dataset's test split: MAE / MSE / RMSE (crowds) or mRMSE (VOC).

    Calibrated models also get the interval coverage and mean width; sequences (ucsd, mall)
    also get the figures after temporal smoothing, reported separately.
    """
    use_runtime(runtime, threads)
    from counting.core.files import check_writable

    for output in (json_path, predictions):
        if output is not None:
            check_writable(output)  # before evaluating: a bad output path must not waste the run
    refuse_outputs_on_inputs(
        [json_path, predictions],
        inputs=[counts_csv, weights],
        model=model,
        data_root=root,
        cache=optional_cache(cache_dir),
    )
    say_outputs_on_interrupt([json_path, predictions], optional_cache(cache_dir))
    counting_model = load_model_option(model)
    with cluster_extraction(cluster) as extract:
        result = evaluate_on_test_split(
            counting_model,
            dataset,
            root,
            split,
            counts_csv,
            include_difficult,
            cache_dir=cache_dir,
            smooth=smooth,
            weights=weights,
            progress=progress,
            extract=extract,
        )
    console.print(figures_table(result))
    if result.is_voc_like:
        from counting.cli.multiclass_output import per_class_table

        console.print(per_class_table(result.metrics))
    if result.interval_metrics:
        interval = result.interval_metrics
        console.print(
            f"interval ({interval['level']:.0%} nominal, {interval['scale']} scale): coverage "
            f"{interval['coverage']:.1%}, mean width {interval['mean_width']:.2f}"
        )
    for message in result.errors.values():
        console.print(f"[yellow]skipped[/] {message}", soft_wrap=True)
    if json_path is not None:
        result.write_json(json_path)
        console.print(f"figures written to {json_path}")
    if predictions is not None:
        result.write_predictions_csv(predictions)
        console.print(f"predictions written to {predictions}")
