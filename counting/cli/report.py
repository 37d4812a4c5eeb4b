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
from counting.cli.evaluate import figures_table
from counting.cli.options import (
    PROGRESS_DEFAULT,
    SMOOTH_DEFAULT,
    BatchSizeOption,
    CacheDirOption,
    ClusterOption,
    CountsCsvOption,
    DifficultOption,
    ModelOption,
    NoCacheOption,
    OptionalDatasetOption,
    OptionalRootOption,
    ProgressOption,
    QuietOption,
    RuntimeOption,
    SmoothOption,
    SplitOption,
    ThreadsOption,
    WeightsOption,
    out_option,
)
from counting.core import defaults


def report(
    out: Annotated[Path, out_option("Folder for report.md, report.html and the PNGs.", folder=True)] = Path("report"),
    model: ModelOption = None,
    dataset: OptionalDatasetOption = None,
    root: OptionalRootOption = None,
    split: SplitOption = "standard",
    counts_csv: CountsCsvOption = None,
    include_difficult: DifficultOption = False,
    smooth: SmoothOption = SMOOTH_DEFAULT,
    weights: WeightsOption = None,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = False,
    batch_size: BatchSizeOption = defaults.BATCH_SIZE,
    progress: ProgressOption = PROGRESS_DEFAULT,
    quiet: QuietOption = False,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
    cluster: ClusterOption = None,
) -> None:
    """Write a Markdown and an HTML report that sets a model's figures beside the published ones.

    With --dataset/--root the model is evaluated now (plots of the predicted and true counts);
    without, the report uses the figures stored in the model file.
    """
    use_runtime(runtime, threads)
    from counting.core.errors import DatasetError
    from counting.core.files import check_writable_folder
    from counting.evaluate.report import REPORT_FILES, write_report

    say = informational(quiet)
    cache = optional_cache(cache_dir, not no_cache)
    check_writable_folder(out)  # before evaluating: the report must have somewhere to go
    refuse_outputs_on_inputs(
        [out, *(out / name for name in REPORT_FILES)],
        inputs=[counts_csv, weights],
        model=model,
        data_root=root,
        cache=cache,
    )
    say_outputs_on_interrupt([out / "report.md"], cache)

    if (dataset is None) != (root is None):
        raise DatasetError(f"{root or dataset}: --dataset and --root go together")
    if dataset is None and cluster is not None:
        raise DatasetError(
            f"--cluster {cluster}: without --dataset/--root the report reads the model's stored figures "
            "and computes no descriptors"
        )
    counting_model = load_model_option(model)
    result = None
    if dataset is not None and root is not None:
        result = evaluate_on_test_split(
            counting_model,
            dataset,
            root,
            split,
            counts_csv,
            include_difficult,
            cache=cache,
            smooth=smooth,
            weights=weights,
            progress=progress and not quiet,
            batch_size=batch_size,
            cluster=cluster,
        )
        console.print(figures_table(result))
    files = write_report(counting_model, result, out)
    say(f"[green]report:[/] {files.markdown} and {files.html} ({len(files.images)} plots)", soft_wrap=True)
