"""Issue 21's acceptance figure: `counting count` with no --model on 50 coco-voc20 photos.

    python scripts/bench_crowd_acceptance.py --data ../shared/data [--n 50]

The photos are the first N (by COCO id) of the crowd model's coco-voc20 validation part
(counting.data.datasets.crowd: a seeded random quarter, photos with a person crowd box left out),
so the default model never trained on them. Runs the command line itself (`counting count PHOTOS
--csv FILE`, no --model) and compares its counts and 90 % intervals with the person boxes:
prints MAE, RMSE, the share of true counts inside the intervals, and the command's wall time.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from counting.data import read_crowd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    coco = read_crowd(args.data, sets=("coco-voc20",)).subset("test")
    chosen = sorted(coco.samples, key=lambda sample: sample.path.name)[: args.n]
    truth = {str(sample.path): sample.count for sample in chosen}
    command = shutil.which("counting") or "counting"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "counts.csv"
        started = time.perf_counter()
        subprocess.run(
            [command, "count", *truth, "--csv", str(out), "--quiet", "--no-progress"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - started
        with out.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    true = np.array([truth[row["image"]] for row in rows])
    counted = np.array([float(row["count"]) for row in rows])
    low = np.array([float(row["low"]) for row in rows])
    high = np.array([float(row["high"]) for row in rows])
    print(f"`counting count` (no --model) on {len(rows)} coco-voc20 validation photos ({true.sum():.0f} people)")
    print(f"MAE {np.mean(np.abs(counted - true)):.3f}  RMSE {np.sqrt(np.mean((counted - true) ** 2)):.3f}")
    print(f"true count inside the 90 % interval: {np.mean((true >= low) & (true <= high)) * 100:.1f} %")
    print(f"mean interval width {np.mean(high - low):.2f}; wall time {seconds:.1f} s (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
