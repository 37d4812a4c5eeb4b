"""`counting count`'s outputs under hostile conditions (a hostile tester's report of 2026-11-29).

Each case failed on the code at the time: stdout on a full disk or a closed pipe lost the CSV,
JSON and annotated photos asked for (a traceback, or exit 1 with nothing said); ``--annotated``
replaced files already in its folder and drew over the ``--json`` file; a folder under /proc was
refused after all the work with a traceback; PIL's decompression-bomb warning was printed for
pictures counting accepts; a Ctrl-C in the annotated phase did not say how far it got; a photo
gone before its turn stopped the phase; and a ``--json`` symlink was replaced by a plain file.
Device nodes are private ones made in the test's folder (``mknod``, root only).
"""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import threading
import warnings
import zlib
from pathlib import Path

import pytest
from PIL import Image
from robust_helpers import (
    DEFAULT_MODEL,
    FULL_DEVICE,
    REPO_ROOT,
    assert_one_error,
    assert_unchanged,
    error_lines,
    make_image,
    needs_root,
    private_device,
    snapshot,
)

needs_proc = pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc file system here")

# The descriptor model counts a small picture in well under a second; --annotated needs a model
# that draws (the shipped default: density heads and the detector).
FAST = ("-m", DEFAULT_MODEL, "--no-cache")
CLI = "import sys\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"


def _process(*args: object, stdout: object) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", CLI, *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=str(REPO_ROOT),
    )


def _rows(path: Path) -> list[str]:
    return path.read_text().splitlines()


# -- 1. stdout fails: the files are written all the same ----------------------------------------
@needs_root
@pytest.mark.slow
def test_stdout_on_a_full_disk_still_writes_the_csv_and_json(tmp_path: Path) -> None:
    full = tmp_path / "full"
    private_device(full, FULL_DEVICE)
    image = make_image(tmp_path / "a.png")
    out_csv, out_json = tmp_path / "out.csv", tmp_path / "out.json"
    with open(full, "w") as stdout:
        process = _process("count", image, *FAST, "--csv", out_csv, "--json", out_json, stdout=stdout)
        _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    (line,) = error_lines(stderr)
    assert line == "error: stdout: cannot write (no space left on the device)"
    rows = _rows(out_csv)
    assert rows[0].startswith("image,count") and len(rows) == 2 and str(image) in rows[1]
    document = json.loads(out_json.read_text())
    assert [row["image"] for row in document["images"]] == [str(image)]
    assert stat.S_ISCHR(os.stat(full).st_mode)  # written into, never replaced

    # --csv - on the full device: the document is lost, the JSON file is not
    out_json.unlink()
    with open(full, "w") as stdout:
        process = _process("count", image, *FAST, "--csv", "-", "--json", out_json, "-q", stdout=stdout)
        _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1 and error_lines(stderr) == [line]
    assert json.loads(out_json.read_text())["images"][0]["image"] == str(image)


