"""Every script in scripts/ and scripts/studies/ still starts, so that a module moved or renamed in
counting/ breaks a test, not the next person who runs a benchmark or a study.

Starting a script (``--help``) resolves the imports at its top and parses its arguments; most
scripts import counting inside their functions (so that ``--help`` stays quick), which ``--help``
never reaches, so every name a script imports from ``counting`` or ``agp`` is also resolved here,
wherever the import sits. scripts/README.md gives each script a line.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*(ROOT / "scripts").glob("*.py"), *(ROOT / "scripts" / "studies").glob("*.py")])


def _name(script: Path) -> str:
    return str(script.relative_to(ROOT))


def _is_program(script: Path) -> bool:
    """A script run as a program; the others (peak_rss.py) are modules that programs import."""
    return '__name__ == "__main__"' in script.read_text(encoding="utf-8")


def _start(script: Path) -> subprocess.CompletedProcess[str]:
    # As the docs run them: `python scripts/NAME.py` from the repository, this checkout on the path.
    return subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def started(request: pytest.FixtureRequest) -> dict[Path, subprocess.CompletedProcess[str]]:
    """The ``--help`` of each script this run selected (``-k`` leaves the others alone), one
    interpreter per script (an import one script made cannot hide one another misses), as many at
    once as there are cores: each spends seconds importing."""
    selected = [
        item.callspec.params["script"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_every_script_starts" and item.path == Path(__file__)
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip(selected, pool.map(_start, selected)))


def test_the_scripts_are_found() -> None:
    names = [_name(script) for script in SCRIPTS]
    assert len(names) > 40
    assert "scripts/bench_video.py" in names
    assert "scripts/studies/router_regions_study.py" in names


@pytest.mark.slow  # about 50 interpreters, each importing numpy, torch or scikit-learn
@pytest.mark.parametrize("script", SCRIPTS, ids=_name)
def test_every_script_starts(script: Path, started: dict[Path, subprocess.CompletedProcess[str]]) -> None:
    done = started[script]
    assert done.returncode == 0, done.stderr[-2000:]
    if _is_program(script):
        # Its usage, and nothing run: a script without options still answers --help.
        assert done.stdout.startswith("usage:"), done.stdout[:500]
    else:
        assert done.stdout == ""


def imported_names(source: str) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` of every import of ``counting`` or ``agp`` in ``source``, inside
    functions too (``name`` None for ``import module``)."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in ("counting", "agp"):
                found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name, None)
                for alias in node.names
                if alias.name.split(".")[0] in ("counting", "agp")
            ]
    return found


def unresolved(module: str, name: str | None) -> str | None:
    """Why ``from module import name`` (or ``import module``) would fail, or None."""
    try:
        imported = importlib.import_module(module)
    except ImportError as error:
        return f"{module}: {error}"
    if name is None or hasattr(imported, name):  # hasattr runs a surface's lazy import
        return None
    try:
        importlib.import_module(f"{module}.{name}")  # a submodule
    except ImportError:
        return f"{module} has no {name}"
    return None


def test_imported_names_are_found_wherever_the_import_sits() -> None:
    source = "import counting.core\ndef main():\n    from counting.heads import fit_sparse_gate, ConvDensityHead\n"
    assert imported_names(source) == [
        (1, "counting.core", None),
        (3, "counting.heads", "fit_sparse_gate"),
        (3, "counting.heads", "ConvDensityHead"),
    ]
    assert unresolved("counting.heads", "fit_sparse_gate") is None
    assert unresolved("counting.heads", "no_such_name") == "counting.heads has no no_such_name"
    assert unresolved("counting.heads.sparse_gate", None).startswith("counting.heads.sparse_gate: No module")


def test_every_name_a_script_imports_exists() -> None:
    problems = [
        f"{_name(script)}:{line}: {problem}"
        for script in SCRIPTS
        for line, module, name in imported_names(script.read_text(encoding="utf-8"))
        if (problem := unresolved(module, name))
    ]
    assert problems == []


def test_the_scripts_readme_gives_every_script_a_line() -> None:
    readme = (ROOT / "scripts" / "README.md").read_text(encoding="utf-8")
    missing = [_name(script) for script in SCRIPTS if f"`{script.relative_to(ROOT / 'scripts')}`" not in readme]
    assert missing == []
