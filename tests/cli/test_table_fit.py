"""Tables on a terminal narrower than they are keep every number whole (cli/table_fit.py): their
paths fold narrower, or their rows print as records; a table that fits prints as before."""

from __future__ import annotations

import io
import re

from rich.console import Console
from rich.table import Table

from counting.cli.common import _ResultsConsole
from counting.cli.table_fit import MIN_FOLD_WIDTH, as_records, fit_table

ROWS = [
    ("frames/camera-north/seq_000123.jpg", "[bold red]117.3 disputed[/]", "105.2", "130.9", "12.3 [10.1-14.6]", "0.83"),
    ("b.jpg", "3.0", "1.0", "5.0", "1.0 [0.0-2.0]", "0.912"),
]
NUMBERS = ["117.3", "105.2", "130.9", "12.3 [10.1-14.6]", "0.83", "3.0", "1.0 [0.0-2.0]", "0.912"]


def counts_table() -> Table:
    table = Table(title="Counts by crowd (90% interval)", title_justify="left")
    table.add_column("image", overflow="fold")
    for name in ("count", "low", "high", "zone_door", "familiarity"):
        table.add_column(name, justify="right")
    for row in ROWS:
        table.add_row(*row)
    return table


def printed(width: int, table: Table | None = None) -> str:
    out = io.StringIO()
    console = _ResultsConsole(file=out, width=width, highlight=False, soft_wrap=True, color_system=None)
    console.print(table or counts_table())
    return out.getvalue()


def test_a_table_that_fits_is_printed_unchanged() -> None:
    console = Console(file=io.StringIO(), width=200)
    table = counts_table()
    assert fit_table(console, table) is table
    text = printed(200)
    assert "┃ image" in text and "frames/camera-north/seq_000123.jpg" in text
    assert all(number in text for number in NUMBERS)


def test_a_narrower_terminal_folds_the_paths_and_keeps_the_numbers() -> None:
    text = printed(90)  # the table is 102 wide: the image column gives up what is missing
    assert "┃ image" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 90
    assert all(number in text for number in NUMBERS)
    assert "frames/camera-north/seq_000123.jpg" not in text  # folded over two lines
    first_column = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert "".join(first_column).startswith("frames/camera-north/seq_000123.jpgb.jpg")


def test_a_terminal_too_narrow_for_the_numbers_prints_records() -> None:
    for width in (30, 50, 70):  # rich alone printed "117.…", "10…" and "zo…"
        text = printed(width)
        assert "…" not in text and "┃" not in text, text
        lines = [line.rstrip() for line in text.splitlines()]
        assert lines[0] == "Counts by crowd (90% interval)"
        assert lines[1] == "── frames/camera-north/seq_000123.jpg"  # whole: copy-pasteable
        assert all(len(line) <= width for line in lines[2:])
        words = {word for line in lines for word in line.split()}
        assert {word for number in NUMBERS for word in number.split()} <= words  # each number whole
        if width < 50:  # 30: the zone's interval wraps under its count, at the space
            continue
        assert re.fullmatch(r" +count +117\.3 disputed", lines[2])
        assert re.fullmatch(r" +zone_door +12\.3 \[10\.1-14\.6\]", lines[5])
        assert lines[7] == "── b.jpg" and re.fullmatch(r" +familiarity +0\.912", lines[-1])
        assert len(lines) == 1 + 2 * 6


def test_a_long_value_wraps_under_itself_and_the_caption_stays() -> None:
    # Soft-wrapped record lines broke at the terminal's edge, mid-number ("0.99" over "2"), and the
    # caption (an evaluation's split) was left out.
    table = Table(title="VOC counts", caption="split train=10-11,test=1-5")
    table.add_column("image", overflow="fold")
    table.add_column("a label of sixty-four characters " + "z" * 31, justify="right")
    table.add_column("classes")
    classes = ", ".join(f"class{k} {k}.5 [1.0-2.0]" for k in range(12))
    table.add_row("a.jpg", "29.3", classes)
    for width in (40, 76):
        lines = [line.rstrip() for line in printed(width, table).splitlines()]
        assert all(len(line) <= width for line in lines), lines
        assert lines[-1] == "split train=10-11,test=1-5"
        values = [line[width // 3 + 5 :].strip() for line in lines[2:-1]]  # the value column
        assert values[0] == "29.3" and " ".join(value for value in values[1:] if value) == classes


def test_records_keep_the_cells_markup_and_style_only_their_parts() -> None:
    out = io.StringIO()
    Console(file=out, width=40, force_terminal=True, color_system="standard").print(as_records(counts_table()))
    text = out.getvalue()
    assert "\x1b[1;31m117.3 disputed" in text  # the disputed count stays bold red
    assert "\x1b[2m── \x1b[0mframes/camera-north" in text  # the rule is dim, the path is not
    assert "\x1b[1mlow" in text and "\x1b[1m105.2" not in text  # the label is bold, its value is not


def test_a_table_without_a_folding_column_prints_records_when_too_wide() -> None:
    table = Table(title="figures")
    for name in ("figures", "MAE", "RMSE", "inside 90 %"):
        table.add_column(name, justify="right")
    table.add_row("validation", "95.41", "176.19", "90.7 %")
    assert printed(200, table).count("┃") > 0
    text = printed(20, table)
    assert "…" not in text and all(value in text for value in ("95.41", "176.19", "90.7 %"))


def test_a_table_without_rows_keeps_its_headers() -> None:
    table = Table("image", "count", "low", "high")
    assert fit_table(Console(file=io.StringIO(), width=10), table) is table


def test_paths_fold_no_narrower_than_the_minimum() -> None:
    # Room for an image column of MIN_FOLD_WIDTH - 1 only: records, not a path in 11-character lines.
    natural = len(printed(200).splitlines()[1])
    path_width = len(ROWS[0][0])
    text = printed(natural - path_width + MIN_FOLD_WIDTH - 1)
    assert "┃" not in text and "── frames/camera-north/seq_000123.jpg" in text
    assert "┃" in printed(natural - path_width + MIN_FOLD_WIDTH)
