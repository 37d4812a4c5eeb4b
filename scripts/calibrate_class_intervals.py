"""Recalibrate a per-class model's intervals per class group (its counts unchanged); print coverage.

    export COUNTING_CACHE_DIR=/work/cache OPENBLAS_NUM_THREADS=1
    python scripts/calibrate_class_intervals.py                    # models/voc20.npz in place
    python scripts/calibrate_class_intervals.py -m voc.npz -o voc-new.npz --out-of-fold oof.csv

The model's train images are read again (descriptors from the feature cache), the AGP refitted
once per fold as `counting train` did (the recorded out-of-fold mRMSE must come out again), and
the interval calibrated per group of classes on the out-of-fold photo-class pairs with objects
(counting.heads.uncertainty.fit_class_group_interval). Printed per group: the coverage of those
pairs out of fold (the calibration pairs themselves; and cross-validated: each fifth of the photos
covered by an interval calibrated on the other four fifths), of all pairs, and of the pairs with
objects counted by the model itself (its train photos). `--out-of-fold` writes the out-of-fold
counts (image, true_CLASS ..., out_of_fold_CLASS ...; default tests/fixtures/voc20_out_of_fold.csv, which
tests/robustness/test_interval_coverage.py reads). The model file is replaced only once written
whole.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from counting.core import CountingError, check_outputs
from counting.data import load_dataset
from counting.features import FeatureCache
from counting.heads import fit_class_group_interval, group_coverage
from counting.model import load_model
from counting.train import out_of_fold_counts, recalibrate_class_intervals

ROOT = Path(__file__).resolve().parents[1]
FOLDS = 5  # the cross-validated coverage's folds over the photos


def cross_validated_coverage(truth: np.ndarray, predicted: np.ndarray, groups: np.ndarray, level: float) -> dict:
    """Coverage of the pairs with objects per group, each fifth of the photos covered by the
    interval calibrated on the others (the coverage a new photo's pairs would get)."""
    inside = np.zeros(truth.shape, dtype=bool)
    parts = np.array_split(np.random.default_rng(0).permutation(len(truth)), FOLDS)
    for part in parts:
        rest = np.setdiff1d(np.arange(len(truth)), part)
        interval = fit_class_group_interval(truth[rest], predicted[rest], level=level, groups=groups)
        low, high = interval.interval(predicted[part])
        inside[part] = (truth[part] >= low) & (truth[part] <= high)
    return {int(g): float(inside[:, groups == g][truth[:, groups == g] > 0].mean()) for g in np.unique(groups)}


def write_out_of_fold(path: Path, names: list[str], classes: list[str], found) -> None:
    """One row per image: ``image``, ``true_CLASS`` for each class, then ``out_of_fold_CLASS``."""
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image"] + [f"true_{c}" for c in classes] + [f"out_of_fold_{c}" for c in classes])
        for row, name in enumerate(names):
            counts = [f"{value:.6g}" for value in found.predicted[row]]
            writer.writerow([name] + [int(value) for value in found.truth[row]] + counts)
    partial.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", type=Path, default=ROOT / "models" / "voc20.npz")
    parser.add_argument("-o", "--output", type=Path, help="model file to write (default: the model, replaced)")
    parser.add_argument("--root", type=Path, help="the dataset's folder (default: the one the model records)")
    parser.add_argument("--out-of-fold", type=Path, default=ROOT / "tests" / "fixtures" / "voc20_out_of_fold.csv")
    parser.add_argument("--cache-dir", type=Path, help="feature cache (default $COUNTING_CACHE_DIR)")
    args = parser.parse_args()
    output = args.output or args.model
    try:
        check_outputs([args.out_of_fold], inputs=[args.model])
        model = load_model(args.model)
        recorded = model.dataset or {}
        data = load_dataset(recorded["name"], args.root or recorded["root"], split=recorded["split"])
        cache = FeatureCache(args.cache_dir) if args.cache_dir else FeatureCache()
        found = out_of_fold_counts(model, data, cache=cache, log=lambda line: print(line, file=sys.stderr))
        calibrated = recalibrate_class_intervals(model, found)
        calibrated.save(output)
        write_out_of_fold(args.out_of_fold, found.names, list(model.class_names), found)
    except (CountingError, KeyError) as error:
        raise SystemExit(f"error: {error}") from None
    interval, groups = calibrated.interval, np.asarray(calibrated.interval.class_groups)
    level = interval.level
    print(f"{output}: {found.where}; level {level:g}, scale {interval.scale}")
    crossed = cross_validated_coverage(found.truth, found.predicted, groups, level)
    out = group_coverage(interval, found.truth, found.predicted, groups)
    train = group_coverage(interval, found.truth, found.in_sample, groups)
    old = group_coverage(model.interval, found.truth, found.predicted, groups)
    print(f"{'group':<7}{'classes':<58}{'q':>6}{'pairs':>7}{'oof':>7}{'oof-cv':>8}{'all':>7}{'train':>7}{'before':>8}")
    for group in sorted(out):
        names = ", ".join(name for name, g in zip(model.class_names, groups, strict=True) if g == group)
        q = float(np.asarray(interval.quantile)[groups == group][0])
        print(
            f"{group:<7}{names:<58.58}{q:>6.2f}{out[group]['pairs']:>7}{out[group]['coverage']:>7.3f}"
            f"{crossed[group]:>8.3f}{out[group]['coverage_all']:>7.3f}{train[group]['coverage']:>7.3f}"
            f"{old[group]['coverage']:>8.3f}"
        )
    held = found.truth > 0
    low, high = interval.interval(found.predicted)
    print(
        f"all pairs with objects: out of fold {np.mean(((found.truth >= low) & (found.truth <= high))[held]):.3f} "
        f"({held.sum()} pairs), mean width there {np.mean((high - low)[held]):.2f}"
    )
    for name, counted in (("before", model.interval), ("after", interval)):
        low, high = counted.interval(found.in_sample)
        narrow = int(((high - low) < 0.2)[found.in_sample >= 0.5].sum())
        print(f"{name}: the train photos' counts >= 0.5 with an interval narrower than 0.2: {narrow}")


if __name__ == "__main__":
    main()
