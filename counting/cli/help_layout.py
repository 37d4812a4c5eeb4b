"""``--help`` laid out for the terminal it is read on, every option name whole.

typer draws each panel of options as a table that rich squeezes to the terminal's width: on 80
columns it cut option names ("--no-prog…"), which cannot then be typed, and long words of the
help ("~/.cache/counting/f…"). Drawing it 100 columns wide whatever the terminal kept the names
but wrapped every box line on a narrower one. Here the option panels are drawn by
:func:`print_options_panel` instead of typer's ``_print_options_panel`` (same arguments):

- the name and placeholder columns never shrink; only the help column wraps, and a word longer
  than it is folded onto the next line, never cut;
- when the help column would be narrower than :data:`MIN_HELP_WIDTH`, each option takes a line
  of its own (names and placeholder) with its help indented below, which fits down to 40
  columns;
- the columns are measured over all the command's options, so its panels line up.

``tests/cli/test_help_layout.py`` checks every command at 100, 80, 60 and 40 columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import click
import typer.rich_utils as typer_help
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

# Narrower than this, a help column holds four or five words a line: each option gets its own
# line instead (the help below it, indented by HELP_INDENT).
MIN_HELP_WIDTH = 36
HELP_INDENT = 4
# Panel: a border and one space of padding on each side.
PANEL_FRAME = 4
# Table: one space of padding between columns (typer's padding (0, 1), no padding at the edges).
COLUMN_GAP = 2


@dataclass(frozen=True)
class OptionNames:
    """How one option or argument is named in --help, split as typer's columns split it."""

    required: bool
    long: str  # --model (an argument: empty)
    short: str  # -m (an argument: its name, IMAGES)
    secondary: str  # --no-progress: the off switch of a --progress/--no-progress flag
    placeholder: str  # FILE, N [x>=1]; empty for a flag

    def columns(self) -> tuple[str, str, str, str]:
        return self.long, self.short, self.secondary, self.placeholder


def option_names(param: click.Parameter, ctx: click.Context) -> OptionNames:
    """``param``'s names and placeholder, as typer's own panel shows them."""
    is_argument = getattr(param, "param_type_name", "") == "argument"
    argument_name = ""
    if is_argument:
        argument_name = getattr(param, "display_name_raw", None) or (param.metavar or param.name or "").upper()
        if param.metavar is None and param.nargs != 1:
            argument_name += "..."
    long = [name for name in param.opts if name.startswith("--")]
    short = [argument_name if is_argument else name for name in param.opts if not name.startswith("--")]
    secondary = [name for name in param.secondary_opts]
    placeholder = _placeholder(param, ctx)
    return OptionNames(
        required=bool(param.required),
        long=",".join(long),
        short=",".join(short),
        secondary=",".join(secondary),
        placeholder=placeholder,
    )


def _placeholder(param: click.Parameter, ctx: click.Context) -> str:
    display = getattr(param, "display_type_rich", None)
    shown = display(ctx=ctx) if display is not None else param.make_metavar(ctx)
    text = shown or ""
    number_range = getattr(param, "_get_number_range_help_str", None)
    limits = number_range() if number_range is not None else ""
    return text + (typer_help.RANGE_STRING.format(limits) if limits else "")


def _visible_params(ctx: click.Context) -> list[click.Parameter]:
    return [param for param in ctx.command.get_params(ctx) if not getattr(param, "hidden", False)]


def column_widths(names: list[OptionNames]) -> list[int]:
    """The widest entry of each column left of the help: required mark, names, placeholder."""
    marks = 1 if any(entry.required for entry in names) else 0
    labels = max((max(map(len, _name_lines(entry))) for entry in names), default=0)
    placeholders = max((len(entry.placeholder) for entry in names), default=0)
    return [marks, labels, placeholders]


