"""`counting features` stopped part-way (--strict at a bad picture, Ctrl-C, a full disk): what was
extracted stays in the cache, the next run resumes, and the message promises nothing it did not keep."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from robust_helpers import (
    assert_one_error,
    assert_process_one_error,
    file_size_limit,
    make_image,
    run_cli_process,
)


def _truncated_jpeg(path: Path, size: tuple[int, int]) -> Path:
    buffer = io.BytesIO()
    pixels = np.random.default_rng(5).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])  # the header says the same size
    return path


def test_features_stopping_at_a_bad_image_with_strict_and_the_next_run_resumes(cli, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for k in range(9):
        make_image(folder / f"a{k}.png", size=(64, 48), seed=k)
    bad = _truncated_jpeg(folder / "z.jpg", (64, 48))
    out = tmp_path / "f.npy"
    result = cli("features", folder, "-o", out, "--batch-size", "4", "--no-progress", "--strict")
    line = assert_one_error(result, str(bad), "truncated", "--strict")
    assert "feature cache" in line
    assert not out.exists()
    # Two whole batches of four ran before the bad one: the next run takes them from the cache.
    result = cli("features", folder, "-o", out, "--batch-size", "4", "--no-progress")  # skips it
    assert result.exit_code == 0, result.output
    assert "9 of 10 images: 8 from cache, 1 computed, 1 skipped" in result.stdout
    assert np.isnan(np.load(out)[9]).all() and np.isfinite(np.load(out)[:9]).all()


def test_features_bad_image_without_a_cache_does_not_promise_one(cli, tmp_path: Path) -> None:
    bad = _truncated_jpeg(tmp_path / "z.jpg", (64, 48))
    line = assert_one_error(cli("features", bad, "--no-cache", "--no-progress", "--strict"), str(bad), "--strict")
    assert "cache" not in line


# -- full disk and Ctrl-C during `counting features` ---------------------------------------------
@pytest.mark.slow
def test_full_disk_for_a_new_features_file_does_not_mention_a_previous_file(tmp_path: Path) -> None:
    # Was: "...; the previous file is unchanged" when there never was one.
    image = make_image(tmp_path / "a.png", size=(64, 48))
    out = tmp_path / "out" / "f.csv"
    out.parent.mkdir()
    process = run_cli_process("features", image, "-o", out, "--no-progress", preamble=file_size_limit(2_000))
    assert_process_one_error(process, str(out), "cannot write (File too large); no file was created")
    assert list(out.parent.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_during_features_keeps_what_was_extracted_and_the_next_run_resumes(
    tmp_path: Path, _private_cache
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for k in range(12):
        make_image(folder / f"a{k:02d}.png", size=(64, 48), seed=k)
    out = tmp_path / "f.npy"
    # A real SIGINT once the fourth descriptor is in the cache (batches of two).
    preamble = (
        "import os, signal\n"
        "from counting.features.cache import FeatureCache\n"
        "put, stored = FeatureCache.put, []\n"
        "def counted(self, *args):\n"
        "    put(self, *args)\n"
        "    stored.append(1)\n"
        "    if len(stored) == 4:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "FeatureCache.put = counted\n"
    )
    args = ("features", folder, "-o", out, "--batch-size", "2", "--no-progress")
    process = run_cli_process(*args, preamble=preamble)
    line = assert_process_one_error(process, "interrupted: no descriptors file written", "feature cache", code=130)
    assert "Traceback" not in process.stderr, line
    assert not out.exists()
    process = run_cli_process(*args)
    assert process.returncode == 0, process.stderr
    assert "12 of 12 images: 4 from cache, 8 computed, 0 skipped" in process.stdout
