"""`counting video`'s outputs under hostile conditions: a full device, a file-size limit, Ctrl-C
at the wrong moment, a stdout that fails, a pipe reading stdout, and tall narrow frames.

Every case failed on the code at the time of filing (a traceback, exit 0 over a video cut at the
limit, "written to" said of files left unchanged, "done:" among the per-frame lines, a label cut
to ``smoo``). Device nodes are private ones made in the test's own folder (``mknod``, root only);
the machine's ``/dev`` is never touched.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from robust_helpers import (
    FULL_DEVICE,
    REPO_ROOT,
    assert_one_error,
    assert_process_one_error,
    assert_unchanged,
    file_size_limit,
    make_video,
    private_device,
    run_cli_process,
    snapshot,
)

import counting.apply.video as video_module
from counting.apply.video import MIN_LABEL_SCALE, annotate, count_video, label_scale
from counting.core.files import OutputError
from counting.model.counting_model import load_model

YELLOW = np.array([0, 255, 255])


@pytest.fixture
def full_device(tmp_path: Path) -> Path:
    """A private /dev/full (1, 7): every write fails with ENOSPC."""
    return private_device(tmp_path / "full", FULL_DEVICE)


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder of this process (where a device target's video is made first)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def frame_count(path: Path) -> int:
    capture = cv2.VideoCapture(str(path))
    decoded = 0
    while capture.read()[0]:
        decoded += 1
    capture.release()
    return decoded


def hidden_files(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if path.name.startswith(".")]


# -- A: the annotated video into a full device ---------------------------------------------------
def test_annotated_video_into_a_full_device_is_one_line(
    cli, tmp_path: Path, full_device: Path, private_tmp: Path
) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=4)
    result = cli("video", clip, "--max-frames", "3", "--annotated", full_device, "-q")
    line = assert_one_error(result, str(full_device), "cannot write (no space left on the device)")
    assert line == f"error: {full_device}: cannot write (no space left on the device)"  # count's words
    assert stat.S_ISCHR(os.stat(full_device).st_mode)  # still the device, not a file renamed onto it
    assert list(private_tmp.iterdir()) == []  # the video made first was removed


# -- B: OpenCV's writer stops at the file-size limit without a word ---------------------------------
@pytest.mark.slow
def test_video_cut_by_the_file_size_limit_keeps_the_old_one(tmp_path: Path) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=20)
    out = tmp_path / "annotated.avi"
    out.write_bytes(b"the previous video")
    rows = tmp_path / "rows.jsonl"
    before = snapshot(out)
    process = run_cli_process(
        "video", clip, "--annotated", out, "--jsonl", rows, "-q", preamble=file_size_limit(100_000)
    )
    assert_process_one_error(process, str(out), "cannot write (File too large)", "the previous file is unchanged")
    assert "written to" not in process.stdout + process.stderr
    assert_unchanged(before)
    assert len(rows.read_text().splitlines()) == 20  # the counts, under the limit, are whole
    assert hidden_files(tmp_path) == []  # the cut temporary video is gone


def test_a_video_holding_fewer_frames_than_written_is_not_put_in_place(tmp_path: Path) -> None:
    """What the limit leaves: a file whose header states fewer frames than the writer was given
    (0 for a cut AVI: its frame count is patched in last)."""
    target = tmp_path / "annotated.avi"
    temporary = make_video(tmp_path / ".annotated.avi.part.avi", n_frames=12)
    with pytest.raises(OutputError) as caught:
        video_module._finish_video(temporary, target, 30)
    assert str(caught.value) == (
        f"{target}: cannot write (the video writer stopped early: the file holds 12 of 30 frames); no file was created"
    )
    assert not target.exists() and not temporary.exists()
    # The same file, given as the 12 frames it holds, is put in place.
    temporary = make_video(tmp_path / ".annotated.avi.part.avi", n_frames=12)
    assert video_module._finish_video(temporary, target, 12) is True
    assert frame_count(target) == 12 and not temporary.exists()


def test_a_video_on_a_disk_that_filled_up_is_not_put_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that refuses to let the file grow refused the writer too: the old video stays."""
    target = tmp_path / "annotated.avi"
    target.write_bytes(b"the previous video")
    before = snapshot(target)
    temporary = make_video(tmp_path / ".annotated.avi.part.avi", n_frames=12)

    def no_space(*args: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(video_module.os, "pwrite", no_space)
    with pytest.raises(OutputError) as caught:
        video_module._finish_video(temporary, target, 12)
    assert str(caught.value) == f"{target}: cannot write (no space left on the device); the previous file is unchanged"
    assert_unchanged(before)
    assert not temporary.exists()


# -- C: Ctrl-C reports what was kept, and the frames are the rows kept ---------------------------
class _InterruptedOnFirstBatch:
    """The shipped model, whose first forward pass is cut by Ctrl-C (before any frame is counted)."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def count_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt


def test_ctrl_c_before_the_first_frame_says_the_files_are_unchanged(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.cli.video as video_command

    monkeypatch.setattr(video_command, "load_model_option", lambda path: _InterruptedOnFirstBatch(load_model(path)))
    clip = make_video(tmp_path / "clip.avi", n_frames=6)
    rows, annotated = tmp_path / "out.jsonl", tmp_path / "ann.avi"
    rows.write_text("old\n")
    annotated.write_text("oldvideo\n")
    before = snapshot(rows, annotated)
    result = cli("video", clip, "--jsonl", rows, "--annotated", annotated)
    assert result.exit_code == 130, result.output
    assert "Traceback" not in result.output
    assert "interrupted: 0 frames" in result.stderr
    assert "written to" not in result.output
    assert f"{rows} is unchanged" in result.stderr and f"{annotated} is unchanged" in result.stderr
    assert_unchanged(before)
    assert hidden_files(tmp_path) == []


def test_ctrl_c_right_after_a_row_is_written_counts_that_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT landing between a frame's row and the frame count: the count must include the row,
    and the video the frame (it said "interrupted: 0 frames" beside a file holding 1 row)."""
    written = video_module.RecordSink.write

    def write_then_interrupt(sink: Any, record: dict) -> None:
        written(sink, record)
        if sink.written == 2:
            signal.raise_signal(signal.SIGINT)  # delivered at the next instruction, here

    monkeypatch.setattr(video_module.RecordSink, "write", write_then_interrupt)
    clip = make_video(tmp_path / "clip.avi", n_frames=6)
    rows, annotated = tmp_path / "out.jsonl", tmp_path / "ann.avi"
    run = count_video(load_model(), str(clip), records_path=rows, output_video=annotated, batch_size=2)
    assert run.interrupted
    kept = [json.loads(line) for line in rows.read_text().splitlines()]
    assert run.frames == len(kept) == 2 and [row["frame"] for row in kept] == [0, 1]
    assert run.records_written and run.video_written
    assert frame_count(annotated) == 2


# -- D: the summary lines are diagnostics, never among the per-frame lines --------------------------
def test_per_frame_lines_alone_on_stdout(cli, tmp_path: Path) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=4)
    annotated = tmp_path / "ann.avi"
    result = cli("video", clip, "--max-frames", "3", "--annotated", annotated)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("frame ") for line in lines), result.stdout
    assert "done: 3 frames" in result.stderr and f"annotated video written to {annotated}" in result.stderr
    assert frame_count(annotated) == 3


