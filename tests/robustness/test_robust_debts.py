"""Known debts of the command line, each fixed with a test that failed before the fix."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image
from robust_helpers import assert_one_error, make_image


def _truncated_jpeg(path: Path, size: tuple[int, int]) -> Path:
    buffer = io.BytesIO()
    pixels = np.random.default_rng(5).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])  # the header says the same size
    return path


def test_features_stopping_at_a_bad_image_says_skip_bad_and_the_next_run_resumes(cli, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for k in range(9):
        make_image(folder / f"a{k}.png", size=(64, 48), seed=k)
    bad = _truncated_jpeg(folder / "z.jpg", (64, 48))
    out = tmp_path / "f.npy"
    result = cli("features", folder, "-o", out, "--batch-size", "4", "--no-progress")
    line = assert_one_error(result, str(bad), "truncated", "--skip-bad")
    assert "feature cache" in line
    assert not out.exists()
    # Two whole batches of four ran before the bad one: the next run takes them from the cache.
    result = cli("features", folder, "-o", out, "--batch-size", "4", "--no-progress", "--skip-bad")
    assert result.exit_code == 0, result.output
    assert "9 of 10 images: 8 from cache, 1 computed, 1 skipped" in result.stdout
    assert np.isnan(np.load(out)[9]).all() and np.isfinite(np.load(out)[:9]).all()


def test_features_bad_image_without_a_cache_does_not_promise_one(cli, tmp_path: Path) -> None:
    bad = _truncated_jpeg(tmp_path / "z.jpg", (64, 48))
    line = assert_one_error(cli("features", bad, "--no-cache", "--no-progress"), str(bad), "--skip-bad")
    assert "cache" not in line
