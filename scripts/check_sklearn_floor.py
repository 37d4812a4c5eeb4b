"""Run tests/agp against the lowest NumPy, SciPy and scikit-learn that pyproject.toml allows.

The everyday environment has the newest releases, so nothing else exercises the lower bounds
pyproject.toml declares. This script makes a throwaway virtual environment in a temporary folder,
installs into it the lowest release of each of the three that pip can install here (from
``pip index versions``, wheels only) and that the declared range admits, plus what agp and its
tests need besides (threadpoolctl as declared, pytest), and runs tests/agp with the repository on
PYTHONPATH. Nothing outside the temporary folder changes; it is removed at the end.

    python3 scripts/check_sklearn_floor.py [PYTEST_ARGS...]

Exit status: pytest's, or 2 when the environment cannot be built (the reason on stderr).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parents[1]
# The packages whose lowest declared release is tested; the rest take pip's usual choice.
FLOOR_PACKAGES = ("numpy", "scipy", "scikit-learn")
# agp's other import, as pyproject.toml declares it, and the test runner.
OTHER_PACKAGES = ("threadpoolctl", "pytest", "pytest-timeout")


class FloorError(RuntimeError):
    """The throwaway environment could not be built."""


def declared_requirements() -> dict[str, Requirement]:
    """pyproject.toml's runtime dependencies by package name."""
    with open(REPO / "pyproject.toml", "rb") as file:
        project = tomllib.load(file)["project"]
    requirements = (Requirement(line) for line in project["dependencies"])
    return {requirement.name: requirement for requirement in requirements}


def available_versions(python: Path, name: str) -> list[Version]:
    """The releases of ``name`` that pip lists for this interpreter and platform."""
    result = subprocess.run(
        [str(python), "-m", "pip", "index", "versions", name], capture_output=True, text=True, check=False
    )
    for line in result.stdout.splitlines():
        if line.startswith("Available versions:"):
            versions = []
            for text in line.split(":", 1)[1].split(","):
                try:
                    versions.append(Version(text.strip()))
                except InvalidVersion:
                    continue  # a pre-PEP 440 release name: far below any floor we declare
            return versions
    raise FloorError(f"pip index versions {name} listed no versions: {result.stderr.strip() or result.stdout.strip()}")


def lowest_allowed(python: Path, requirement: Requirement) -> Version:
    """The lowest final release pip lists that the requirement's range admits."""
    allowed = [v for v in available_versions(python, requirement.name) if v in requirement.specifier]
    if not allowed:
        raise FloorError(f"no release of {requirement.name} matches {requirement.specifier}")
    return min(allowed)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    return subprocess.run(command, check=False, **kwargs)


def build_environment(folder: Path) -> Path:
    """A virtual environment under ``folder`` holding the floor releases; returns its python."""
    if run([sys.executable, "-m", "venv", str(folder / "venv")]).returncode != 0:
        raise FloorError("python3 -m venv failed (Debian: apt-get install python3-venv)")
    python = folder / "venv" / "bin" / "python"
    requirements = declared_requirements()
    pins = [f"{name}=={lowest_allowed(python, requirements[name])}" for name in FLOOR_PACKAGES]
    others = [str(requirements[name]) if name in requirements else name for name in OTHER_PACKAGES]
    # Wheels only: a floor release without a wheel for this Python would be built from source
    # (minutes, and a compiler); that is a floor nobody can install, so it should fail loudly.
    install = [str(python), "-m", "pip", "install", "-q", "--only-binary=:all:", *pins, *others]
    if run(install).returncode != 0:
        raise FloorError("pip could not install " + " ".join(pins))
    return python


def main(pytest_args: list[str]) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agp-sklearn-floor-") as folder:
        try:
            python = build_environment(Path(folder))
        except FloorError as error:
            print(f"check_sklearn_floor: {error}", file=sys.stderr)
            return 2
        versions = "import numpy, scipy, sklearn; print(numpy.__version__, scipy.__version__, sklearn.__version__)"
        installed = subprocess.run([str(python), "-c", versions], capture_output=True, text=True, check=False)
        print(f"numpy scipy scikit-learn: {installed.stdout.strip()}", file=sys.stderr)
        # The repository itself, not an installed copy: the tests import agp from the tree.
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        tests = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/agp", *pytest_args]
        status = run(tests, cwd=REPO, env=environment).returncode
    print(f"check_sklearn_floor: pytest exit {status} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return status


def pytest_arguments(argv: list[str]) -> list[str]:
    """``argv`` unchanged for pytest; ``-h`` / ``--help`` print this script's usage and exit (they
    would otherwise build the environment only to show pytest's help)."""
    parser = argparse.ArgumentParser(
        usage="%(prog)s [PYTEST_ARGS...]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.parse_known_args(argv)
    return argv


if __name__ == "__main__":
    sys.exit(main(pytest_arguments(sys.argv[1:])))