@pytest.mark.slow
def test_a_closed_pipe_is_quiet_and_still_writes_the_json(tmp_path: Path) -> None:
    image = make_image(tmp_path / "a.png")
    out_json = tmp_path / "out.json"
    process = _process("count", image, *FAST, "--json", out_json, stdout=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the table is printed (`| true`)
    stderr = process.stderr.read()
    process.wait(timeout=300)
    assert process.returncode == 1, stderr  # click's exit status for a closed pipe
    assert error_lines(stderr) == [], stderr  # nothing said: the reader left on purpose
    assert json.loads(out_json.read_text())["images"][0]["image"] == str(image)


def test_stdout_guard_keeps_going_and_says_the_failure_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import io

    monkeypatch.setattr(sys, "stdout", io.StringIO())  # the guard flushes stdout: never pytest's

    from counting.cli.common import Stdout
    from counting.core.files import OutputError

    stdout, calls = Stdout(), []

    def failing() -> None:
        calls.append("table")
        raise OSError(errno.ENOSPC, "No space left on device")

    stdout.write(failing)
    stdout.write(lambda: calls.append("after"))  # stdout failed: not tried again
    assert calls == ["table"]
    with pytest.raises(OutputError, match=r"^stdout: cannot write \(no space left on the device\)$"):
        stdout.finish()
    closed = Stdout()
    closed.write(lambda: (_ for _ in ()).throw(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    import typer

    with pytest.raises(typer.Exit) as exit_info:
        closed.finish()
    assert exit_info.value.exit_code == 1
    Stdout().finish()  # nothing failed: nothing said


# -- 2, 3. --annotated writes new files only, never another output's --------------------------
def test_annotated_refuses_a_file_already_in_its_folder_before_any_work(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.cli.count

    monkeypatch.setattr(counting.cli.count, "count_pictures", _no_work)
    photos = tmp_path / "photos"
    photos.mkdir()
    make_image(photos / "000000000009.png")
    make_image(photos / "other.png", seed=1)
    folder = tmp_path / "ann"
    folder.mkdir()
    (folder / "000000000009.jpg").write_text("precious\n")
    (folder / "notes.txt").write_text("mine\n")
    before = snapshot(folder / "000000000009.jpg", folder / "notes.txt")
    result = cli("count", photos, "--annotated", folder, "-q")
    line = assert_one_error(result, str(folder / "000000000009.jpg"), "already exists", "never replaces")
    assert "more of" not in line  # one name taken, said as one
    assert_unchanged(before)
    assert sorted(path.name for path in folder.iterdir()) == ["000000000009.jpg", "notes.txt"]

    (folder / "other.jpg").write_text("also mine\n")
    line = assert_one_error(cli("count", photos, "--annotated", folder, "-q"), "already exists")
    assert "(and 1 more of the 2)" in line


def test_annotated_refuses_the_photos_own_folder_as_an_input(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.cli.count

    monkeypatch.setattr(counting.cli.count, "count_pictures", _no_work)
    photo = make_image(tmp_path / "a.jpg")
    before = snapshot(photo)
    assert_one_error(cli("count", photo, "--annotated", tmp_path, "-q"), str(photo), "is also an input")
    assert_unchanged(before)


def test_annotated_refuses_the_json_s_name_before_any_work(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.cli.count

    monkeypatch.setattr(counting.cli.count, "count_pictures", _no_work)
    photo = make_image(tmp_path / "000000000009.png")
    folder = tmp_path / "ann3"
    for option in ("--json", "--csv"):
        result = cli("count", photo, option, folder / "000000000009.jpg", "--annotated", folder, "-q")
        assert_one_error(result, str(folder / "000000000009.jpg"), "named for two outputs", "annotated photo")
        assert not folder.exists()  # nothing made, not even the folder
    # through a symlink to the same name
    (tmp_path / "elsewhere.json").symlink_to(folder / "000000000009.jpg")
    result = cli("count", photo, "--json", tmp_path / "elsewhere.json", "--annotated", folder, "-q")
    assert_one_error(result, "named for two outputs")


def _no_work(*args: object, **kwargs: object) -> object:
    raise AssertionError("the command counted before refusing its outputs")


# -- 4. a folder that takes no new entries is refused up front, whoever runs it ----------------
@needs_proc
@pytest.mark.parametrize(
    ("option", "path", "fragment"),
    [
        ("--annotated", "/proc/counting-test-annotated", "folder /proc: its file system takes no new folders"),
        ("--json", "/proc/counting-test.json", "folder /proc:"),
        ("--csv", "/proc/counting-test/x.csv", "folder /proc:"),
    ],
)
def test_outputs_under_proc_are_one_line_before_any_work(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, path: str, fragment: str
) -> None:
    import counting.cli.count

    monkeypatch.setattr(counting.cli.count, "count_pictures", _no_work)
    monkeypatch.setattr(counting.cli.count, "load_model_option", _no_work)  # refused before the model loads
    result = cli("count", make_image(tmp_path / "a.png"), option, path)
    assert_one_error(result, path, "cannot write here", fragment)
    assert not os.path.lexists(path)


def test_the_probe_leaves_nothing_behind_and_names_a_refusing_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import tempfile

    from counting.core.files import OutputError, check_writable, check_writable_folder

    (tmp_path / "kept.txt").write_text("x")
    check_writable(tmp_path / "out.csv")
    check_writable(tmp_path / "new" / "deeper" / "out.csv")
    check_writable_folder(tmp_path / "annotated")
    check_writable_folder(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.txt"]

    def read_only(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    with pytest.raises(OutputError, match=r"out\.csv: cannot write here \(folder .*: read-only file system\)$"):
        check_writable(tmp_path / "out.csv")
    with pytest.raises(OutputError, match=r"ann: cannot write here \(folder .*: read-only file system\)$"):
        check_writable_folder(tmp_path / "ann")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.txt"]


# -- 5. PIL's bomb warning: never for what counting decodes, and its own line for the rest ------
def _png_with_header_size(path: Path, width: int, height: int) -> Path:
    """A tiny PNG whose header claims ``width`` x ``height`` (nothing that big is stored)."""
    Image.new("L", (1, 1)).save(path)
    data = bytearray(path.read_bytes())
    ihdr = 8
    data[ihdr + 8 : ihdr + 16] = struct.pack(">II", width, height)
    data[ihdr + 21 : ihdr + 25] = struct.pack(">I", zlib.crc32(bytes(data[ihdr + 4 : ihdr + 21])) & 0xFFFFFFFF)
    path.write_bytes(bytes(data))
    return path


def test_no_pil_bomb_warning_below_the_project_s_limit_and_one_line_above(tmp_path: Path) -> None:
    from counting.core.errors import ImageError
    from counting.data.imaging import image_size, load_image

    accepted = _png_with_header_size(tmp_path / "big_10000x9000.png", 10_000, 9_000)  # 90 Mpx: PIL warned
    refused = _png_with_header_size(tmp_path / "big_12000x9000.png", 12_000, 9_000)  # 108 Mpx
    huge = _png_with_header_size(tmp_path / "bomb_20000x10000.png", 20_000, 10_000)  # PIL's own error
    filters = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Only the header is real: the pixels cannot be read, which is said, and nothing else.
        with pytest.raises(ImageError, match=r"big_10000x9000\.png: cannot read the image header"):
            image_size(accepted)
        with pytest.raises(ImageError, match=r"big_10000x9000\.png: cannot decode"):
            load_image(accepted)
        with pytest.raises(ImageError, match=r"big_12000x9000\.png: image too large \(12000x9000 pixels"):
            load_image(refused)
        with pytest.raises(ImageError, match=r"bomb_20000x10000\.png: image too large \(200 megapixels; at most 100"):
            load_image(huge)
    assert [str(warning.message) for warning in caught] == []
    assert warnings.filters == filters  # the quiet filter left with the last read
    # outside counting's reads PIL still warns as it always did
    with pytest.warns(Image.DecompressionBombWarning):
        Image.open(accepted).close()


def test_no_pil_bomb_warning_from_reads_in_several_threads(tmp_path: Path) -> None:
    from counting.core.errors import ImageError
    from counting.data.imaging import load_image

    accepted = _png_with_header_size(tmp_path / "big.png", 10_000, 9_000)
    filters = list(warnings.filters)
    problems: list[str] = []

    def read() -> None:
        for _ in range(50):
            try:
                load_image(accepted)
            except ImageError as error:
                problems.append(str(error))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(problems) == 200 and all("big.png: cannot decode" in problem for problem in problems)
    assert [str(warning.message) for warning in caught] == []
    assert warnings.filters == filters


def test_count_of_a_refused_size_is_the_project_s_line_alone(cli, tmp_path: Path) -> None:
    refused = _png_with_header_size(tmp_path / "big_12000x9000.png", 12_000, 9_000)
    result = cli("count", refused, *FAST)
    assert_one_error(result, "big_12000x9000.png: image too large (12000x9000 pixels")
    assert "warning" not in result.stderr and "Image size" not in result.stderr


# -- 6d, 6e. the annotated phase: a Ctrl-C says how far it got; a vanished photo is skipped ----
@pytest.fixture
def four_photos(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "photos"
    folder.mkdir()
    return [make_image(folder / f"p{k}.png", size=(128, 96), seed=k) for k in range(4)]


def test_ctrl_c_in_the_annotated_phase_says_how_many_photos_were_written(
    cli, tmp_path: Path, four_photos: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.apply.annotated_photos as annotated_photos

    real_write = annotated_photos.atomic_write_bytes
    calls: list[Path] = []

    def write_then_interrupt(path: Path, data: bytes, **kwargs: object) -> None:
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the third photo is written
        calls.append(path)
        real_write(path, data, **kwargs)

    monkeypatch.setattr(annotated_photos, "atomic_write_bytes", write_then_interrupt)
    out_csv, out_json, folder = tmp_path / "out.csv", tmp_path / "out.json", tmp_path / "ann"
    result = cli("count", *four_photos, "--no-cache", "--csv", out_csv, "--json", out_json, "--annotated", folder)
    line = assert_one_error(result, code=130)
    written = f"{out_csv} written; {out_json} written; 2 of 4 annotated photos written to {folder}"
    assert line == f"error: interrupted: {written}"
    assert sorted(path.name for path in folder.iterdir()) == ["p0.jpg", "p1.jpg"]
    assert len(_rows(out_csv)) == 5


def test_a_photo_gone_before_its_turn_is_skipped_and_the_rest_drawn(
    cli, tmp_path: Path, four_photos: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.cli.count

    real_count = counting.cli.count.count_pictures

    def count_then_delete(*args: object, **kwargs: object) -> object:
        result = real_count(*args, **kwargs)
        four_photos[1].unlink()  # deleted once counted, before the annotated phase
        return result

    monkeypatch.setattr(counting.cli.count, "count_pictures", count_then_delete)
    folder = tmp_path / "ann"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")  # another name in the folder: left alone
    out_json = tmp_path / "out.json"
    result = cli("count", *four_photos, "--no-cache", "--json", out_json, "--annotated", folder)
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped:")]
    assert skipped == [f"skipped: {four_photos[1]}: file not found (not drawn)"]
    assert sorted(path.name for path in folder.iterdir()) == ["notes.txt", "p0.jpg", "p2.jpg", "p3.jpg"]
    assert (folder / "notes.txt").read_text() == "mine\n"
    assert f"3 of 4 annotated photos written to {folder}" in result.stdout
    assert len(json.loads(out_json.read_text())["images"]) == 4  # counted before it went
    for name in ("p0.jpg", "p2.jpg", "p3.jpg"):
        with Image.open(folder / name) as drawn:
            assert drawn.format == "JPEG" and drawn.size == (128, 96)


# -- 6f. an output named by a symlink is written through it ------------------------------------
def test_json_and_csv_through_symlinks_write_the_linked_files(cli, tmp_path: Path) -> None:
    image = make_image(tmp_path / "a.png")
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(Path("made") / "new.csv")
    result = cli("count", image, *FAST, "--json", link, "--csv", dangling, "-q")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert dangling.is_symlink()
    assert json.loads(real.read_text())["images"][0]["image"] == str(image)
    assert _rows(tmp_path / "made" / "new.csv")[1].startswith(str(image))
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith(".")]


def test_atomic_writer_keeps_the_link_its_mode_and_refuses_a_loop(tmp_path: Path) -> None:
    from counting.core.files import OutputError, atomic_write_text

    real = tmp_path / "real.txt"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new" and stat.S_IMODE(real.stat().st_mode) == 0o640
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    with pytest.raises(OutputError, match=r"loop\.txt: is a symlink loop"):
        atomic_write_text(loop, "x")
    assert loop.is_symlink()
