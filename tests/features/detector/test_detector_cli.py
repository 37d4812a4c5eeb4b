"""`counting models fetch` and `counting count --annotated` end to end."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from counting.cli.app import app
from counting.features.detector.fetch import SOURCE_ENV, detector_dir, fetch_model_files, model_files_present

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
PHOTOS = "coco-voc20/VOCdevkit/VOC2007/JPEGImages"


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the real centernet.json/.bin (the user's cache, else fetched with npm)."""
    if model_files_present():
        return detector_dir()
    if shutil.which("npm") is None and not os.environ.get(SOURCE_ENV):
        if os.environ.get("CI"):
            pytest.fail("CI must run the real detector: npm is missing")
        pytest.skip(f"the detector's files cannot be had here: no npm and no {SOURCE_ENV}")
    folder = tmp_path_factory.mktemp("detector-files")
    fetch_model_files(folder)
    return folder


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_files: Path) -> Path:
    """An empty cache whose detector comes from the real files (no network)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("COUNTING_CACHE_DIR", str(cache))
    monkeypatch.delenv("COUNTING_ONNX_DIR", raising=False)
    monkeypatch.setenv(SOURCE_ENV, str(model_files))
    return cache


def test_annotated_needs_a_detector_model(tmp_path: Path) -> None:
    photo = tmp_path / "a.jpg"
    cv2.imwrite(str(photo), np.full((40, 60, 3), 128, np.uint8))
    result = runner.invoke(
        app, ["count", "-m", str(ROOT / "models" / "default.npz"), str(photo), "--annotated", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    assert "--annotated draws a detector's boxes or a density map" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()


def test_models_fetch_unknown_action() -> None:
    result = runner.invoke(app, ["models", "refresh"])
    assert result.exit_code == 1
    assert "unknown action" in result.output


@pytest.mark.slow
def test_models_fetch_then_cached(fresh_cache: Path) -> None:
    first = runner.invoke(app, ["models", "fetch"])
    assert first.exit_code == 0, first.output
    assert "detector ready" in first.output and "fetched and converted" in first.output
    onnx_files = list((fresh_cache / "onnx").glob("centernet-*.onnx"))
    assert len(onnx_files) == 1 and onnx_files[0].stat().st_size > 4_000_000
    assert model_files_present(fresh_cache / "detector")
    second = runner.invoke(app, ["models", "fetch"])
    assert second.exit_code == 0 and "already in the cache" in second.output


@pytest.mark.slow
def test_count_annotated_draws_each_photo(fresh_cache: Path, shared_data: Path, tmp_path: Path) -> None:
    photos = [shared_data / PHOTOS / name for name in ("000000000257.jpg", "000000491008.jpg")]
    out = tmp_path / "annotated"
    result = runner.invoke(
        app,
        ["count", "-m", str(ROOT / "models" / "voc20.npz"), *map(str, photos), "--annotated", str(out), "--no-cache"],
    )
    assert result.exit_code == 0, result.output
    assert "person" in result.output and "chair" in result.output
    for photo in photos:
        drawn = cv2.imread(str(out / photo.name))
        original = cv2.imread(str(photo))
        assert drawn.shape == original.shape
        # boxes and the corner table change pixels; most of the photo stays as it was
        changed = np.abs(drawn.astype(int) - original.astype(int)).max(axis=2) > 60
        assert 0.005 < changed.mean() < 0.5
        assert changed[:20, :100].mean() > 0.2  # the counts in the corner
