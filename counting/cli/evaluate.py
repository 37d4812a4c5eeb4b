"""`counting evaluate`: a model's figures on a dataset's test split."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from rich.table import Table

from counting.cli.common import (
    console,
    evaluate_on_test_split,
    informational,
    load_model_option,
    optional_cache,
    print_skipped,
    print_warning,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.option_groups import EvaluationSplit, PictureRun, with_groups
from counting.cli.options import (
    DatasetOption,
    ModelOption,
    RootOption,
    alias_or_option,
    csv_option,
    deprecated_alias,
    json_option,
)


def figures_caption(result, *notes: str) -> str:
    """The table's caption: the split, then whether the figures are held-out (when they are not)."""
    held_out = [result.overlap_note] if result.overlap_note else []
    return "; ".join([f"split {result.split}", *held_out, *notes])


def warn_if_not_held_out(result) -> None:
    """One stderr line when the model was trained on some of the test pictures (or that cannot
    be told): its figures are then not held-out ones, whatever the table looks like."""
    if result.overlap_note:
        print_warning(f"{result.model}: {result.overlap_note}")


def figures_table(result) -> Table:
    """Per-frame, sequence and interval figures side by side."""
    table = Table(
        title=f"{result.dataset}: {result.metrics.get('n')} test images",
        title_justify="left",
        caption=figures_caption(result),
        caption_justify="left",
    )
    if result.is_voc_like:
        from counting.cli.multiclass_output import voc_figures_table

        return voc_figures_table(
            [("per image", result.metrics)],
            f"{result.dataset}: {result.metrics.get('n')} test images",
            figures_caption(result, "-nz: images holding the class only"),
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


@with_groups
def evaluate(
    dataset: DatasetOption,
    root: RootOption,
    model: ModelOption = None,
    test: EvaluationSplit = EvaluationSplit(),
    csv: Annotated[
        Optional[Path], csv_option("Write each test image's true and predicted counts (and interval) as CSV.")
    ] = None,
    json_path: Annotated[Optional[Path], json_option("Write the figures as JSON to this file.")] = None,
    predictions: Annotated[Optional[Path], deprecated_alias("--predictions", instead="--csv")] = None,
    run: PictureRun = PictureRun(),
) -> None:
    """Evaluate a model on a dataset's test split: MAE / MSE / RMSE (crowds) or mRMSE (VOC).

    Calibrated models also get the interval coverage and mean width; sequences (ucsd, mall)
    also get the figures after temporal smoothing, reported separately.
    """
    use_runtime(run.runtime, run.threads)
    from counting.core.files import check_writable

    predictions = alias_or_option(csv, predictions, "--csv", "--predictions")
    say = informational(run.quiet)
    cache = optional_cache(run.cache_dir, not run.no_cache)
    for output in (json_path, predictions):
        if output is not None:
            check_writable(output)  # before evaluating: a bad output path must not waste the run
    refuse_outputs_on_inputs(
        [json_path, predictions],
        inputs=[test.counts_csv, test.weights],
        model=model,
        data_root=root,
        cache=cache,
        cache_dir=run.cache_dir,
    )
    say_outputs_on_interrupt([json_path, predictions], cache)
    counting_model = load_model_option(model)
    result = evaluate_on_test_split(counting_model, dataset, root, test, run, cache)
    warn_if_not_held_out(result)
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
        print_skipped(message)
    if json_path is not None:
        result.write_json(json_path)
        say(f"figures written to {json_path}")
    if predictions is not None:
        result.write_predictions_csv(predictions)
        say(f"predictions written to {predictions}")
