"""Files that list inputs, one per line, holding a NUL byte (issue 49).

No file name, camera or URL holds a NUL byte (the OS refuses it in a path); such a line came out
as ``ValueError: embedded null byte`` from deep in a path check. Each list now gives one line
naming the file and the line: `video --sources`, VOC's ImageSets lists, a folder's counts CSV.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from robust_helpers import assert_one_error, assert_unchanged, make_image, snapshot

from counting.apply.distributed.streams import read_sources
from counting.core.errors import DatasetError, StreamError
from counting.data.datasets import load_dataset


def test_video_sources_line_with_a_nul_byte_is_one_line(cli, tmp_path: Path) -> None:
    sources = tmp_path / "cameras.txt"
    sources.write_bytes(b"# two cameras\nfirst.avi\nsec\x00ond.avi\n")
    before = snapshot(sources)
    result = cli("video", "--sources", sources)
    assert_one_error(result, f"{sources}, line 3: holds a NUL byte")
    assert_unchanged(before)
    assert not (tmp_path / "cameras-counts").exists()


def test_read_sources_names_the_line_and_skips_comments(tmp_path: Path) -> None:
    listing = tmp_path / "sources.txt"
    listing.write_bytes(b"# a note \x00 in a comment\n0\nrtsp://camera/1\n")
    assert read_sources(listing) == ["0", "rtsp://camera/1"]
    listing.write_bytes(b"0\n\n\x00\n")
    with pytest.raises(StreamError, match="line 3: holds a NUL byte"):
        read_sources(listing)


def voc_folder(root: Path, trainval: bytes) -> Path:
    year = root / "VOC2007"
    for name in ("Annotations", "JPEGImages", "ImageSets/Main"):
        (year / name).mkdir(parents=True)
    for image_id in ("000001", "000002"):
        (year / "Annotations" / f"{image_id}.xml").write_text(
            "<annotation><object><name>person</name><difficult>0</difficult>"
            "<bndbox><xmin>1</xmin><ymin>2</ymin><xmax>30</xmax><ymax>40</ymax></bndbox></object></annotation>"
        )
        make_image(year / "JPEGImages" / f"{image_id}.jpg")
    (year / "ImageSets" / "Main" / "trainval.txt").write_bytes(trainval)
    return year


def test_voc_image_list_with_a_nul_byte_names_the_line(cli, tmp_path: Path) -> None:
    year = voc_folder(tmp_path / "voc", b"000001\n0000\x0002\n")
    listing = year / "ImageSets" / "Main" / "trainval.txt"
    with pytest.raises(DatasetError, match="line 2: holds a NUL byte"):
        load_dataset("voc", year)
    result = cli("train", "-d", "voc", "--root", year, "--out", tmp_path / "model.npz")
    assert_one_error(result, str(listing), "line 2: holds a NUL byte")
    assert not (tmp_path / "model.npz").exists()


def test_folder_counts_csv_with_a_nul_byte_names_the_line(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    root.mkdir()
    make_image(root / "a.jpg")
    make_image(root / "b.jpg", seed=1)
    (root / "counts.csv").write_bytes(b"filename,count\na.jpg,1\nb\x00.jpg,2\n")
    with pytest.raises(DatasetError) as raised:
        load_dataset("folder", root)
    assert str(raised.value) == f"{root / 'counts.csv'}: line 3: the file name holds a NUL byte"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[server]\ndatabase = "hist\\u0000ory.sqlite"\n', "server.database"),
        ('[[camera]]\nname = "a\\u0000b"\nsource = "x.avi"\n', "camera[0].name"),
        ('[[camera]]\nname = "a"\nsource = "x\\u0000.avi"\n', "camera[0].source"),
        ('[[camera]]\nname = "a"\nsource = "0"\nzones = "zo\\u0000nes.toml"\n', "camera[0].zones"),
    ],
)
def test_serve_config_string_with_a_nul_byte_is_one_line(cli, tmp_path: Path, toml: str, key: str) -> None:
    """A TOML string may hold \\u0000: serve's history database name was a traceback at start-up."""
    config = tmp_path / "serve.toml"
    config.write_text(toml)
    assert_one_error(cli("serve", config, "--port", "0", "-q"), f"{config}: {key}: holds a NUL byte")
    assert not list(tmp_path.glob("hist*"))
