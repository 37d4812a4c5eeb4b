"""The `counting` command-line application: one typer app, one module per command."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from counting import __version__
from counting.cli.common import one_line_errors, print_error
from counting.errors import CountingError

app = typer.Typer(
    name="counting",
    help=(
        "Count objects and people in images and video with an asymmetric-kernel Gaussian "
        "process (AGP) on CNN descriptors.\n\n"
        "Quick start: `counting count photo.jpg` counts people with the shipped model."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"counting {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = None,
) -> None:
    """Count objects and people in images and video with an asymmetric-kernel GP on CNN descriptors."""


def _register(module_name: str, function_name: str, command_name: str, optional: bool = False) -> None:
    """Add ``module.function`` as a command; modules written by others may not exist yet."""
    qualified = f"counting.cli.{module_name}"
    try:
        module = importlib.import_module(qualified)
    except ModuleNotFoundError as error:
        if optional and error.name == qualified:
            return
        raise
    command: Callable[..., Any] = getattr(module, function_name)
    app.command(command_name)(one_line_errors(command))


_register("train", "train", "train")
_register("evaluate", "evaluate", "evaluate")
_register("report", "report", "report")
_register("count", "count", "count")
_register("video", "video", "video")
_register("features", "features", "features", optional=True)
_register("compare", "compare", "compare", optional=True)


def main() -> None:
    """Console-script entry point: user errors end as one red line and exit code 1."""
    try:
        app()
    except CountingError as error:
        print_error(str(error))
        sys.exit(1)
    except KeyboardInterrupt:
        print_error("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
