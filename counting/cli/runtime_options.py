"""``--runtime`` and ``--threads``: declared once here, added to every command that computes descriptors."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from counting import defaults

__all__ = ["RuntimeName", "RuntimeOption", "ThreadsOption", "use_runtime"]


class RuntimeName(str, Enum):
    onnxruntime = "onnxruntime"
    torch = "torch"


RuntimeOption = Annotated[
    RuntimeName,
    typer.Option(
        "--runtime",
        help="Inference runtime of the backbone: onnxruntime (faster) or torch; same descriptors to 1e-4.",
    ),
]
ThreadsOption = Annotated[
    Optional[int],  # noqa: UP045 - typer reads the annotation at run time
    typer.Option(
        "--threads", min=1, help="Threads for the forward pass; default: every available core.", show_default=False
    ),
]

DEFAULT_RUNTIME = RuntimeName(defaults.RUNTIME)


def use_runtime(runtime: RuntimeName | str, threads: int | None) -> None:
    """Make the command's backbones run on ``runtime`` with ``threads`` threads."""
    from counting.backbones.runtime import configure_runtime

    configure_runtime(RuntimeName(runtime).value, threads)
