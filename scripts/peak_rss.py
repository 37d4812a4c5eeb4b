"""The memory benchmarks' child process: `counting ARGS` in a fresh interpreter that reports its
own peak RSS (VmHWM from /proc/self/status, written at exit to $PEAK_RSS_FILE; not ru_maxrss,
which a forked child inherits from its parent). Used by bench_memory.py and bench_memory_inputs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# $BENCH_CHUNK, when set, replaces `counting count`'s chunk size (bench_memory_inputs.py).
CHILD = """
import atexit, os, sys
if os.environ.get("BENCH_CHUNK"):
    import counting.apply.chunks
    counting.apply.chunks.COUNT_CHUNK = int(os.environ["BENCH_CHUNK"])
def _report():
    with open("/proc/self/status") as status:
        peak = next(line for line in status if line.startswith("VmHWM"))
    with open(os.environ["PEAK_RSS_FILE"], "w") as handle:
        handle.write(peak.split()[1])
atexit.register(_report)
from counting.cli import main
sys.argv[0] = "counting"
main()
"""


def run_counting(
    args: list[str], report: Path, environment: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float, float | None]:
    """``(finished process, wall seconds, peak RSS in MB or None when no report was written)``
    of ``counting ARGS`` run with ``environment`` (default: this one) and this checkout first
    on the path."""
    report.unlink(missing_ok=True)
    env = dict(os.environ if environment is None else environment, PYTHONPATH=str(REPO), PEAK_RSS_FILE=str(report))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True)  # noqa: PLW1510
    seconds = time.perf_counter() - started
    peak = int(report.read_text()) / 1024 if report.exists() else None
    return done, seconds, peak
