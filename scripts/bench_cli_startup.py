"""Wall time of `counting --version`, `counting --help` and each command's --help, each in a fresh
interpreter (median of a few rounds): the command line's start-up cost, which is also what a
refused option or a missing file costs before the command says so.

    python scripts/bench_cli_startup.py [--rounds 5] [--commands count serve ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from counting.cli import COMMANDS  # noqa: E402  (the checkout's, not an installed copy's)
from counting.features import cpu_description  # noqa: E402


def wall(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "counting.cli.app", *arguments],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commands", nargs="*", default=list(COMMANDS), help="commands whose --help to time")
    options = parser.parse_args()
    print(f"CPU: {cpu_description()}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    runs = [["--version"], ["--help"], *([name, "--help"] for name in options.commands)]
    for arguments in runs:
        times = [wall(arguments) for _ in range(options.rounds)]
        print(f"counting {' '.join(arguments):20s} median {statistics.median(times):.2f} s (min {min(times):.2f} s)")
    print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
