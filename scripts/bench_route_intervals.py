"""The crowd model's 90 % intervals per route against one interval for all, on each validation part.

    export COUNTING_CACHE_DIR=/work/cache-crowd
    python scripts/bench_route_intervals.py --data ../shared/data [-m models/crowd.npz]

Counts each set's fixed validation part (counting.data.read_crowd, the crowd model never trained
on it) as `counting count` does, then prints, per part, how many pictures took each route (a
specialist's set, ``general``, ``detector``, ``detector-none``: CountingModel.interval_routes) and the share of true
counts inside the intervals with their mean width: the model's own (each route's interval,
docs/density.md, "Intervals per route") beside the model's interval for every picture (its
``by_route`` left out). The counts are the same in both. Prints the load.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from counting.data import read_crowd
from counting.features import FeatureCache
from counting.model import CountingModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("-m", "--model", default="models/crowd.npz")
    args = parser.parse_args()
    model = CountingModel.load(args.model)
    if model.interval is None or not model.interval.by_route:
        parser.error(f"{args.model}: the model has no per-route intervals")
    whole = replace(model, interval=replace(model.interval, by_route={}))
    cache = FeatureCache()
    validation = read_crowd(args.data).subset("test")
    sources = validation.source_names()
    print(
        f"{args.model}: routes with intervals of their own: {', '.join(model.interval.by_route)}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'set':<16}{'n':>5}{'MAE':>8}  {'one interval':>22}  {'per route':>22}  routes")
    for name in dict.fromkeys(sources):
        members = [sample for sample, source in zip(validation.samples, sources, strict=True) if source == name]
        paths = [str(sample.path) for sample in members]
        truth = np.array([float(sample.count) for sample in members])
        result = model.count_paths(paths, cache=cache, batch_size=4)
        probes, _, _ = model.probe_paths(paths, cache=cache)
        counted = None if result.counted_by is None else [None if by == "density" else by for by in result.counted_by]
        routes = model.interval_routes(probes, counted, result.counts)
        low, high = whole.intervals(result.counts)
        taken = ", ".join(f"{route} {count}" for route, count in zip(*np.unique(routes, return_counts=True)))
        print(
            f"{name:<16}{len(truth):>5}{np.mean(np.abs(result.counts - truth)):>8.2f}  "
            f"{_figures(truth, low, high):>22}  {_figures(truth, result.low, result.high):>22}  {taken}"
        )


def _figures(truth: np.ndarray, low: np.ndarray, high: np.ndarray) -> str:
    inside = np.mean((truth >= low) & (truth <= high))
    return f"{100 * inside:5.1f} % / width {np.mean(high - low):6.1f}"


if __name__ == "__main__":
    main()
