"""Tables that keep every number whole on a narrow terminal.

rich fits a table wider than the terminal by squeezing every column, and a number squeezed below
its width is cut to "117.…" (or folded to "117." over "3", which reads as 117). Here a table that
does not fit first gives its folding columns (the paths) what width is left; when even that is
too little, each row is printed as a record, one "column value" line each, as psql's expanded
display does (``\\x auto``). A table that fits, and every table written to a file, is unchanged.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

# Narrowest a folding column (a path) may get before the rows become records: a path folded into
# lines of fewer characters is harder to read than a record.
MIN_FOLD_WIDTH = 12
_LABEL_SHARE = 24  # a record's labels' column until it is laid out (then a third of the line)


def fit_table(console: Console, table: Table) -> RenderableType:
    """``table`` as it prints whole on ``console``: itself, with its paths folded narrower, or
    its rows as records."""
    width = console.size.width
    if _natural_width(console, table) <= width:
        return table
    folding = [column for column in table.columns if column.overflow == "fold" and column.width is None]
    if folding:
        fixed = _natural_width(console, table) - sum(_column_width(console, column) for column in folding)
        spare = (width - fixed) // len(folding)
        if spare >= MIN_FOLD_WIDTH:
            for column in folding:  # the table is the caller's to print: narrowed in place
                column.max_width = spare
            if _natural_width(console, table) <= width:
                return table
            for column in folding:
                column.max_width = None
    return as_records(table)


def as_records(table: Table) -> RenderableType:
    """Each row as a record: its first cell as a heading, then one ``column  value`` line for
    each other column (values keep their markup: a disputed count stays red). A value too long
    for the line wraps under itself, at its spaces, never mid-number where a space is near; a
    label longer than a third of the line folds. The caption follows the records, as it follows
    the table."""
    columns = table.columns
    if not columns or not table.row_count:
        return table  # no rows: the table's headers say what it would hold
    headers = [_plain(column.header) for column in columns]
    cells = [list(column.cells) for column in columns]
    parts: list[RenderableType] = []
    if table.title:
        parts.append(_text(table.title))
    for row in range(max(len(column_cells) for column_cells in cells)):
        parts.append(Text.assemble(("── ", "dim"), _text(cells[0][row] if row < len(cells[0]) else "")))
        record = Table.grid(padding=(0, 2, 0, 0))
        record.add_column(style="bold", max_width=_LABEL_SHARE, overflow="fold")
        record.add_column(overflow="fold")
        for header, column_cells in zip(headers[1:], cells[1:]):
            value = column_cells[row] if row < len(column_cells) else ""
            record.add_row(header, _text(value))
        parts.append(Padding(record, (0, 0, 0, 3)))
    if table.caption:
        parts.append(_text(table.caption))
    return _Records(parts)


class _Records:
    """The records of :func:`as_records`, laid out for the width they print at: the labels' column
    gets at most a third of it."""

    def __init__(self, parts: list[RenderableType]) -> None:
        self.parts = parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for part in self.parts:
            if isinstance(part, Padding) and isinstance(part.renderable, Table):
                part.renderable.columns[0].max_width = max(8, options.max_width // 3)
        yield Group(*self.parts)


def _text(renderable: object) -> Text:
    return renderable if isinstance(renderable, Text) else Text.from_markup(str(renderable))


def _natural_width(console: Console, table: Table) -> int:
    # As wide as the table would be with room for everything (its maximum measurement).
    options = console.options.update(width=1_000_000, max_width=1_000_000)
    return Measurement.get(console, options, table).maximum


def _column_width(console: Console, column: object) -> int:
    options = console.options.update(width=1_000_000, max_width=1_000_000)
    renderables = [getattr(column, "header", "")] + list(getattr(column, "cells", []))
    return max((Measurement.get(console, options, cell).maximum for cell in renderables), default=0)


def _plain(renderable: object) -> str:
    if isinstance(renderable, Text):
        return renderable.plain
    return Text.from_markup(str(renderable)).plain
