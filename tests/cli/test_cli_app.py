"""The app: commands registered, --help readable at every level, --version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from counting import __version__
from counting.cli.app import app


def test_root_help_lists_every_command(runner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("train", "evaluate", "report", "count", "video", "features", "compare"):
        assert f" {command} " in result.output
    assert "asymmetric-kernel" in result.output


def test_no_arguments_shows_help(runner) -> None:
    result = runner.invoke(app, [])
    assert "Usage" in result.output and "train" in result.output


@pytest.mark.parametrize(
    ("command", "phrases"),
    [
        ("train", ["--dataset", "--root", "--out", "--grid", "--centers", "--kernel", "loss curve"]),
        ("evaluate", ["--model", "--json", "MAE", "mRMSE", "smoothing"]),
        ("report", ["--out", "Markdown", "published"]),
        ("count", ["--csv", "--json", "glob", "skipped"]),
        ("video", ["--stride", "--smooth", "--annotated", "webcam", "Ctrl-C"]),
    ],
)
def test_command_help_reads_well(runner, command: str, phrases: list[str]) -> None:
    result = runner.invoke(app, [command, "--help"], terminal_width=160)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for phrase in phrases:
        assert phrase in text, phrase


def test_version(runner) -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"counting {__version__}"


def test_main_entry_point_prints_one_line_for_user_errors(tmp_path, capsys, monkeypatch) -> None:
    from counting.cli.app import main

    missing = tmp_path / "missing.npz"
    # A picture to count (its pictures are found before the model loads; an empty folder is said first).
    Image.new("RGB", (64, 48)).save(tmp_path / "a.png")
    monkeypatch.setattr("sys.argv", ["counting", "count", "--model", str(missing), str(tmp_path)])
    with pytest.raises(SystemExit) as caught:
        main()
    assert caught.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{missing}: model file not found" in " ".join(err.split())


@pytest.mark.parametrize("columns", ["0", "²"])
def test_a_columns_value_rich_cannot_use_is_ignored(tmp_path, columns: str) -> None:
    # rich read COLUMNS=0 as a width of 0 and printed nothing, not even the error line (exit 1
    # in silence), and failed to start at all on a digit like "²" (a traceback for every command).
    env = dict(os.environ, COLUMNS=columns, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run(
        [sys.executable, "-m", "counting.cli.app", "count", str(tmp_path / "absent.jpg")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and "absent.jpg: no such file or folder" in done.stderr
