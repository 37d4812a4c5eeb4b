"""`counting report`: Markdown + HTML report with plots, beside the published figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from counting.cli.common import (
    console,
    evaluate_on_test_split,
    informational,
    load_model_option,
    optional_cache,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.evaluate import figures_table, warn_if_not_held_out
from counting.cli.option_groups import EvaluationSplit, PictureRun, with_groups
from counting.cli.options import ModelOption, OptionalDatasetOption, OptionalRootOption, out_option


@with_groups
def report(
    out: Annotated[Path, out_option("Folder for report.md, report.html and the PNGs.", folder=True)] = Path("report"),
    model: ModelOption = None,
    dataset: OptionalDatasetOption = None,
    root: OptionalRootOption = None,
    test: EvaluationSplit = EvaluationSplit(),
    run: PictureRun = PictureRun(),
) -> None:
    """Write a Markdown and an HTML report that sets a model's figures beside the published ones.

    With --dataset/--root the model is evaluated now (plots of the predicted and true counts);
    without, the report uses the figures stored in the model file.
    """
    use_runtime(run.runtime, run.threads)
    from counting.core.errors import DatasetError
    from counting.core.files import check_writable_folder
    from counting.evaluate.report import REPORT_FILES, write_report

    say = informational(run.quiet)
    cache = optional_cache(run.cache_dir, not run.no_cache)
    check_writable_folder(out)  # before evaluating: the report must have somewhere to go
    refuse_outputs_on_inputs(
        [out, *(out / name for name in REPORT_FILES)],
        inputs=[test.counts_csv, test.weights],
        model=model,
        data_root=root,
        cache=cache,
        cache_dir=run.cache_dir,
    )
    say_outputs_on_interrupt([out / "report.md"], cache)

    if (dataset is None) != (root is None):
        raise DatasetError(f"{root or dataset}: --dataset and --root go together")
    if dataset is None and test.cluster is not None:
        raise DatasetError(
            f"--cluster {test.cluster}: without --dataset/--root the report reads the model's stored figures "
            "and computes no descriptors"
        )
    counting_model = load_model_option(model)
    result = None
    if dataset is not None and root is not None:
        result = evaluate_on_test_split(counting_model, dataset, root, test, run, cache)
        warn_if_not_held_out(result)
        console.print(figures_table(result))
    files = write_report(counting_model, result, out)
    say(f"[green]report:[/] {files.markdown} and {files.html} ({len(files.images)} plots)", soft_wrap=True)
