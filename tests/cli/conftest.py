"""Fixtures of the CLI tests: one small model trained through `counting train` for the session.

Small on purpose (Mall frames 1-100 train, 101-120 test, 112-pixel input, few centres and epochs):
the tests check the commands end to end, not the accuracy (scripts/ measure that).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest
from typer.testing import CliRunner

from counting.cli.app import app

SPLIT = "train=1-100,test=101-120"
INPUT_SIZE = "112"


@pytest.fixture(autouse=True)
def _session_feature_cache(session_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that use $COUNTING_CACHE_DIR get the session's own cache, never a shared one."""
    monkeypatch.setenv("COUNTING_CACHE_DIR", str(session_cache_dir))


@pytest.fixture(scope="session")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="session")
def mall_split() -> str:
    return SPLIT


@pytest.fixture(scope="session")
def trained(
    tmp_path_factory: pytest.TempPathFactory, mall_root: Path, session_cache_dir: Path, runner: CliRunner
) -> tuple[Path, str]:
    """(model path, the train command's output)."""
    out = tmp_path_factory.mktemp("model") / "mall-small.npz"
    result = runner.invoke(
        app,
        [
            "train",
            "--dataset",
            "mall",
            "--root",
            str(mall_root),
            "--split",
            SPLIT,
            "--out",
            str(out),
            "--input-size",
            INPUT_SIZE,
            "--centers",
            "8",
            "--epochs",
            "4",
            "--cache-dir",
            str(session_cache_dir),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.fixture(scope="session")
def short_video(tmp_path_factory: pytest.TempPathFactory, mall_root: Path) -> Path:
    """12 real Mall frames as a 640x480 25 fps MJPG video."""
    path = tmp_path_factory.mktemp("video") / "mall.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (640, 480))
    for frame in sorted((mall_root / "frames").glob("*.jpg"))[:12]:
        writer.write(cv2.imread(str(frame)))
    writer.release()
    return path


def _one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture(scope="session")
def one_error_line():
    """Checks a failed command printed exactly one error line, no traceback, exit 1; returns it."""
    return _one_error_line
