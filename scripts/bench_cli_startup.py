"""Wall time of `counting --version`, `counting --help` and one command's --help, each in a fresh
interpreter (median of a few rounds): the command line's start-up cost.

    python scripts/bench_cli_startup.py [--rounds 5]
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
    rounds = parser.parse_args().rounds
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for arguments in (["--version"], ["--help"], ["count", "--help"]):
        times = [wall(arguments) for _ in range(rounds)]
        print(f"counting {' '.join(arguments):14s} median {statistics.median(times):.2f} s (min {min(times):.2f} s)")


if __name__ == "__main__":
    main()
