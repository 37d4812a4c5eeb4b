"""Outputs named by an open descriptor: ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``>(cmd)``.

Issue 49: ``count ... --csv >(cat > f)`` and ``--csv /dev/stdout | ...`` ended, after all the
counting, with ``error: /dev/fd/63: cannot write (No such file or directory)`` (the path was
resolved to ``pipe:[N]`` before it was opened), and ``count ... --csv /dev/stdout > log.txt``
replaced ``log.txt`` by rename: the table already printed there was lost. Such an output is
written through the descriptor the process holds, at its offset, never truncated or replaced.
Every pipe and file here is the test's own; the machine's device nodes are never written.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from robust_helpers import DEFAULT_MODEL, REPO_ROOT, assert_one_error, error_lines, make_image

from counting.core.files import (
    OutputError,
    atomic_write_text,
    check_outputs,
    check_writable,
    check_writable_folder,
    open_descriptor,
)

CLI = "import sys\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
FAST = ("-m", DEFAULT_MODEL, "--no-cache", "--no-progress")
CSV_HEADER = "image,count,low,high,familiarity,unfamiliar"


def _command(*args: object) -> list[str]:
    return [sys.executable, "-c", CLI, *map(str, args)]


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _csv_rows(text: str) -> list[dict[str, str]]:
    """The CSV document at the end of ``text`` (after a table, say), from its header line on."""
    start = text.index(CSV_HEADER)
    return list(csv.DictReader(io.StringIO(text[start:])))


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    return make_image(tmp_path / "photo.png")


@pytest.fixture
def descriptor_pipe() -> Iterator[tuple[int, int]]:
    """``(read end, write end)`` of a pipe of the test's own, closed after."""
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for end in (read_end, write_end):
        try:
            os.close(end)
        except OSError:
            pass


# -- the names of an open descriptor --------------------------------------------------------------
def test_descriptor_names_are_recognised_and_never_resolved(tmp_path: Path) -> None:
    link = tmp_path / "out.csv"
    link.symlink_to("/dev/stdout")
    assert open_descriptor("/dev/stdout") == 1
    assert open_descriptor("/dev/stderr") == 2
    assert open_descriptor("/dev/fd/5") == 5
    assert open_descriptor("/proc/self/fd/7") == 7
    assert open_descriptor(f"/proc/{os.getpid()}/fd/3") == 3
    assert open_descriptor(link) == 1  # a symlink to /dev/stdout is written through, as a shell does
    assert open_descriptor(tmp_path / "plain.csv") is None
    assert open_descriptor("-") is None  # "-" is the commands' own name for stdout (handled before)


def test_a_pipe_named_dev_fd_n_is_written_into(descriptor_pipe: tuple[int, int]) -> None:
    read_end, write_end = descriptor_pipe
    check_writable(f"/dev/fd/{write_end}")
    atomic_write_text(f"/dev/fd/{write_end}", "image,count\na.jpg,3.000\n")
    os.close(write_end)
    with os.fdopen(os.dup(read_end), "r") as reader:
        assert reader.read() == "image,count\na.jpg,3.000\n"


@pytest.mark.parametrize("append", [False, True], ids=["shell >", "shell >>"])
def test_a_regular_file_behind_a_descriptor_keeps_what_was_written_before(tmp_path: Path, append: bool) -> None:
    log = tmp_path / "log.txt"
    log.write_text("earlier run\n")
    flags = os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC)
    descriptor = os.open(log, flags)
    try:
        inode = os.fstat(descriptor).st_ino
        os.write(descriptor, b"the table\n")  # what the command printed before the CSV
        atomic_write_text(f"/proc/self/fd/{descriptor}", "image,count\n")
        os.write(descriptor, b"after\n")  # the offset moved past the CSV, as for one shell write
    finally:
        os.close(descriptor)
    kept = "earlier run\n" if append else ""
    assert log.read_text() == f"{kept}the table\nimage,count\nafter\n"
    assert os.stat(log).st_ino == inode  # written into, never replaced by a rename
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


def test_a_descriptor_that_is_not_open_or_read_only_is_refused_before_any_work(tmp_path: Path) -> None:
    closed = os.open(tmp_path, os.O_RDONLY)
    os.close(closed)
    with pytest.raises(OutputError, match=f"/dev/fd/{closed}: cannot write \\(file descriptor {closed} is not open\\)"):
        check_writable(f"/dev/fd/{closed}")
    source = tmp_path / "input.txt"
    source.write_text("data\n")
    reading = os.open(source, os.O_RDONLY)
    try:
        with pytest.raises(OutputError, match="is open for reading only"):
            check_writable(f"/dev/fd/{reading}")
    finally:
        os.close(reading)


