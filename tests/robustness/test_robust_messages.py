"""Point 17: messages say what is wrong with which file, in one line; globs count files once."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import assert_one_error, make_image, needs_non_root
from test_robust_memory_bounds import png_with_header_size

from counting.core.errors import ImageError
from counting.data import imaging


def test_permission_denied_is_not_cannot_decode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = make_image(tmp_path / "private.png")

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(image))

    monkeypatch.setattr(imaging, "open", denied, raising=False)
    with pytest.raises(ImageError, match=r"private.png: permission denied$"):
        imaging.load_image(image)


@needs_non_root
def test_permission_denied_through_the_cli(cli, tmp_path: Path) -> None:
    image = make_image(tmp_path / "private.png")
    image.chmod(0)
    assert_one_error(cli("count", image), "private.png", "permission denied")


def test_cannot_decode_stays_cannot_decode(cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.png"
    broken.write_bytes(make_image(tmp_path / "ok.png").read_bytes()[:200])
    line = assert_one_error(cli("count", broken), "broken.png")
    assert "truncated" in line or "cannot decode" in line


def test_library_warnings_are_one_line_each(cli, tmp_path: Path) -> None:
    # PIL warns about pictures above 89 Mpx; counting accepts them up to 100 Mpx (refused above
    # from the header), so PIL's warning, which named no file, is not shown for them.
    large = png_with_header_size(tmp_path / "large.png", 9_600, 9_500)  # 91 Mpx: decoded (a broken body)
    result = cli("count", large, make_image(tmp_path / "ok.png"))
    assert result.exit_code == 0, result.output
    # the skipped image is a diagnostic on stderr too (issue 25), its own line
    warnings = [
        line
        for line in result.stderr.splitlines()
        if line.strip() and not line.startswith("skipped:") and "unlike this model" not in line  # familiarity
    ]
    assert warnings == []
    assert (
        "decompression bomb" not in result.output
        and "warnings.warn" not in result.output
        and "DecompressionBombWarning" not in result.output
    )
    assert "large.png" in result.stderr  # and the image itself is reported as skipped


def test_recursive_glob_through_a_symlink_loop_counts_each_image_once(cli, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    (folder / "day").mkdir(parents=True)
    make_image(folder / "day" / "a.png")
    make_image(folder / "b.png", seed=3)
    (folder / "day" / "loop").symlink_to(folder)  # photos/day/loop -> photos
    out = tmp_path / "c.csv"
    result = cli("count", f"{folder}/**/*.png", "--csv", out)
    assert result.exit_code == 0, result.output
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 2 and sorted(row.split(",")[0].rsplit("/", 1)[1] for row in rows) == ["a.png", "b.png"]


def test_features_glob_through_a_symlink_loop(cli, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    make_image(folder / "a.png")
    (folder / "again").symlink_to(folder)
    out = tmp_path / "f.npy"
    result = cli("features", f"{folder}/**/*.png", "-o", out, "--no-progress", "--no-cache")
    assert result.exit_code == 0, result.output
    assert np.load(out).shape == (1, 1000)


def test_model_given_as_a_folder(cli, tmp_path: Path, features_file: Path) -> None:
    assert_one_error(
        cli("count", "--features", features_file, "--model", tmp_path),
        str(tmp_path),
        "is a folder",
    )


def test_error_lines_show_undecodable_names_escaped(cli, tmp_path: Path) -> None:
    missing = tmp_path / os.fsdecode(b"gone\xff.png")
    line = assert_one_error(cli("count", missing), "gone\\xff.png")
    assert "\udcff" not in line


def test_a_decompression_bomb_among_other_pictures_is_skipped_in_one_line(cli, tmp_path: Path) -> None:
    """400 Mpx (PIL's error, not its warning): refused from the header when the run groups its
    pictures by size, as it is when counted alone (it was a traceback with two pictures)."""
    bomb = png_with_header_size(tmp_path / "huge.png", 20_000, 20_000)
    ok = make_image(tmp_path / "ok.png")
    result = cli("count", bomb, ok, "--csv", tmp_path / "out.csv")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "DecompressionBombError" not in result.output
    skipped = [line for line in result.stderr.splitlines() if "huge.png" in line]
    assert skipped and all("decompression bomb" in line for line in skipped)
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert len(rows) == 2 and "ok.png" in rows[1]
