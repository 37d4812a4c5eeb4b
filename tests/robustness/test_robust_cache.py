"""Points 6, 12, 15: an unusable cache is skipped with one warning; devices and FIFOs never hang;
a replaced image is never answered from the cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import (
    assert_process_one_error,
    make_image,
    needs_non_root,
    run_cli_process,
)

from counting.core.files import OutputError
from counting.features import FeatureCache


def warnings_in(stderr: str) -> list[str]:
    """The warning lines, less the familiarity summary (generated pictures are unlike Mall's)."""
    return [
        line
        for line in stderr.splitlines()
        if line.startswith("warning:") and "unlike this model's training pictures" not in line
    ]


# -- point 6: read-only, non-folder or full cache folder ------------------------------------------
def test_cache_dir_that_is_a_file_warns_once_and_counts(cli, tmp_path: Path) -> None:
    blocker = tmp_path / "cache-file"
    blocker.write_text("not a folder")
    images = [make_image(tmp_path / f"{k}.png", seed=k) for k in range(3)]
    out = tmp_path / "c.csv"
    result = cli("count", *images, "--cache-dir", blocker, "--csv", out)
    assert result.exit_code == 0, result.output
    lines = warnings_in(result.stderr)
    assert len(lines) == 1 and str(blocker) in lines[0] and "not a folder" in lines[0]
    assert len(out.read_text().splitlines()) == 4
    assert blocker.read_text() == "not a folder"


def test_cache_env_pointing_below_a_file(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("COUNTING_CACHE_DIR", str(blocker / "cache"))
    result = cli("count", make_image(tmp_path / "a.png"))
    assert result.exit_code == 0, result.output
    assert len(warnings_in(result.stderr)) == 1 and "feature cache not used" in result.output


def test_full_cache_disk_warns_once_and_features_are_still_written(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.features.cache as cache_module

    def disk_full(path, data, durable=True):
        raise OutputError(f"{path}: cannot write (no space left on the device)")

    monkeypatch.setattr(cache_module, "atomic_write_bytes", disk_full)
    images = [make_image(tmp_path / f"{k}.png", seed=k) for k in range(4)]
    out = tmp_path / "f.npy"
    result = cli(
        "features",
        *images,
        "--cache-dir",
        tmp_path / "cache",
        "-o",
        out,
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    lines = warnings_in(result.stderr)
    assert len(lines) == 1 and "no space left" in lines[0]
    assert np.isfinite(np.load(out)).all()


@needs_non_root
def test_read_only_cache_folder(cli, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        result = cli("count", make_image(tmp_path / "a.png"), "--cache-dir", cache)
    finally:
        cache.chmod(0o755)
    assert result.exit_code == 0 and len(warnings_in(result.stderr)) == 1


def test_cache_library_turns_itself_off(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    seen: list[str] = []
    cache = FeatureCache(blocker, on_warning=seen.append)
    image = make_image(tmp_path / "a.png")
    assert cache.content_hash(image) is None and cache.get_many("k", ["h"], (3,)) == {}
    cache.put("k", "h", np.zeros(3))
    cache.flush()
    assert len(seen) == 1 and not cache.enabled


# -- point 12: /dev/zero and FIFOs never hang ------------------------------------------------------
@pytest.mark.slow
def test_features_of_dev_zero_with_the_cache_is_one_line(tmp_path: Path) -> None:
    process = run_cli_process(
        "features",
        "/dev/zero",
        "--cache-dir",
        tmp_path / "cache",
        "--no-progress",
        timeout=60,
    )
    assert process.returncode == 1 and "Traceback" not in process.stderr
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "/dev/zero" in lines[0] and "not a regular file" in lines[0]


@pytest.mark.slow
def test_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "frame.png"
    os.mkfifo(fifo)
    process = run_cli_process("count", fifo, timeout=60)
    assert_process_one_error(process, str(fifo), "not a regular file")


def test_fifo_in_a_folder_is_skipped_and_the_rest_counted(cli, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "a.png")
    make_image(tmp_path / "b.png")
    result = cli("features", tmp_path / "a.png", tmp_path / "b.png", "--skip-bad", "--no-progress",
                 "--cache-dir", tmp_path / "cache")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (
        "a.png: not a regular file" in result.stderr
        and "1 of 2 images" in result.stdout  # the command's summary line goes to stdout
    )


# -- point 15: an image replaced with its mtime restored is not answered from the cache ------------
def test_replaced_image_with_restored_mtime_is_recomputed(cli, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # BMP: the same size in bytes for any content of the same dimensions.
    image = make_image(tmp_path / "frame.bmp", size=(64, 48), seed=1)
    other = make_image(tmp_path / "other.bmp", size=(64, 48), seed=2)
    first = cli(
        "features",
        image,
        "-o",
        tmp_path / "a.npy",
        "--cache-dir",
        cache,
        "--no-progress",
    )
    assert first.exit_code == 0 and "1 computed" in first.stdout
    status = image.stat()
    shutil.copyfile(other, tmp_path / "swap.bmp")
    os.replace(tmp_path / "swap.bmp", image)  # same name, same size, new content
    assert image.stat().st_size == status.st_size
    os.utime(image, ns=(status.st_atime_ns, status.st_mtime_ns))  # mtime put back
    second = cli(
        "features",
        image,
        "-o",
        tmp_path / "b.npy",
        "--cache-dir",
        cache,
        "--no-progress",
    )
    assert second.exit_code == 0 and "1 computed" in second.stdout, second.output
    fresh = cli("features", other, "-o", tmp_path / "c.npy", "--no-cache", "--no-progress")
    assert fresh.exit_code == 0
    assert np.allclose(np.load(tmp_path / "b.npy"), np.load(tmp_path / "c.npy"), atol=1e-4)
    assert not np.allclose(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"), atol=1e-2)


def test_same_size_rewrite_in_place_with_restored_mtime(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path / "cache")
    path = tmp_path / "x.bin"
    path.write_bytes(b"A" * 100)
    before = cache.content_hash(path)
    status = path.stat()
    path.write_bytes(b"B" * 100)  # same inode, same size
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert path.stat().st_size == status.st_size and path.stat().st_mtime_ns == status.st_mtime_ns
    assert cache.content_hash(path) != before


def test_unchanged_image_is_still_a_cache_hit(cli, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    image = make_image(tmp_path / "frame.png")
    assert cli("features", image, "--cache-dir", cache, "--no-progress").exit_code == 0
    again = cli("features", image, "--cache-dir", cache, "--no-progress")
    assert "1 from cache, 0 computed" in again.stdout
