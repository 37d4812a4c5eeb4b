"""Peak memory (max RSS) of the CLI on the hostile inputs of issue 9, one process per input.

    PYTHONPATH=. python scripts/robustness_peak_memory.py

Prints one row per case: exit code, peak RSS in MB, and the error line. The bound is 2 GB for
any single input; the script exits 1 if a case goes over it or ends in a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
LIMIT_MB = 2048


def header_png(path: Path, width: int, height: int) -> Path:
    Image.new("L", (1, 1)).save(path)
    data = bytearray(path.read_bytes())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)
    path.write_bytes(bytes(data))
    return path


def mutated_model(folder: Path, name: str, change) -> Path:
    with np.load(REPO / "models" / "default.npz") as archive:
        arrays = {key: archive[key] for key in archive.files}
    document = json.loads(str(arrays.pop("metadata")))
    change(document["user_metadata"])
    path = folder / name
    with open(path, "wb") as handle:
        np.savez(handle, metadata=np.array(json.dumps(document)), **arrays)
    return path


_CHILD = """
import atexit, os, resource, sys
def _report():
    with open(os.environ["PEAK_RSS_FILE"], "w") as handle:
        handle.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
atexit.register(_report)
from counting.cli import main
sys.argv[0] = "counting"
main()
"""


def run(args: list[str], folder: Path) -> tuple[int, float, str]:
    """(exit code, peak RSS of that process in MB, last stderr line)."""
    report = folder / "peak.txt"
    report.unlink(missing_ok=True)
    process = subprocess.run(  # noqa: PLW1510 - the exit code is the result
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO), "PEAK_RSS_FILE": str(report)},
    )
    peak = int(report.read_text()) / 1024 if report.exists() else float("nan")  # ru_maxrss: kB
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    if "Traceback" in process.stderr + process.stdout:
        return process.returncode, peak, "TRACEBACK: " + (lines[-1] if lines else "")
    return (
        process.returncode,
        peak,
        lines[-1] if lines else process.stdout.strip().splitlines()[-1],
    )


def main() -> int:
    # No options: --help says what the script does and runs nothing.
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    folder = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        return measure_every_case(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the pictures and model copies (about 14 MB) are not left in /tmp


def measure_every_case(folder: Path) -> int:
    """Run each hostile case in ``folder``; print its row; 1 when one breaks the bound or a traceback."""
    thin = folder / "thin.png"
    Image.new("RGB", (1, 5000)).save(thin)
    big = folder / "big.png"
    Image.new("RGB", (2600, 2600), (30, 60, 90)).save(big)
    edge = folder / "edge.png"  # just inside the 2048^2 bound: decoded and run through the network
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (2040, 2040, 3), dtype=np.uint8)).save(edge)
    features = folder / "features.npy"
    np.save(features, np.zeros((2, 1000)))
    cases = {
        "1x5000 PNG": ["count", str(thin)],
        "60000x60000 header": ["count", str(header_png(folder / "bomb.png", 60_000, 60_000))],
        "9600x9500 header (91 Mpx)": ["count", str(header_png(folder / "large.png", 9_600, 9_500))],
        "2600x2600 at native size": ["features", str(big), "--native-size", "--no-cache", "--no-progress"],
        "model input_size 100000": [
            "count", "--features", str(features), "--model",
            str(mutated_model(folder, "size.npz", lambda m: m["preprocessing"].update(input_size=100_000))),
        ],
        "model ROI mask 100000^2": [
            "count", "--features", str(features), "--model",
            str(mutated_model(folder, "roi.npz", lambda m: m["preprocessing"].update(
                roi_mask={"shape": [100_000, 100_000], "first": True, "runs": [10**10]}))),
        ],
        "features /dev/zero": ["features", "/dev/zero", "--no-progress"],
        "2040x2040 at native size (ok)": ["features", str(edge), "--native-size", "--no-cache", "--no-progress"],
    }  # fmt: skip
    worst = 0.0
    failed = False
    print(f"{'case':<30} {'exit':>4} {'peak MB':>8}  message")
    for name, args in cases.items():
        code, peak, message = run(args, folder)
        worst = max(worst, peak)
        failed |= message.startswith("TRACEBACK") or peak > LIMIT_MB
        print(f"{name:<30} {code:>4} {peak:>8.0f}  {message[:110]}")
    print(f"largest peak RSS over all cases: {worst:.0f} MB (limit {LIMIT_MB} MB)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
