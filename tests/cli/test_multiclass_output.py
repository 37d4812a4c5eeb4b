"""Per-class count rows and the `count` table: intervals per class, only classes above the threshold."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from counting.apply.api import count_rows
from counting.cli.multiclass_output import class_counts_table, per_class_table
from counting.core.metrics import voc_metrics
from counting.model.counting_model import CountResult


def class_count_rows(class_names, sources, counts, low, high, ok) -> list[dict]:
    """The per-class records `count` prints and writes (counting.apply.api.count_rows)."""
    result = CountResult(list(sources), np.asarray(counts), low, high, np.asarray(ok, bool))
    return count_rows(SimpleNamespace(class_names=class_names), result)


def _render(table) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(table)
    return console.file.getvalue()


def test_rows_have_a_column_per_class_with_its_interval_and_skip_failed_images() -> None:
    counts = np.array([[2.0, 0.2, 0.7], [np.nan, np.nan, np.nan]])
    low, high = counts - 0.5, counts + 1.0
    rows = class_count_rows(["person", "car", "dog"], ["a.jpg", "b.jpg"], counts, low, high, np.array([True, False]))
    assert len(rows) == 1
    assert list(rows[0]) == [
        "image",
        "total",
        "count_person",
        "low_person",
        "high_person",
        "count_car",
        "low_car",
        "high_car",
        "count_dog",
        "low_dog",
        "high_dog",
        "familiarity",
        "unfamiliar",
    ]
    assert rows[0]["total"] == pytest.approx(2.9) and rows[0]["high_dog"] == pytest.approx(1.7)
    assert rows[0]["familiarity"] is None and rows[0]["unfamiliar"] is None  # a model without: unknown


def test_table_lists_only_classes_at_the_threshold_largest_first() -> None:
    model = SimpleNamespace(name="voc20.npz", class_names=["person", "car", "dog"], interval=SimpleNamespace(level=0.9))
    rows = class_count_rows(
        model.class_names, ["a.jpg"], np.array([[0.7, 0.2, 2.0]]), np.zeros((1, 3)), np.full((1, 3), 3.0), [True]
    )
    text = _render(class_counts_table(model, rows, str, threshold=0.5))
    assert "dog 2.0 [0.0–3.0], person 0.7 [0.0–3.0]" in text and "car" not in text.split("classes")[1]
    assert "car" not in _render(class_counts_table(model, rows, str, threshold=1.0)).split("(count")[1]


def test_per_class_table_shows_the_hand_checkable_figures() -> None:
    truth = np.array([[1.0, 0.0], [3.0, 0.0]])
    figures = voc_metrics(truth, np.array([[1.0, 1.0], [1.0, 0.0]]), ["person", "car"])
    text = _render(per_class_table(figures))
    # person: errors 0 and -2 -> RMSE sqrt(2), relRMSE sqrt((4/4)/2); car: one false 1 -> 0.707
    assert "person" in text and "1.414" in text and "0.707" in text
