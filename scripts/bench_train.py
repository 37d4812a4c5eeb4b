"""Wall time of training on a 400-photo folder: `counting train` with the conv density head, and
the crowd route on the same photos.

    python scripts/bench_train.py --root ../shared/data/shanghaitech-B-train            # both
    python scripts/bench_train.py --root ../shared/data/shanghaitech-B-train --only crowd

Each run starts from an empty feature cache (a temporary folder), so the time includes the
feature maps, as a user's first `train` does. `cli`: the command line's conv route (four heads of
1500 steps, the AGP on their out-of-fold sums) at the crowd model's input size; `crowd`:
counting.train.crowd on the same photos (one head, balanced crops; the route of models/crowd.npz).
Prints each time and peak RSS (`cli`: the child's VmHWM, scripts/peak_rss.py; `crowd`: this
process's) with the CPU and the load before and after (a shared machine's times are upper bounds
of the idle figures). The maps are read back from disk (counting.heads.density.map_store), so the
peak does not grow with the photos.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from counting.features import cpu_description


def run_cli(root: Path, input_size: int, folder: Path) -> tuple[float, float | None]:
    from peak_rss import run_counting

    command = [
        "train",
        "-d",
        "shanghaitech",
        "-r",
        str(root),
        "--split",
        "random:0.25:0",
        "--input-size",
        str(input_size),
        "--grid",
        "2x2",
        "--density-head",
        "--head-kind",
        "conv",
        "--cache-dir",
        str(folder / "cache"),
        "-o",
        str(folder / "cli.npz"),
    ]
    done, seconds, peak = run_counting(command, folder / "peak.txt")
    if done.returncode != 0:
        raise SystemExit(f"counting train failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return seconds, peak


def run_crowd(root: Path, input_size: int, folder: Path) -> tuple[float, float | None]:
    # The crowd reader's dataset type over one folder: every photo is one set's.
    from counting.data import CrowdDataset, read_shanghaitech
    from counting.features import FeatureCache
    from counting.train import CrowdSettings, train_crowd_model

    plain = read_shanghaitech(root, split="random:0.25:0")
    dataset = CrowdDataset(**{**vars(plain), "sources": {str(s.path): "folder" for s in plain.samples}})
    started = time.perf_counter()
    model = train_crowd_model(
        dataset, replace(CrowdSettings(), input_size=input_size), cache=FeatureCache(folder / "cache")
    )
    model.save(folder / "crowd.npz")
    # This process's own peak (it ran nothing else of size before): VmHWM, as peak_rss.py reads it.
    with open("/proc/self/status") as status:
        peak = next(line for line in status if line.startswith("VmHWM"))
    return time.perf_counter() - started, int(peak.split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("../shared/data/shanghaitech-B-train"))
    parser.add_argument("--input-size", type=int, default=576)
    parser.add_argument("--only", choices=("cli", "crowd"), default=None)
    args = parser.parse_args()
    print(f"CPU: {cpu_description()}; load before {os.getloadavg()[0]:.2f}", flush=True)
    for name, runner in (("cli", run_cli), ("crowd", run_crowd)):
        if args.only not in (None, name):
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-train-{name}-") as folder:
            seconds, peak = runner(args.root.resolve(), args.input_size, Path(folder))
        memory = "" if peak is None else f", peak RSS {peak:.0f} MB"
        print(f"{name}: {seconds / 60:.1f} min{memory} (load after {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
