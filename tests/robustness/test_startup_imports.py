"""`counting --help`, `--version` and each command's help start fast: no heavy library is imported, and
a mistyped input is refused before the heavy imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from robust_helpers import (
    REPO_ROOT,
)


# -- `counting --help` / `--version` start fast ---------------------------------------------------
def _heavy_after_each(runs: list[list[str]], heavy: tuple[str, ...]) -> tuple[list[list[str]], str]:
    """Runs ``counting ARGS`` for each of ``runs`` in one fresh interpreter: the libraries of
    ``heavy`` imported after each run (a module once imported stays), and stdout."""
    code = (
        "import json, sys\n"
        "from counting.cli.app import main\n"
        f"for arguments in {runs!r}:\n"
        "    sys.argv = ['counting', *arguments]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        f"    print('heavy:', json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)\n"
    )
    process = subprocess.run(  # noqa: PLW1510 - checked below
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    )
    assert process.returncode == 0, process.stderr
    found = [
        json.loads(line.removeprefix("heavy: ")) for line in process.stderr.splitlines() if line.startswith("heavy: ")
    ]
    assert len(found) == len(runs), process.stderr[-2000:]
    return found, process.stdout


@pytest.mark.parametrize("argument", ["--help", "--version"])
def test_top_level_help_and_version_import_no_heavy_library(argument: str) -> None:
    # Was: every command module imported up front, with torch, scikit-learn and Dask (~4-6 s on
    # a busy 2-core machine; 0.3-0.5 s now, scripts/bench_cli_startup.py).
    found, stdout = _heavy_after_each([[argument]], ("torch", "sklearn", "distributed", "cv2", "scipy"))
    assert found == [[]]
    assert ("counting count" in stdout and "compare" in stdout) if argument == "--help" else True


def test_each_commands_help_imports_no_heavy_library() -> None:
    # Was: `counting count --help` (or a refused option, or serve's missing config) took 6-7 s:
    # the command modules imported the model, the training pipeline and Dask before typer parsed
    # anything (about 1 s now, scripts/bench_cli_startup.py). OpenCV is allowed: `features`
    # reads images with it.
    from counting.cli.app import COMMANDS

    found, _ = _heavy_after_each([[name, "--help"] for name in COMMANDS], ("torch", "sklearn", "distributed", "scipy"))
    assert dict(zip(COMMANDS, found)) == {name: [] for name in COMMANDS}


def test_a_mistyped_picture_config_or_method_is_refused_before_the_heavy_imports(tmp_path: Path) -> None:
    # Was: 6-10 s of imports and the model's load before "no such file or folder".
    runs = [
        ["count", str(tmp_path / "nope.jpg")],
        ["serve", str(tmp_path / "absent.toml")],
        ["compare", "-d", "mall", "-r", str(tmp_path), "--methods", "ridge,nonsense"],
        ["features", str(tmp_path / "a.jpg"), "-o", str(tmp_path / "descriptors.txt")],
    ]
    found, _ = _heavy_after_each(runs, ("torch", "sklearn", "distributed", "scipy", "onnxruntime"))
    assert found == [[], [], [], []]


def test_every_command_still_runs_and_shows_its_help(cli) -> None:
    for name in ("train", "evaluate", "report", "count", "video", "features", "compare"):
        result = cli(name, "--help")
        assert result.exit_code == 0 and "Usage:" in result.stdout and "--help" in result.stdout, name
