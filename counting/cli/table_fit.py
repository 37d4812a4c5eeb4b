"""Tables that keep every number whole on a narrow terminal.

rich fits a table wider than the terminal by squeezing every column, and a number squeezed below
its width is cut to "117.…" (or folded to "117." over "3", which reads as 117). Here a table that
does not fit first gives its folding columns (the paths) what width is left; when even that is
too little, each row is printed as a record, one "column value" line each, as psql's expanded
display does (``\\x auto``). A table that fits, and every table written to a file, is unchanged.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# Narrowest a folding column (a path) may get before the rows become records: a path folded into
# lines of fewer characters is harder to read than a record.
MIN_FOLD_WIDTH = 12


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
    each other column (values keep their markup: a disputed count stays red)."""
    columns = table.columns
    headers = [_plain(column.header) for column in columns]
    cells = [list(column.cells) for column in columns]
    rows = max((len(column_cells) for column_cells in cells), default=0)
    label_width = max((len(header) for header in headers[1:]), default=0)
    parts: list[RenderableType] = []
    if table.title:
        parts.append(table.title if isinstance(table.title, Text) else Text.from_markup(str(table.title)))
    for row in range(rows):
        first = cells[0][row] if row < len(cells[0]) else ""
        heading = first if isinstance(first, Text) else Text.from_markup(str(first))
        parts.append(Text("── ", style="dim") + heading)
        for header, column_cells in zip(headers[1:], cells[1:]):
            value = column_cells[row] if row < len(column_cells) else ""
            line = Text(f"   {header.ljust(label_width)}  ", style="bold")
            line += value if isinstance(value, Text) else Text.from_markup(str(value))
            parts.append(line)
    return Group(*parts)


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
