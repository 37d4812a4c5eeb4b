"""A feature cache inside a folder of pictures being read is refused: one line, exit 2, before any
work (its files would sit among the user's pictures)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from counting.cli.app import app
from counting.core.files import cache_among_inputs


@pytest.fixture()
def pictures(tmp_path: Path) -> Path:
    folder = tmp_path / "pictures"
    folder.mkdir()
    for number in range(2):
        Image.new("RGB", (64, 48), (40 * number, 20, 20)).save(folder / f"p{number}.jpg")
    return folder


def refused(result, hint: str, cache: Path, pictures: Path) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert hint in lines[0] and str(cache) in lines[0] and "outside it" in lines[0]
    # refused before any work: nothing was written among the pictures
    assert sorted(path.name for path in pictures.rglob("*")) == ["p0.jpg", "p1.jpg"]
    return lines[0]


def test_count_refuses_a_cache_dir_inside_a_folder_it_reads(runner, pictures: Path) -> None:
    cache = pictures / "cache"
    line = refused(
        runner.invoke(app, ["count", str(pictures), "--cache-dir", str(cache)]), "'--cache-dir'", cache, pictures
    )
    assert f"inside {pictures}" in line


def test_count_refuses_the_folder_of_globbed_pictures_as_cache(runner, pictures: Path) -> None:
    line = refused(
        runner.invoke(app, ["count", str(pictures / "*.jpg"), "--cache-dir", str(pictures)]),
        "'--cache-dir'",
        pictures,
        pictures,
    )
    assert "is the folder this command reads pictures from" in line


def test_count_refuses_cache_from_the_environment_inside_the_pictures(runner, pictures: Path, monkeypatch) -> None:
    cache = pictures / "deep" / "cache"
    monkeypatch.setenv("COUNTING_CACHE_DIR", str(cache))
    refused(runner.invoke(app, ["count", str(pictures)]), "$COUNTING_CACHE_DIR", cache, pictures)


@pytest.mark.parametrize("command", ["evaluate", "train", "report", "familiarize", "compare"])
def test_dataset_commands_refuse_a_cache_dir_inside_the_dataset(runner, pictures: Path, tmp_path, command) -> None:
    cache = pictures / "sub" / "cache"
    out = {"train": ["-o", str(tmp_path / "m.npz")], "report": ["-o", str(tmp_path / "r")]}
    out |= {"familiarize": ["-o", str(tmp_path / "f.npz")], "compare": ["-o", str(tmp_path / "c")]}
    arguments = [command, "-d", "folder", "-r", str(pictures), "--cache-dir", str(cache), *out.get(command, [])]
    refused(runner.invoke(app, arguments), "'--cache-dir'", cache, pictures)


def test_features_refuses_a_cache_dir_inside_a_folder_it_reads(runner, pictures: Path) -> None:
    cache = pictures / "c"
    refused(
        runner.invoke(app, ["features", str(pictures), "--cache-dir", str(cache)]), "'--cache-dir'", cache, pictures
    )


def test_which_caches_lie_among_the_inputs(tmp_path: Path) -> None:
    data, photos, elsewhere = tmp_path / "data", tmp_path / "photos", tmp_path / "elsewhere"
    for folder in (data / "frames", photos / "sub", elsewhere):
        folder.mkdir(parents=True)
    os.symlink(data / "frames", elsewhere / "link")
    assert cache_among_inputs(data / "frames" / "c", [data]) == str(data)
    assert cache_among_inputs(data, [data]) == str(data)
    assert cache_among_inputs(elsewhere / "link" / "c", [data]) == str(data)  # through a symlink
    assert cache_among_inputs(tmp_path / "data-cache", [data]) is None  # a name that only starts alike
    assert cache_among_inputs(photos, [], [photos]) == str(photos)
    assert cache_among_inputs(photos / "sub" / "..", [None], [photos]) == str(photos)
    # below the folder of single named photos (~/photo.jpg with the cache in ~/.cache): allowed
    assert cache_among_inputs(photos / "sub", [], [photos]) is None
    assert cache_among_inputs(elsewhere, [data], [photos]) is None
