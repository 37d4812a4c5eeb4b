"""Published baseline figures, kept as CSV data files (one per dataset) beside this module.

Each row: dataset, method, metric, value, source, definition. The numbers come from the cited
papers (issue 4); ``source`` says where, ``definition`` how the metric was computed.
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources

COLUMNS: tuple[str, ...] = ("dataset", "method", "metric", "value", "source", "definition")


def published_datasets() -> list[str]:
    """Names of the datasets that have a published table."""
    folder = resources.files(__package__)
    return sorted(entry.name.removesuffix(".csv") for entry in folder.iterdir() if entry.name.endswith(".csv"))


@cache
def _read_table(dataset: str) -> tuple[dict, ...]:
    resource = resources.files(__package__) / f"{dataset}.csv"
    if not resource.is_file():
        return ()
    with resource.open("r", encoding="utf-8", newline="") as handle:
        rows = []
        for row in csv.DictReader(handle):
            row["value"] = float(row["value"])
            rows.append({column: row[column] for column in COLUMNS})
    return tuple(rows)


def load_published(dataset: str) -> list[dict]:
    """Published figures for ``dataset`` (ucsd, voc, mall, shanghaitech); [] when none are known."""
    return [dict(row) for row in _read_table(dataset.lower())]