def _name_lines(entry: OptionNames) -> list[str]:
    """The names column of the table: ``--quiet, -q``; a switch's off name on a line of its own
    (``--whole-frame-rows /`` over ``--no-whole-frame-rows``), which keeps the column narrow."""
    first = ", ".join(name for name in (entry.long, entry.short) if name)
    return [f"{first} /", entry.secondary] if entry.secondary else [first]


def fits_in_columns(widths: list[int], width: int) -> bool:
    """Whether a table whose first columns are ``widths`` wide leaves MIN_HELP_WIDTH for the help."""
    used = sum(w + COLUMN_GAP for w in widths if w > 0)
    return width - PANEL_FRAME - used >= MIN_HELP_WIDTH


def print_options_panel(
    *,
    name: str,
    params: list[Any],
    ctx: click.Context,
    markup_mode: Any,
    console: Console,
) -> None:
    """One panel of --help (typer's ``_print_options_panel``, laid out to ``console.width``)."""
    if not params:
        return
    entries = [option_names(param, ctx) for param in params]
    helps = [typer_help._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode) for param in params]
    widths = column_widths([option_names(param, ctx) for param in _visible_params(ctx)] or entries)
    if fits_in_columns(widths, console.width):
        body: RenderableType = _table(entries, helps, widths)
    else:
        body = _stacked(entries, helps)
    console.print(
        Panel(
            body,
            border_style=typer_help.STYLE_OPTIONS_PANEL_BORDER,
            title=name,
            title_align=typer_help.ALIGN_OPTIONS_PANEL,
        )
    )


def _table(entries: list[OptionNames], helps: list[RenderableType], widths: list[int]) -> Table:
    table = Table(highlight=True, show_header=False, expand=True, box=None, padding=(0, 1), pad_edge=False)
    for width in widths:
        if width > 0:
            # Never shrunk: a name cut short cannot be typed. min_width lines the panels up.
            table.add_column(no_wrap=True, min_width=width)
    table.add_column(ratio=1, overflow="fold")  # the help: wraps, and folds a word wider than it
    for entry, help_text in zip(entries, helps, strict=True):
        required, placeholder = _required(entry), _placeholder_text(entry)
        names = Text("\n").join(_highlighted(line) for line in _name_lines(entry))
        cells = [cell for cell, width in zip((required, names, placeholder), widths, strict=True) if width > 0]
        table.add_row(*cells, help_text)
    return table


def _stacked(entries: list[OptionNames], helps: list[RenderableType]) -> Group:
    """Each option on a line of its own, its help indented below (a narrow terminal)."""
    parts: list[RenderableType] = []
    for entry, help_text in zip(entries, helps, strict=True):
        # Wraps between names; folds only a name wider than the terminal.
        line = Text(overflow="fold")
        if entry.required:
            line.append_text(_required(entry)).append(" ")
        line.append_text(_highlighted(" ".join(_name_lines(entry))))
        if entry.placeholder:
            line.append(" ").append_text(_placeholder_text(entry))
        parts += [line, Padding(help_text, (0, 0, 0, HELP_INDENT))]
    return Group(*parts)


def _required(entry: OptionNames) -> Text:
    return Text(typer_help.REQUIRED_SHORT_STRING if entry.required else "", style=typer_help.STYLE_REQUIRED_SHORT)


def _highlighted(names: str) -> Text:
    """Option names in typer's colours (the off switch of a flag in its negative colour)."""
    text = typer_help.highlighter(Text(names))
    for match in re.finditer(r"(?<=/ )--[\w-]+", names):
        text.stylize(typer_help.STYLE_NEGATIVE_OPTION, match.start(), match.end())
    return text


def _placeholder_text(entry: OptionNames) -> Text:
    return typer_help.types_highlighter(Text(entry.placeholder, style=typer_help.STYLE_TYPES))


def install() -> None:
    """Draw typer's option panels with :func:`print_options_panel` from now on."""
    typer_help._print_options_panel = print_options_panel
