"""`counting report`: Markdown + HTML report with plots, beside the published figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from counting import defaults
from counting.cli.common import console, evaluate_on_test_split, load_model_option
from counting.cli.evaluate import ModelOption, ProgressOption, SmoothOption, figures_table
from counting.cli.train import (
    CacheDirOption,
    CsvOption,
    DatasetName,
    DifficultOption,
    SplitOption,
    WeightsOption,
)


def report(
    out_dir: Annotated[
        Path, typer.Option("--out-dir", "-o", help="Folder for report.md, report.html and the PNGs.")
    ] = Path("report"),
    model: ModelOption = None,
    dataset: Annotated[
        Optional[DatasetName],
        typer.Option(
            "--dataset",
            "-d",
            help="Evaluate on this dataset's test split (default: the figures stored in the model).",
            show_default=False,
        ),
    ] = None,
    root: Annotated[
        Optional[Path], typer.Option("--root", "-r", help="Dataset folder.", show_default=False)
    ] = None,
    split: SplitOption = "standard",
    smooth: SmoothOption = defaults.SMOOTHING_WINDOW,
    weights: WeightsOption = None,
    cache_dir: CacheDirOption = None,
    csv: CsvOption = None,
    include_difficult: DifficultOption = False,
    progress: ProgressOption = True,
) -> None:
    """Write a Markdown and an HTML report that sets a model's figures beside the published ones.

    With --dataset/--root the model is evaluated now (plots of the predicted and true counts);
    without, the report uses the figures stored in the model file.
    """
    from counting.errors import DatasetError
    from counting.files import check_writable_folder
    from counting.report import write_report

    check_writable_folder(out_dir)  # before evaluating: the report must have somewhere to go

    counting_model = load_model_option(model)
    result = None
    if dataset is not None or root is not None:
        if dataset is None or root is None:
            raise DatasetError(f"{root or dataset}: --dataset and --root go together")
        result = evaluate_on_test_split(
            counting_model, dataset.value, root, split, csv, include_difficult,
            cache_dir=cache_dir, smooth=smooth, weights=weights, progress=progress,
        )
        console.print(figures_table(result))
    files = write_report(counting_model, result, out_dir)
    console.print(
        f"[green]report:[/] {files.markdown} and {files.html} ({len(files.images)} plots)", soft_wrap=True
    )
