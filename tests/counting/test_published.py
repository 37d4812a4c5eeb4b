"""Published baseline tables: the figures of issue 4, each with a source and a definition."""

from __future__ import annotations

import pytest

from counting.evaluate.published import COLUMNS, load_published, published_datasets


def _value(dataset: str, method: str, metric: str) -> float:
    rows = [r for r in load_published(dataset) if r["method"] == method and r["metric"] == metric]
    assert len(rows) == 1, (dataset, method, metric)
    return rows[0]["value"]


def test_every_dataset_with_figures_has_a_table() -> None:
    assert published_datasets() == ["mall", "shanghaitech", "ucsd", "voc"]


@pytest.mark.parametrize(
    ("dataset", "method", "metric", "value"),
    [
        ("ucsd", "Dalal-Triggs HOG", "MSE", 39.75),
        ("ucsd", "Felzenszwalb DPM", "MSE", 24.72),
        ("ucsd", "Chan & Vasconcelos 2012", "MSE", 9.95),
        ("ucsd", "AGP-10 univariate", "MSE", 16.37),
        ("ucsd", "AGP-25 univariate", "MSE", 13.90),
        ("voc", "glance-noft-2L", "mRMSE", 0.50),
        ("voc", "glance-sos-2L", "mRMSE", 0.51),
        ("voc", "aso-sub-ft-1L-3x3", "mRMSE", 0.43),
        ("voc", "seq-sub-ft-3x3", "mRMSE", 0.42),
        ("voc", "AGP-25 univariate", "mRMSE", 0.43),
        ("mall", "GPR", "MAE", 3.72),
        ("mall", "GPR", "MSE", 20.1),
        ("mall", "Ridge regression", "MAE", 3.59),
        ("mall", "Ridge regression", "MSE", 19.0),
        ("mall", "MORR", "MAE", 3.15),
        ("mall", "MORR", "MSE", 15.7),
        ("mall", "CA-RR", "MAE", 3.43),
        ("mall", "CA-RR", "MSE", 17.7),
        ("mall", "COUNT Forest", "MAE", 2.50),
        ("mall", "COUNT Forest", "MSE", 10.0),
        ("mall", "Bi-ConvLSTM", "MAE", 2.10),
        ("mall", "Bi-ConvLSTM", "MSE", 7.6),
        ("shanghaitech", "LBP + ridge regression", "MAE", 59.1),
        ("shanghaitech", "LBP + ridge regression", "RMSE", 81.7),
        ("shanghaitech", "MCNN", "MAE", 26.4),
        ("shanghaitech", "MCNN", "RMSE", 41.3),
        ("shanghaitech", "CSRNet", "MAE", 10.6),
        ("shanghaitech", "CSRNet", "RMSE", 16.0),
    ],
)
def test_figures_match_the_issue(dataset: str, method: str, metric: str, value: float) -> None:
    assert _value(dataset, method, metric) == pytest.approx(value)


def test_row_counts_and_fields() -> None:
    sizes = {name: len(load_published(name)) for name in published_datasets()}
    assert sizes == {"ucsd": 5, "voc": 12, "mall": 12, "shanghaitech": 6}
    for name in published_datasets():
        for row in load_published(name):
            assert tuple(row) == COLUMNS
            assert row["dataset"] == name
            assert isinstance(row["value"], float) and row["value"] > 0
            assert len(row["source"]) > 10 and len(row["definition"]) > 20


def test_definitions_say_how_the_metric_was_computed() -> None:
    voc = load_published("voc")[0]["definition"]
    assert "clipped at 0" in voc and "rounded" in voc and "20 classes" in voc
    mall_mse = next(r for r in load_published("mall") if r["metric"] == "MSE")
    assert "squared" in mall_mse["definition"] and "801-2000" in mall_mse["definition"]
    # MCNN/CSRNet call their RMSE "MSE": the definition must say so.
    assert "reported as 'MSE'" in next(r for r in load_published("shanghaitech") if r["metric"] == "RMSE")["definition"]


def test_unknown_dataset_has_no_rows_and_results_are_copies() -> None:
    assert load_published("folder") == []
    rows = load_published("MALL")
    rows[0]["value"] = -1.0
    assert load_published("mall")[0]["value"] == pytest.approx(3.72)
