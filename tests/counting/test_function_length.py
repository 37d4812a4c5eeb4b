"""No function in counting/ is over 100 lines, def line to last line, its signature included
(issue 50: the commands, the video loop and the training functions were split by meaning)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "counting"
MOST_LINES = 100


def long_functions(root: Path, most: int = MOST_LINES) -> list[str]:
    """``file:line name (N lines)`` of every function under ``root`` longer than ``most`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > most:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_counting_is_over_100_lines() -> None:
    assert long_functions(PACKAGE) == []


def test_the_measure_sees_a_long_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{k} = {k}" for k in range(100))
    (package / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions(package) == ["pkg/long.py:1 long (101 lines)"]