# -- E: stdout that fails ------------------------------------------------------------------------
def _run_into(stdout_path: Path, *args: Any) -> subprocess.CompletedProcess:
    code = "import sys\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(stdout_path, "wb") as stdout:
        process = subprocess.run(  # noqa: PLW1510 - the caller checks the exit code
            [sys.executable, "-c", code, *map(str, args)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=240,
            env=environment,
            cwd=str(REPO_ROOT),
        )
    process.stdout = ""  # went to the device
    return process


@pytest.mark.slow
def test_stdout_on_a_full_device_is_one_line(tmp_path: Path, full_device: Path) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=4)
    process = _run_into(full_device, "video", clip, "--max-frames", "3")
    assert_process_one_error(process, "stdout: cannot write (no space left on the device)")
    assert "Exception ignored" not in process.stderr


@pytest.mark.slow
def test_stdout_failing_still_writes_the_files_asked_for(tmp_path: Path, full_device: Path) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=6)
    rows, annotated = tmp_path / "out.jsonl", tmp_path / "ann.avi"
    # --no-progress: the per-frame lines go to stdout beside the counts file (-q would drop them).
    process = _run_into(full_device, "video", clip, "--jsonl", rows, "--annotated", annotated, "--no-progress")
    assert process.returncode == 1, process.stderr
    assert "Traceback" not in process.stderr and "Exception ignored" not in process.stderr
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: stdout: cannot write (no space left on the device)"]  # count's words
    assert f"counts written to {rows}" in process.stderr and f"annotated video written to {annotated}" in process.stderr
    assert len(rows.read_text().splitlines()) == 6  # every frame, though no line reached stdout
    assert frame_count(annotated) == 6