def test_descriptor_outputs_against_inputs_and_other_outputs(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("")
    first, second = os.open(log, os.O_WRONLY), os.open(log, os.O_WRONLY)
    try:
        # `> log.txt 2>&1`: two descriptors on one file both write into it, nothing is replaced
        check_outputs([f"/dev/fd/{first}", f"/dev/fd/{second}"])
        with pytest.raises(OutputError, match="named for two outputs"):  # the rename would replace it
            check_outputs([f"/dev/fd/{first}", log])
        with pytest.raises(OutputError, match="is also an input"):
            check_outputs([f"/dev/fd/{first}"], inputs=[log])
        # opened by the shell before the run: not a new file in the data folder
        check_outputs([f"/dev/fd/{first}"], input_folders=[tmp_path])
    finally:
        os.close(first)
        os.close(second)


def test_an_annotated_folder_named_by_a_descriptor_is_refused_in_one_line(cli, tmp_path: Path, photo: Path) -> None:
    with pytest.raises(OutputError, match=r"/dev/stdout: is an open file descriptor \(1\), not a folder"):
        check_writable_folder("/dev/stdout")
    result = cli("count", photo, *FAST, "--annotated", "/dev/stdout")
    assert_one_error(result, "/dev/stdout: is an open file descriptor (1), not a folder")


# -- the command, in a process of its own --------------------------------------------------------
def _check_rows(rows: list[dict[str, str]], photo: Path) -> None:
    assert [row["image"] for row in rows] == [str(photo)]
    assert float(rows[0]["count"]) >= 0


@pytest.mark.slow
def test_csv_to_dev_stdout_in_a_pipe(photo: Path) -> None:
    process = subprocess.run(  # noqa: S603 - our own interpreter and module
        _command("count", photo, *FAST, "--csv", "/dev/stdout"),
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    assert "error:" not in process.stderr
    # stdout ends with the CSV: the line saying where it went is on stderr, not after it
    assert "counts written to /dev/stdout" in process.stderr
    assert process.stdout.startswith(CSV_HEADER)  # the CSV alone, as with --csv -: no table before it
    _check_rows(_csv_rows(process.stdout), photo)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["w", "a"], ids=["shell >", "shell >>"])
def test_csv_to_dev_stdout_redirected_to_a_file_keeps_what_was_there(tmp_path: Path, photo: Path, mode: str) -> None:
    log = tmp_path / "log.txt"
    log.write_text("earlier output\n")
    with open(log, mode) as stdout:
        process = subprocess.run(  # noqa: S603
            _command("count", photo, *FAST, "--csv", "/dev/stdout"),
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
            timeout=300,
        )
    assert process.returncode == 0, process.stderr
    text = log.read_text()
    assert text.startswith("earlier output\n") == (mode == "a")  # ef8ebcc replaced the file
    assert text.removeprefix("earlier output\n").startswith(CSV_HEADER)  # the CSV alone: no table
    _check_rows(_csv_rows(text), photo)
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


@pytest.mark.slow
def test_json_to_dev_stdout_redirected_to_a_file_is_valid_json(tmp_path: Path, photo: Path) -> None:
    log = tmp_path / "log.txt"
    with open(log, "w") as stdout:
        process = subprocess.run(  # noqa: S603
            _command("count", photo, *FAST, "--json", "/dev/stdout"),
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
            timeout=300,
        )
    assert process.returncode == 0, process.stderr
    document = json.loads(log.read_text())  # the document alone: a table before it made it invalid
    assert [row["image"] for row in document["images"]] == [str(photo)]


@pytest.mark.slow
def test_csv_to_dev_fd_n_of_a_pipe_passed_to_the_process(photo: Path, descriptor_pipe: tuple[int, int]) -> None:
    read_end, write_end = descriptor_pipe
    process = subprocess.Popen(  # noqa: S603
        _command("count", photo, *FAST, "--csv", f"/dev/fd/{write_end}", "-q"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
        pass_fds=(write_end,),
    )
    os.close(write_end)  # the process holds the only write end: the read ends when it exits
    with os.fdopen(os.dup(read_end), "r") as reader:
        document = reader.read()
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert document.startswith(CSV_HEADER)  # the CSV alone, whole
    _check_rows(_csv_rows(document), photo)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_csv_to_a_process_substitution(tmp_path: Path, photo: Path) -> None:
    copy = tmp_path / "copy.csv"
    script = f'"$0" -c "$1" count {photo} -m {DEFAULT_MODEL} --no-cache --no-progress -q --csv >(cat > {copy})'
    process = subprocess.run(  # noqa: S603
        ["bash", "-c", script, sys.executable, CLI],  # noqa: S607 - the shell of the README's example
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    assert error_lines(process.stderr) == []
    deadline = time.monotonic() + 30  # `cat` may still be writing when bash returns
    while time.monotonic() < deadline and not (copy.exists() and copy.read_text().endswith("\n")):
        time.sleep(0.05)
    _check_rows(_csv_rows(copy.read_text()), photo)


@pytest.mark.slow
def test_csv_to_dev_stderr(photo: Path) -> None:
    process = subprocess.run(  # noqa: S603
        _command("count", photo, *FAST, "--csv", "/dev/stderr", "-q"),
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    assert "Counts by" in process.stdout and CSV_HEADER not in process.stdout
    _check_rows(_csv_rows(process.stderr), photo)


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--csv", "--jsonl"])
def test_video_rows_to_dev_stdout_redirected_to_a_file_keep_what_was_there(tmp_path: Path, option: str) -> None:
    """`video --csv /dev/stdout > log` opened the path anew ("wb"): log was truncated, what the
    shell and the process wrote there before lost. Its rows now follow it."""
    from counting.apply.serve.videos import frames_to_video

    frames = [make_image(tmp_path / f"f{k}.png", (64, 48), seed=k) for k in range(3)]
    clip = frames_to_video(frames, tmp_path / "clip.avi", fps=5)
    log = tmp_path / "log.txt"
    log.write_text("earlier output\n")
    with open(log, "a") as stdout:
        process = subprocess.run(  # noqa: S603
            _command("video", clip, *FAST, option, "/dev/stdout"),
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
            timeout=300,
        )
    assert process.returncode == 0, process.stderr
    text = log.read_text()
    assert text.startswith("earlier output\n")
    rows = text.splitlines()[1:]
    if option == "--csv":
        assert rows[0].startswith("frame,time_s,count") and len(rows) == 4
    else:
        assert [json.loads(row)["frame"] for row in rows] == [0, 1, 2]


@pytest.mark.slow
def test_two_documents_into_stdout_under_any_names_are_refused(photo: Path) -> None:
    """`--csv - --json /dev/stdout` interleaved both documents on stdout ("-" and "-" was refused)."""
    for csv_name, json_name in (("-", "/dev/stdout"), ("/proc/self/fd/1", "/dev/stdout")):
        process = subprocess.run(  # noqa: S603
            _command("count", photo, *FAST, "--csv", csv_name, "--json", json_name),
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=300,
        )
        assert process.returncode == 2 and process.stdout == ""
        assert "both write into stdout" in process.stderr


def test_video_annotated_into_a_descriptor_is_refused(cli, tmp_path: Path) -> None:
    """`video --annotated /dev/stdout` mixed the per-frame lines into the video (count refuses it)."""
    from counting.apply.serve.videos import frames_to_video

    clip = frames_to_video([make_image(tmp_path / f"f{k}.png", (64, 48), seed=k) for k in range(2)], tmp_path / "c.avi")
    result = cli("video", clip, "--annotated", "/dev/stdout")
    assert_one_error(result, "/dev/stdout", "open file descriptor", "give a file name")


@pytest.mark.slow
def test_video_rows_to_a_dash_go_to_stdout(tmp_path: Path) -> None:
    """`video --csv -` was refused ("cannot go to stdout here") while count takes it."""
    from counting.apply.serve.videos import frames_to_video

    clip = frames_to_video([make_image(tmp_path / f"f{k}.png", (64, 48), seed=k) for k in range(3)], tmp_path / "c.avi")
    process = subprocess.run(  # noqa: S603
        _command("video", clip, *FAST, "--csv", "-"), capture_output=True, text=True, env=_environment(), timeout=300
    )
    assert process.returncode == 0, process.stderr
    lines = process.stdout.splitlines()
    assert lines[0].startswith("frame,time_s,count") and len(lines) == 4
