"""Scripts use the package's public surfaces: each stage's ``__init__`` names what scripts and
users need (``__all__``), imported lazily (counting/core/lazy.py)."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SURFACES = (
    "counting",
    "counting.core",
    "counting.data",
    "counting.features",
    "counting.heads",
    "counting.model",
    "counting.train",
    "counting.apply",
    "counting.evaluate",
    "counting.cli",
)


def public_names(surface: str) -> set[str]:
    return set(importlib.import_module(surface).__all__)


def surface_violations(source: str, where: str = "<source>") -> list[str]:
    """Imports of ``counting`` that go below a surface or name what the surface does not export,
    and private names of ``agp`` or ``counting``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "counting" and alias.name not in SURFACES:
                    found.append(f"{where}:{node.lineno}: import {alias.name} (below a package surface)")
                if top in ("counting", "agp") and any(part.startswith("_") for part in alias.name.split(".")):
                    found.append(f"{where}:{node.lineno}: import {alias.name} (private module)")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top not in ("counting", "agp"):
                continue
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"{where}:{node.lineno}: from {node.module} (private module)")
            for alias in node.names:
                if alias.name.startswith("_") and alias.name != "__version__":
                    found.append(f"{where}:{node.lineno}: {node.module}.{alias.name} (private name)")
            if top != "counting":
                continue
            if node.module not in SURFACES:
                found.append(f"{where}:{node.lineno}: from {node.module} (below a package surface)")
                continue
            for alias in node.names:
                if alias.name not in public_names(node.module):
                    found.append(f"{where}:{node.lineno}: {node.module}.{alias.name} (not in its __all__)")
    return found


def test_scripts_import_only_the_public_surfaces() -> None:
    scripts = sorted((REPO / "scripts").rglob("*.py"))  # scripts/studies/ too
    assert len(scripts) > 20
    found = [v for path in scripts for v in surface_violations(path.read_text(), str(path.relative_to(REPO)))]
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from counting.heads.density.conv.fitting import fit_conv_heads", "below a package surface"),
        ("import counting.features.backbones.runtime", "below a package surface"),
        ("def f():\n    from counting.heads import fit_conv_heads, not_exported\n", "not in its __all__"),
        ("from counting.core.lazy import lazy_exports", "below a package surface"),
        ("from agp.estimator import _private_helper", "private name"),
        ("from counting._hidden import x", "private module"),
    ],
)
def test_the_check_finds_each_kind_of_violation(source: str, expected: str) -> None:
    found = surface_violations(source)
    assert len(found) >= 1 and expected in found[0], found


def test_the_check_accepts_the_surfaces() -> None:
    source = (
        "import counting\nfrom counting import count, __version__\nfrom counting.heads import fit_conv_heads\n"
        "from counting.core import defaults\nfrom agp import AGPRegressor\nfrom agp.solve import factor_system\n"
    )
    assert surface_violations(source) == []


@pytest.mark.parametrize("surface", SURFACES)
def test_every_exported_name_resolves_and_all_is_sorted(surface: str) -> None:
    module = importlib.import_module(surface)
    names = list(module.__all__)
    assert names == sorted(names) and len(set(names)) == len(names)
    for name in names:
        value = getattr(module, name)
        assert value is not None, f"{surface}.{name}"
        if surface != "counting":
            assert name in dir(module)


def test_exports_are_the_defining_objects_renamed_or_modules() -> None:
    import counting.core
    import counting.evaluate
    import counting.heads
    from counting.core import defaults
    from counting.evaluate.comparison import study
    from counting.heads.density.conv import training as conv_training

    assert counting.heads.DEFAULT_CONV_SETTINGS is conv_training.DEFAULT_SETTINGS
    assert counting.heads.CORRECTION_WEIGHT == conv_training.CORRECTION_WEIGHT == 0.5
    assert counting.evaluate.select_candidate is study.select
    assert isinstance(counting.core.defaults, types.ModuleType) and counting.core.defaults is defaults
    with pytest.raises(AttributeError, match="counting.heads.*no_such_name"):
        counting.heads.no_such_name  # noqa: B018 - the lookup is what is tested


def test_importing_a_surface_or_a_light_module_loads_no_heavy_library() -> None:
    # The surfaces name torch-backed objects (fit_conv_heads, extract_features) but import them on
    # first use: `import counting.features.tiles` ran counting/features/__init__.py, which pulled
    # torch in through extract.py before the surfaces were lazy.
    code = (
        "import sys\n"
        "import counting.core, counting.data, counting.features, counting.heads, counting.model\n"
        "import counting.train, counting.apply, counting.evaluate, counting.cli\n"
        "import counting.features.tiles\n"
        "print(sorted(m for m in ('torch', 'sklearn', 'distributed', 'cv2') if m in sys.modules))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == "[]"


def test_a_name_exported_twice_is_refused_when_the_surface_is_declared() -> None:
    from counting.core.lazy import lazy_exports

    with pytest.raises(ValueError, match="counting.fake: load_dataset exported twice"):
        lazy_exports("counting.fake", {".datasets": "load_dataset", ".other": "x load_dataset=y"})
    _, _, names = lazy_exports("counting.fake", {".a": "one two=three", ".b": "b"})
    assert names == ["b", "one", "two"]


def test_every_module_has_its_line_in_the_architecture_page() -> None:
    """docs/architecture.md names every module of counting/ (one line per module, issue 25)."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "architecture.md").read_text()
    modules = sorted((root / "counting").rglob("*.py"))
    missing = [str(path.relative_to(root)) for path in modules if path.name != "__init__.py" and path.name not in page]
    assert missing == []