@pytest.mark.slow
def test_a_closed_pipe_still_gets_the_files_written(tmp_path: Path) -> None:
    """`counting video ... | head -1`: the reader goes away; the files asked for are still whole and,
    as for any command whose pipe closed, nothing is said about it (exit 1)."""
    clip = make_video(tmp_path / "clip.avi", n_frames=6)
    rows, annotated = tmp_path / "out.jsonl", tmp_path / "ann.avi"
    read, write = os.pipe()
    os.close(read)  # closed before the first line: every write to stdout is EPIPE
    code = "import sys\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
    try:
        process = subprocess.run(  # noqa: PLW1510 - checked below
            [sys.executable, "-c", code, "video", str(clip), "--jsonl", str(rows), "--annotated", str(annotated)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=240,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            cwd=str(REPO_ROOT),
        )
    finally:
        os.close(write)
    assert process.returncode == 1, process.stderr
    assert "Traceback" not in process.stderr and "Exception ignored" not in process.stderr
    assert not [line for line in process.stderr.splitlines() if line.startswith("error:")], process.stderr
    assert len(rows.read_text().splitlines()) == 6
    assert frame_count(annotated) == 6


# -- F: the label fits a tall narrow picture ---------------------------------------------------
def _label_columns(picture: np.ndarray) -> np.ndarray:
    """Columns holding the label's yellow text."""
    return np.flatnonzero((np.abs(picture.astype(int) - YELLOW).sum(axis=2) < 60).any(axis=0))


@pytest.mark.parametrize(
    ("size", "text"),
    [
        ((1920, 240), "smoothed 26.8 [23-31]"),
        ((2880, 640), "count 6.0 [2-10]"),
        ((1920, 200), "smoothed 1234.5 [1200-1300]"),
    ],
)
def test_label_fits_a_tall_narrow_picture(size: tuple[int, int], text: str) -> None:
    height, width = size
    picture = np.full((height, width, 3), 200, dtype=np.uint8)
    annotate(picture, text)
    columns = _label_columns(picture)
    assert columns.size and columns.max() < width - 3  # the whole text, its padding after it
    assert columns.max() - columns.min() > width / 2  # shrunk to the width, not to a speck
    rows = np.flatnonzero((np.abs(picture.astype(int) - YELLOW).sum(axis=2) < 60).any(axis=1))
    assert rows.max() - rows.min() >= 7  # digits still legible


def test_label_size_unchanged_where_it_fits() -> None:
    assert label_scale("smoothed 26.8 [23-31]", 640, 480) == 1.0
    assert label_scale("count 6.0", 1280, 960) == 2.0
    assert label_scale("smoothed 26.8 [23-31]", 16, 16) == MIN_LABEL_SCALE  # too narrow for any legible label


def test_tall_video_gets_a_whole_label(cli, tmp_path: Path) -> None:
    clip = tmp_path / "tall.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (240, 1920))
    for _ in range(2):
        writer.write(np.full((1920, 240, 3), 128, dtype=np.uint8))
    writer.release()
    annotated = tmp_path / "ann.avi"
    result = cli("video", clip, "--annotated", annotated, "-q")
    assert result.exit_code == 0, result.output
    capture = cv2.VideoCapture(str(annotated))
    ok, picture = capture.read()
    capture.release()
    assert ok and picture.shape == (1920, 240, 3)
    top = picture[:120]
    columns = _label_columns(top)
    assert columns.size and columns.max() < 236 and columns.max() - columns.min() > 120
    assert abs(int(top[2, -3].mean()) - 128) < 20  # the frame, not the label's box, at the right edge
