"""Tables that keep every number whole on a narrow terminal.

rich fits a table wider than the terminal by squeezing every column, and a number squeezed below
its width is cut to "117.…" (or folded to "117." over "3", which reads as 117). Here a table that
does not fit first gives its folding columns (the paths) what width is left; when even that is
too little, each row is printed as a record, one "column value" line each, as psql's expanded
display does (``\\x auto``). A table that fits, and every table written to a file, is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text

# Narrowest a folding column (a path) may get before the rows become records: a path folded into
# lines of fewer characters is harder to read than a record.
MIN_FOLD_WIDTH = 12


def fit_table(console: Console, table: Table) -> RenderableType:
    """``table`` as it prints whole on ``console``: itself, with its paths folded narrower, or
    its rows as records."""
    width = console.size.width
    natural = _natural_width(console, table)
    if natural <= width:
        return table
    folding = [column for column in table.columns if column.overflow == "fold" and column.width is None]
    if folding:
        fixed = natural - sum(_column_width(console, column) for column in folding)
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
    cells = [list(column.cells) for column in columns]
    rows = [
        [_text(column_cells[row]) if row < len(column_cells) else Text() for column_cells in cells]
        for row in range(table.row_count)
    ]
    return _Records(
        title=_text(table.title) if table.title else None,
        labels=[_text(column.header).plain for column in columns[1:]],
        rows=rows,
        caption=_text(table.caption) if table.caption else None,
    )


@dataclass
class _Records:
    """The records of :func:`as_records`, laid out when printed: the labels' column gets at
    most a third of the line it prints on."""

    title: Text | None
    labels: list[str]
    rows: list[list[Text]]  # each row's cells, its heading first
    caption: Text | None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.title is not None:
            yield self.title
        for heading, *values in self.rows:
            yield Text.assemble(("── ", "dim"), heading)
            record = Table.grid(padding=(0, 2, 0, 0))
            record.add_column(style="bold", max_width=max(8, options.max_width // 3), overflow="fold")
            record.add_column(overflow="fold")
            for label, value in zip(self.labels, values, strict=True):
                record.add_row(label, value)
            yield Padding(record, (0, 0, 0, 3))
        if self.caption is not None:
            yield self.caption


def _text(renderable: object) -> Text:
    return renderable if isinstance(renderable, Text) else Text.from_markup(str(renderable))


def _natural_width(console: Console, renderable: RenderableType) -> int:
    # As wide as it would be with room for everything (its maximum measurement).
    options = console.options.update(width=1_000_000, max_width=1_000_000)
    return Measurement.get(console, options, renderable).maximum


def _column_width(console: Console, column: Column) -> int:
    return max(_natural_width(console, cell) for cell in (column.header, *column.cells))
