"""Give a model's zero-width interval routes a high end measured on its validation parts.

    export COUNTING_CACHE_DIR=/work/cache-crowd OPENBLAS_NUM_THREADS=1
    python scripts/calibrate_zero_floor.py                  # models/crowd.npz in place, coco-voc20
    python scripts/calibrate_zero_floor.py -m crowd.npz -o crowd-floor.npz --sets coco-voc20 mall

The crowd model's ``detector-none`` route (a photo the sparse gate sent to the detector, which
found no one) was calibrated with a quantile of 0: more than 90 % of its calibration photos held
no one, so every such photo got ``0 [0-0]``, a certainty no model has. This script counts the
validation part of each set in ``--sets`` (pictures the model never trained on) with the model,
keeps those counted 0 on a zero-width route, and sets that route's ``min_high`` to the level
conformal quantile of their true counts (counting.heads.uncertainty.miss_floor): the high end with
which those photos are covered at the interval's level. The train parts are counted
too and their figure printed beside it (in-sample: the gate was fitted on them). Counts are
unchanged; what was measured goes into the model's ``training.zero_interval_floor``. The model
file is replaced only once written whole.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from counting.core import CountingError
from counting.data import read_crowd
from counting.features import FeatureCache
from counting.heads import miss_floor
from counting.model import load_model

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python scripts/calibrate_zero_floor.py"


def zero_width_routes(interval) -> list[str]:
    """Routes (``""``: the model's own interval) whose quantile is 0: a count of 0 gets ``[0, 0]``."""
    found = [""] if not np.any(np.asarray(interval.quantile) > 0) else []
    return found + [name for name, route in interval.by_route.items() if not np.any(np.asarray(route.quantile) > 0)]


def without_floor(interval):
    """``interval`` with no ``min_high``, on itself or on any route."""
    routes = {name: replace(route, min_high=0.0) for name, route in interval.by_route.items()}
    return replace(interval, min_high=0.0, by_route=routes)


def counted_zero(model, paths: list[str], cache) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, zero_width)``: each picture's count, and whether its interval is ``[0, 0]``."""
    result = model.count_paths(paths, cache=cache)
    if not result.ok.all():
        raise SystemExit(f"error: {next(iter(result.errors.items()))}")
    return result.counts, (result.counts == 0) & (result.high <= 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", type=Path, default=ROOT / "models" / "crowd.npz")
    parser.add_argument("-o", "--output", type=Path, help="model file to write (default: the model, replaced)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--sets", nargs="+", default=["coco-voc20"], help="crowd sets whose validation parts measure")
    parser.add_argument("--cache-dir", type=Path, help="feature cache (default $COUNTING_CACHE_DIR)")
    args = parser.parse_args()
    try:
        model = load_model(args.model)
        routes = zero_width_routes(model.interval) if model.interval is not None else []  # the quantile, not min_high
        if not routes:
            print(f"{args.model}: no interval route with a zero quantile; nothing to do")
            return
        # Measured without any floor already set: running the script again measures the same.
        measuring = replace(model, interval=without_floor(model.interval))
        data = read_crowd(args.data, sets=tuple(args.sets))
        cache = FeatureCache(args.cache_dir) if args.cache_dir else FeatureCache()
        parts = {}
        for part in ("test", "train"):
            samples = data.subset(part).samples
            truth = np.array([float(sample.count) for sample in samples])
            counts, zero = counted_zero(measuring, [str(sample.path) for sample in samples], cache)
            parts[part] = (truth, zero)
            missed = truth[zero] > 0
            print(
                f"{'validation' if part == 'test' else 'train'} part ({', '.join(args.sets)}): {len(truth)} pictures, "
                f"{int(zero.sum())} counted 0 [0-0], {int(missed.sum())} of them hold people "
                f"(true counts {sorted(truth[zero][missed].astype(int).tolist())})",
                file=sys.stderr,
            )
    except CountingError as error:
        raise SystemExit(f"error: {error}") from None
    level = model.interval.level
    truth, zero = parts["test"]
    floor = miss_floor(truth[zero], level)
    covered = {part: float(np.mean(values[chosen] <= floor)) for part, (values, chosen) in parts.items()}
    before = {part: float(np.mean(values[chosen] <= 0)) for part, (values, chosen) in parts.items()}
    record = {
        "min_high": floor,
        "routes": routes or ["(the model's own)"],
        "measured_on": f"validation parts of {', '.join(args.sets)} (never trained on): the pictures counted 0 [0-0]",
        "pictures_counted_zero": int(zero.sum()),
        "holding_people": int((truth[zero] > 0).sum()),
        "their_true_counts": sorted(truth[zero][truth[zero] > 0].astype(int).tolist()),
        "covered": {"validation": round(covered["test"], 4), "train (in-sample)": round(covered["train"], 4)},
        "covered_before": {"validation": round(before["test"], 4), "train (in-sample)": round(before["train"], 4)},
        "command": COMMAND + (f" --sets {' '.join(args.sets)}" if args.sets != ["coco-voc20"] else ""),
    }
    interval = model.interval
    if "" in routes:
        interval = replace(interval, min_high=floor)
    interval = replace(
        interval,
        by_route={
            name: replace(route, min_high=floor) if name in routes else route
            for name, route in interval.by_route.items()
        },
    )
    floored = replace(model, interval=interval, training=dict(model.training) | {"zero_interval_floor": record})
    output = args.output or args.model
    floored.save(output)
    print(f"{output}: routes {', '.join(record['routes'])} get a high end of at least {floor:g}")
    for part in ("test", "train"):
        name = "validation" if part == "test" else "train (in-sample)"
        print(f"  {name}: pictures counted 0 inside [0, {floor:g}]: {covered[part]:.3f} ([0, 0]: {before[part]:.3f})")


if __name__ == "__main__":
    main()
