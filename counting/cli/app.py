"""The `counting` command-line application: one typer app, one module per command.

The one error boundary is here: a ``CountingError`` (bad input: a file, a value, a dataset)
raised anywhere under a command ends as one red line and exit code 1, never a traceback.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Annotated, Any, Optional

import click
import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from counting.cli import help_layout
from counting.cli.common import forget_interrupt_notes, interrupt_note, print_error, print_warning
from counting.core.errors import CountingError, one_line_warnings
from counting.core.signals import EXIT_TERMINATED, sigterm_as_interrupt, was_terminated
from counting.core.version import __version__

# --help fits the terminal it is read on, every option name whole (counting/cli/help_layout.py).
help_layout.install()

# Each command is the function of the same name in counting/cli/<name>.py. A module is imported
# only when its command runs or shows its --help: together they pull in torch, scikit-learn,
# Dask and OpenCV (~4 s), which `counting --help` and `counting --version` do not need.
COMMANDS = ("train", "evaluate", "report", "count", "video", "features", "compare", "familiarize", "serve", "models")


def _without_flag_placeholders(params: list[click.Parameter]) -> list[click.Parameter]:
    """A flag (``--quiet``, ``--roi/--no-roi``, ``--help``) takes no value: typer's help would
    show a ``<bool>`` placeholder beside it that the flag does not accept; an argument shows its
    name, not its Python type."""
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = ""
        elif getattr(param, "param_type_name", "") == "argument":
            # An argument's column already shows its name (IMAGES); typer would add the Python
            # annotation as a type (``<list[str]>``), which says nothing to a user.
            param.display_type_rich = _no_type  # type: ignore[method-assign]
    return params


def _no_type(ctx: click.Context) -> None:
    return None


class _Command(TyperCommand):
    """A command whose help shows no placeholder beside its flags."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _without_flag_placeholders(super().get_params(ctx))


def _load_command(name: str) -> click.Command:
    module = importlib.import_module(f"counting.cli.{name}")
    single = typer.Typer(rich_markup_mode="markdown", add_completion=False, pretty_exceptions_show_locals=False)
    single.command(name, cls=_Command)(getattr(module, name))
    command = typer.main.get_command(single)
    command.name = name
    return command


def _summary(name: str) -> click.Command:
    """A stand-in that only lists ``name`` in the top-level --help: its docstring, read from
    the source without importing the module (or what it imports)."""
    source = Path(__file__).with_name(f"{name}.py").read_text(encoding="utf-8")
    docstring = next(
        (
            ast.get_docstring(node) or ""
            for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef) and node.name == name
        ),
        "",
    )
    return click.Command(name, help=docstring)


class _OneLineErrors(TyperGroup):
    """Runs a command; user-input failures become one red line: exit code 1 for a bad file or
    dataset, click's 2 for a bad option (unknown flag, value out of its choices)."""

    _listing = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _without_flag_placeholders(super().get_params(ctx))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        if self._listing:
            return _summary(cmd_name)
        self.commands[cmd_name] = _load_command(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def invoke(self, ctx: typer.Context) -> Any:
        forget_interrupt_notes()  # a note left by an earlier command in this process is not this one's
        try:
            with sigterm_as_interrupt(), one_line_warnings(print_warning):
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
            # SIGTERM comes the same way (counting.core.signals), with the shell's status for it.
            note = str(interrupt) or interrupt_note()
            how, status = ("terminated", EXIT_TERMINATED) if was_terminated() else ("interrupted", 130)
            print_error(f"{how}: {note}" if note else how)
            raise typer.Exit(status) from None


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


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
