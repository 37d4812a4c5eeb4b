"""`counting video` sources that give no frame (a folder, a pipe, a file that decodes to nothing) are
one line, and an existing counts file is kept."""

from __future__ import annotations

import os
from pathlib import Path

from robust_helpers import assert_one_error, assert_unchanged, snapshot


def test_a_video_source_that_is_a_folder_or_a_pipe_says_so(cli, tmp_path: Path) -> None:

    folder = tmp_path / "clip.avi"
    folder.mkdir()
    assert_one_error(cli("video", folder, "--no-progress"), "is a folder, not a video file")
    pipe = tmp_path / "pipe.avi"
    os.mkfifo(pipe)
    assert_one_error(cli("video", pipe, "--no-progress"), "not a regular file")


def test_video_that_gives_no_frame_is_an_error_and_keeps_the_counts_file(cli, tmp_path: Path) -> None:
    fake = tmp_path / "clip.avi"
    fake.write_text("not a video\n")
    counts = tmp_path / "counts.csv"
    counts.write_text("precious\n")
    before = snapshot(counts)
    result = cli("video", fake, "--csv", counts, "--quiet")
    assert result.exit_code == 1, result.output
    assert "clip.avi" in result.stderr and "Traceback" not in result.output
    assert_unchanged(before)
