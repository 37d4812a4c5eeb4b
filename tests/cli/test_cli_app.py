"""The app: commands registered, --help readable at every level, --version."""

from __future__ import annotations

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
