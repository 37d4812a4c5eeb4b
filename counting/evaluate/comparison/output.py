"""The comparison's files: published figures beside ours, as CSV, JSON and Markdown."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.files import atomic_write, atomic_write_text, dumps_json
from counting.evaluate.comparison.data import ComparisonData
from counting.evaluate.comparison.methods import MethodResult


def published_rows(dataset: str) -> list[dict]:
    """Published figures for the dataset, one row per method: ``{method, mae, mse, rmse, source}``."""
    from counting.evaluate.published import load_published

    by_method: dict[str, dict] = {}
    for entry in load_published(dataset):
        row = by_method.setdefault(
            entry["method"], {"method": entry["method"], "source": entry["source"], "definition": entry["definition"]}
        )
        row[entry["metric"].lower()] = float(entry["value"])
    for row in by_method.values():
        if "mse" in row and "rmse" not in row:
            row["rmse"] = round(float(np.sqrt(row["mse"])), 2)
        if "rmse" in row and "mse" not in row:
            row["mse"] = round(row["rmse"] ** 2, 1)
    return list(by_method.values())


CSV_COLUMNS = (
    "source",
    "method",
    "label",
    "features",
    "status",
    "mae",
    "mse",
    "rmse",
    "smoothed_mae",
    "smoothed_mse",
    "smoothed_rmse",
    "fit_seconds",
    "predict_seconds",
    "n_train",
    "n_test",
    "note",
)


def published_record(row: dict, note: str, figures: dict) -> dict:
    """A published figure as a table record beside ours (``figures``: its metric columns)."""
    return {
        "source": row["source"],
        "method": row["method"],
        "label": f"{row['method']} (published)",
        "features": "published",
        "status": "published",
        "note": note,
        **figures,
    }


def table_records(results: Sequence[MethodResult], published: Sequence[dict]) -> list[dict]:
    """Our rows then the published ones, in one column layout."""
    records = [{"source": "measured here", **result.row()} for result in results]
    records += [
        published_record(row, row.get("definition", ""), {key: row.get(key) for key in ("mae", "mse", "rmse")})
        for row in published
    ]
    return [{column: record.get(column) for column in CSV_COLUMNS} for record in records]


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(records: Sequence[dict], sequence: bool) -> str:
    columns = ["label", "features", "mae", "mse", "rmse"]
    if sequence:
        columns += ["smoothed_mae", "smoothed_rmse"]
    columns += ["fit_seconds", "predict_seconds", "source"]
    titles = {
        "label": "method",
        "mae": "MAE",
        "mse": "MSE",
        "rmse": "RMSE",
        "smoothed_mae": "MAE (smoothed)",
        "smoothed_rmse": "RMSE (smoothed)",
        "fit_seconds": "fit s",
        "predict_seconds": "predict s",
    }
    lines = ["| " + " | ".join(titles.get(c, c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for record in records:
        cells = [_cell(record[c]) for c in columns]
        if record["status"] not in ("ok", "published"):
            cells[2] = f"{record['status']}: {record['note']}"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_table_files(
    out_dir: str | Path, stem: str, columns: Sequence[str], records: list[dict], summary: dict, markdown: str
) -> dict[str, Path]:
    """``<stem>.csv`` (``records`` under ``columns``), ``.json`` (``summary``) and ``.md`` in
    ``out_dir``, each written atomically; returns their paths. Shared by every compare table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "json": out / f"{stem}.json", "md": out / f"{stem}.md"}
    with atomic_write(paths["csv"], newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(records)
    atomic_write_text(paths["json"], dumps_json(summary) + "\n")
    atomic_write_text(paths["md"], markdown + "\n")
    return paths


def comparison_summary(data: ComparisonData, records: list[dict], settings: dict) -> dict:
    """The JSON summary's common part: dataset, split, sizes, settings and the table's rows."""
    return {
        "dataset": data.dataset,
        "split": data.split,
        "n_train": len(data.train_counts),
        "n_test": len(data.test_counts),
        "settings": settings,
        "rows": records,
    }


def write_comparison(
    data: ComparisonData, results: Sequence[MethodResult], out_dir: str | Path, stem: str | None = None
) -> dict[str, Path]:
    """Write ``<stem>.csv``, ``.json`` and ``.md`` into ``out_dir``; returns their paths."""
    records = table_records(results, published_rows(data.dataset))
    summary = comparison_summary(data, records, data.settings) | {
        "predictions": {
            f"{result.method}|{result.features}": [round(float(v), 3) for v in result.predictions]
            for result in results
            if result.predictions is not None
        },
        "y_true": [float(v) for v in data.test_counts],
    }
    header = (
        f"# {data.dataset}: methods compared on split `{data.split}`\n\n"
        f"{len(data.train_counts)} train / {len(data.test_counts)} test images; descriptors: "
        f"{data.settings.get('backbone')} at input size {data.settings.get('input_size') or 'native'}, "
        f"ROI {'on' if data.settings.get('roi') else 'off'}. Fit and predict times are measured here "
        "(regressor only for feature methods; detection included for HOG). Published figures use "
        "their papers' protocols (see the CSV's note column), not this split.\n\n"
    )
    markdown = header + markdown_table(records, data.is_sequence)
    return write_table_files(out_dir, stem or f"compare-{data.dataset}", CSV_COLUMNS, records, summary, markdown)
