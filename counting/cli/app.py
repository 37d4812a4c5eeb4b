"""The `counting` command-line application: one typer app, one module per command.

The one error boundary is here: a ``CountingError`` (bad input: a file, a value, a dataset)
raised anywhere under a command ends as one red line and exit code 1, never a traceback.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from counting import __version__
from counting.cli.common import interrupt_note, print_error, print_warning
from counting.cli.compare import compare
from counting.cli.count import count
from counting.cli.evaluate import evaluate
from counting.cli.features import features
from counting.cli.report import report
from counting.cli.train import train
from counting.cli.video import video
from counting.errors import CountingError, one_line_warnings


class _OneLineErrors(TyperGroup):
    """Runs a command; user-input failures become one red line: exit code 1 for a bad file or
    dataset, click's 2 for a bad option (unknown flag, value out of its choices)."""

    def invoke(self, ctx: typer.Context) -> Any:
        interrupt_note()  # a note left by an earlier command in this process is not this one's
        try:
            with one_line_warnings(print_warning):
                return super().invoke(ctx)
        except CountingError as error:
            print_error(str(error))
            raise typer.Exit(1) from None
        except typer.TyperException as error:  # typer's click errors: bad option, unknown command
            context = getattr(error, "ctx", None)  # usage errors carry the command they arose in
            command = f"counting {context.info_name}: " if context is not None and context.parent else ""
            print_error(f"{command}{error.format_message()} (see --help)")
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt as interrupt:
            # A command says what it kept: raise KeyboardInterrupt("...") or common.on_interrupt().
            note = str(interrupt) or interrupt_note()
            print_error(f"interrupted: {note}" if note else "interrupted")
            raise typer.Exit(130) from None


app = typer.Typer(
    name="counting",
    cls=_OneLineErrors,
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


for _command in (train, evaluate, report, count, video, features, compare):
    app.command(_command.__name__)(_command)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
