"""`counting report`: Markdown + HTML report with plots, beside the published figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from counting.cli.common import (
    console,
    evaluate_on_test_split,
    load_model_option,
    optional_cache,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.evaluate import SMOOTH_HELP, figures_table
from counting.cli.options import (
    CacheDirOption,
    CountsCsvOption,
    DifficultOption,
    ModelOption,
    OptionalDatasetOption,
    OptionalRootOption,
    ProgressOption,
    RuntimeOption,
    SplitOption,
    ThreadsOption,
    WeightsOption,
    out_option,
    smooth_option,
)
from counting.core import defaults


def report(
    out: Annotated[Path, out_option("Folder for report.md, report.html and the PNGs.", folder=True)] = Path("report"),
    model: ModelOption = None,
    dataset: OptionalDatasetOption = None,
    root: OptionalRootOption = None,
    split: SplitOption = "standard",
    smooth: Annotated[int, smooth_option(SMOOTH_HELP)] = defaults.SMOOTHING_WINDOW,
    weights: WeightsOption = None,
    cache_dir: CacheDirOption = None,
    counts_csv: CountsCsvOption = None,
    include_difficult: DifficultOption = False,
    progress: ProgressOption = True,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
) -> None:
    """Write a Markdown and an HTML report that sets a model's figures beside the published ones.

    With --dataset/--root the model is evaluated now (plots of the predicted and true counts);
    without, the report uses the figures stored in the model file.
    """
    use_runtime(runtime, threads)
    from counting.core.errors import DatasetError
    from counting.core.files import check_writable_folder
    from counting.evaluate.report import write_report

    check_writable_folder(out)  # before evaluating: the report must have somewhere to go
    refuse_outputs_on_inputs(
        [out, *(out / f"report.{suffix}" for suffix in ("md", "html", "json"))],
        inputs=[counts_csv, weights],
        model=model,
        data_root=root,
        cache=optional_cache(cache_dir),
    )
    say_outputs_on_interrupt([out / "report.md"], optional_cache(cache_dir))

    counting_model = load_model_option(model)
    result = None
    if dataset is not None or root is not None:
        if dataset is None or root is None:
            raise DatasetError(f"{root or dataset}: --dataset and --root go together")
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
        )
        console.print(figures_table(result))
    files = write_report(counting_model, result, out)
    console.print(f"[green]report:[/] {files.markdown} and {files.html} ({len(files.images)} plots)", soft_wrap=True)
