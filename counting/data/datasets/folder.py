"""Any folder of images with a CSV of counts.

CSV (default ``<root>/counts.csv``): a header ``filename,count`` - or ``filename`` and one
column per class (the header names the classes) - then one row per image; file names are
relative to ``root``. An optional ``split`` column (train/test) gives the standard split;
without it every image is train. A two-column CSV may omit the header. ``index`` is the row's
1-based position among the data rows. Every image directly in ``root`` must have a row.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np

from counting.core.errors import DatasetError
from counting.data.datasets.base import Annotated, CountingDataset, select_samples
from counting.data.datasets.splits import SPLITS, parse_split
from counting.data.paths import IMAGE_SUFFIXES

DEFAULT_CSV = "counts.csv"
# The densest crowd-counting images have about 2x10^4 people; a count above this is a typo or
# hostile input, and would overflow the squared-error sums of training and evaluation.
MAX_COUNT = 1e6
FILENAME_HEADERS = frozenset({"filename", "file", "image", "path"})
SPLIT_COLUMN = "split"


def read_folder(root: Path | str, split: str = "standard", csv_path: Path | str | None = None) -> CountingDataset:
    """Read images in ``root`` with counts from ``csv_path`` (default ``root/counts.csv``)."""
    spec = parse_split(split)
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise DatasetError(f"{root}: folder not found")
    table = _csv_location(root, csv_path)
    rows, count_columns, has_split = _read_rows(table)
    class_names = count_columns if len(count_columns) > 1 else None
    entries = []
    seen: dict[Path, int] = {}
    for position, (line, filename, values, part) in enumerate(rows, start=1):
        if "\0" in filename:  # no file name holds one (the OS refuses it in a path)
            raise DatasetError(f"{table}: line {line}: the file name holds a NUL byte")
        # Lexical check (symlinked images inside the folder are fine; '../x' and '/x' are not).
        if not Path(os.path.normpath(root / filename)).is_relative_to(root):
            raise DatasetError(f"{table}: line {line}: '{filename}' points outside the dataset folder {root}")
        path = (root / filename).resolve()
        if path in seen:
            raise DatasetError(f"{table}: line {line}: '{filename}' is listed again (first on line {seen[path]})")
        seen[path] = line
        if not path.is_file():
            raise DatasetError(f"{table}: line {line}: image '{filename}' not found in {root}")
        count = np.array(values) if class_names else values[0]
        entries.append(
            Annotated(
                index=position,
                path=path,
                count=count,
                standard_split=part if has_split else "train",
            )
        )
    _reject_unlisted_images(root, table, set(seen))
    samples = select_samples(entries, spec, source=table, sequence=False)
    return CountingDataset(
        name="folder",
        root=root,
        samples=samples,
        roi_mask=None,
        class_names=class_names,
        split=spec.text,
    )


def _csv_location(root: Path, csv_path: Path | str | None) -> Path:
    if csv_path is None:
        table = root / DEFAULT_CSV
    else:
        given = Path(csv_path).expanduser()
        table = given if given.is_absolute() or given.exists() else root / given
    if not table.is_file():
        raise DatasetError(f"{table}: counts CSV not found (expected columns filename,count)")
    return table.resolve()


def _read_rows(table: Path) -> tuple[list[tuple[int, str, list[float], str]], list[str], bool]:
    """Rows as (line, filename, counts, split), the count column names, and whether a split
    column exists."""
    try:
        with table.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            lines = [(reader.line_num, row) for row in reader]
    except (UnicodeDecodeError, csv.Error) as error:
        raise DatasetError(f"{table}: not a readable CSV text file ({error})") from None
    lines = [(number, [cell.strip() for cell in row]) for number, row in lines if any(cell.strip() for cell in row)]
    if not lines:
        raise DatasetError(f"{table}: empty; expected a header filename,count and one row per image")
    header_line, header = lines[0]
    if header[0].lower() in FILENAME_HEADERS:
        columns, data = header[1:], lines[1:]
    elif len(header) == 2 and _is_number(header[1]):
        columns, data = ["count"], lines
    else:
        raise DatasetError(
            f"{table}: line {header_line}: expected a header 'filename,count' (or filename and one column per class)"
        )
    has_split = SPLIT_COLUMN in (name.lower() for name in columns)
    split_at = [name.lower() for name in columns].index(SPLIT_COLUMN) if has_split else -1
    count_columns = [name for i, name in enumerate(columns) if i != split_at]
    if not count_columns or any(not name for name in count_columns):
        raise DatasetError(f"{table}: line {header_line}: every count column needs a name in the header")
    if not data:
        raise DatasetError(f"{table}: no data rows after the header")
    rows = []
    for line, cells in data:
        if len(cells) != len(columns) + 1:
            raise DatasetError(f"{table}: line {line}: {len(cells)} cells, the header has {len(columns) + 1}")
        part = cells[1 + split_at].lower() if has_split else "train"
        if part not in SPLITS:
            raise DatasetError(f"{table}: line {line}: split '{cells[1 + split_at]}' is not train or test")
        values = [cell for i, cell in enumerate(cells[1:]) if i != split_at]
        rows.append(
            (
                line,
                cells[0],
                [_count(table, line, name, value) for name, value in zip(count_columns, values, strict=True)],
                part,
            )
        )
    return rows, count_columns, has_split


def _count(table: Path, line: int, column: str, text: str) -> float:
    if not _is_number(text):
        raise DatasetError(f"{table}: line {line}: count '{text}' in column '{column}' is not a number")
    value = float(text)
    if value < 0:
        raise DatasetError(f"{table}: line {line}: count {text} in column '{column}' is negative")
    if value > MAX_COUNT:
        raise DatasetError(
            f"{table}: line {line}: count {text} in column '{column}' is implausibly large "
            f"(more than {MAX_COUNT:.0e} objects in one image)"
        )
    return value


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _reject_unlisted_images(root: Path, table: Path, listed: set[Path]) -> None:
    unlisted = sorted(
        path
        for path in root.iterdir()
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file() and path.resolve() not in listed
    )
    if unlisted:
        raise DatasetError(f"{unlisted[0]}: image has no row in {table}")
