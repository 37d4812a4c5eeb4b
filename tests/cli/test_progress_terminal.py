"""The progress bar shows on a terminal and never in a pipe, FORCE_COLOR or not: FORCE_COLOR asks
rich for colours, and rich then called a pipe a terminal, so the bar redrew itself into logs."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _features(frames: list[Path], out: Path, stderr: int, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "counting.cli.app", "features", *map(str, frames), "-o", str(out)]
    command += ["--input-size", "64", "--no-cache"]
    environ = {key: value for key, value in os.environ.items() if key not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    environ.update(env, PYTHONPATH=str(ROOT), COLUMNS="100")
    return subprocess.run(command, stdout=subprocess.DEVNULL, stderr=stderr, env=environ, timeout=300)


def test_the_bar_shows_on_a_terminal_and_not_in_a_coloured_pipe(mall_root: Path, tmp_path: Path) -> None:
    frames = sorted((mall_root / "frames").glob("seq_00000[1-3].jpg"))
    leader, follower = pty.openpty()
    try:
        done = _features(frames, tmp_path / "a.npy", follower)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the pty's other end closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0 and b"3/3" in shown and b"img/s" in shown
    piped = _features(frames, tmp_path / "b.npy", subprocess.PIPE, FORCE_COLOR="1")
    assert piped.returncode == 0 and b"img/s" not in piped.stderr and b"\x1b[?25l" not in piped.stderr
