#!/usr/bin/env python3
"""Live (causal) smoothing of per-frame counts: choose the filter inside Mall 1-600, report 601-800.

Protocol (issue 24). Nothing in the choice sees frames 601-800:

1. **Choice data**: out-of-fold predictions of Mall frames 1-600. Four contiguous blocks of 150
   frames; for each, a model with the shipped default's settings (`scripts/train_default_model.py`)
   is trained on the other three blocks and predicts the block. Each block is filtered as its own
   video (the filter restarts), since a block's predictions come from one model.
2. **Candidates**: causal filters, output at frame t from frames <= t only: the trailing mean
   (what `counting video --smooth N` was), the exponential mean and Brown's linear exponential
   filter (`counting.apply.smoothing.CausalSmoother`), each with spans 2-15 frames, plus no filter.
3. **Rule**: the lowest out-of-fold MAE wins (family and span together).
4. **Report**: the shipped `models/default.npz` (trained on 1-600) on frames 601-800, raw and
   with the chosen filter; for reference the old trailing 5-frame mean and the offline centred
   5-frame mean (`counting evaluate` / `report`), which needs future frames. Frames 601-800 are
   not unseen data: earlier sessions scored many models on them (docs/density.md), though no
   smoothing choice here uses them.
5. **Interval of the smoothed count**: the model's calibrated 90 % interval evaluated at the
   smoothed count (what `counting video` writes as smoothed_low / smoothed_high). Its coverage is
   measured on 601-800 and, cross-validated, on the out-of-fold predictions (each block's
   interval calibrated on the other three blocks' raw residuals).

`--video` also runs `counting video`'s own code (`count_video`) on frames 601-800 written as a
25 fps MJPG file, so the figures include the video decode (MJPG changes pixels slightly).

    python scripts/smoothing_study.py [--root ../shared/data/mall-train] [--cache-dir DIR] [--video]

Descriptors come from the feature cache ($COUNTING_CACHE_DIR or ~/.cache/counting); the first
run computes 800 frames' descriptors (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from counting.apply import StreamingSmoother, causal_label, causal_smooth, smooth_counts
from counting.core import crowd_metrics, defaults
from counting.data import load_dataset
from counting.features import FeatureCache
from counting.heads import ConformalInterval
from counting.model import load_model
from counting.train import TrainingConfig, train_model

REPO = Path(__file__).resolve().parents[1]
BLOCK = 150  # frames per out-of-fold block of 1-600
SPANS = (2, 3, 4, 5, 6, 7, 9, 11, 15)


def trailing_mean(counts: np.ndarray, span: int) -> np.ndarray:
    smoother = StreamingSmoother(span)
    return np.array([smoother.update(value) for value in counts])


def exponential_mean(counts: np.ndarray, span: int) -> np.ndarray:
    alpha, state, out = 2.0 / (span + 1.0), float(counts[0]), np.empty(len(counts))
    for t, value in enumerate(counts):
        state = alpha * value + (1.0 - alpha) * state
        out[t] = state
    return out


FAMILIES: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "trailing mean": trailing_mean,
    "exponential mean": exponential_mean,
    "linear exponential": causal_smooth,
}


def out_of_fold(root: Path, cache: FeatureCache) -> tuple[np.ndarray, np.ndarray]:
    """(true, predicted) counts of frames 1-600, each block predicted by a model not trained on it."""
    truth, predicted = np.zeros(600), np.zeros(600)
    for start in range(1, 601, BLOCK):
        end = start + BLOCK - 1
        rest = [f"{a}-{b}" for a, b in ((1, start - 1), (end + 1, 600)) if a <= b]
        split = f"train={'+'.join(rest)},test={start}-{end}"
        dataset = load_dataset("mall", root, split=split)
        config = TrainingConfig(use_roi=False, seed=defaults.SEED, calibration="none")
        model = train_model(dataset, config, cache=cache, progress=False, split=split)
        test = dataset.subset("test")
        result = model.count_paths([sample.path for sample in test.samples], cache=cache)
        truth[start - 1 : end] = test.counts
        predicted[start - 1 : end] = result.counts
    return truth, predicted


def by_block(smooth: Callable[[np.ndarray], np.ndarray], counts: np.ndarray) -> np.ndarray:
    return np.concatenate([smooth(counts[k : k + BLOCK]) for k in range(0, len(counts), BLOCK)])


def figures(truth: np.ndarray, predicted: np.ndarray) -> str:
    m = crowd_metrics(truth, predicted)
    return f"MAE {m['mae']:.3f}  MSE {m['mse']:6.2f}  RMSE {m['rmse']:.3f}"


def coverage(truth: np.ndarray, low: np.ndarray, high: np.ndarray) -> str:
    inside = (truth >= low) & (truth <= high)
    return f"coverage {inside.mean():.1%}, mean width {np.mean(high - low):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO.parent / "shared" / "data" / "mall-train")
    parser.add_argument("--model", type=Path, default=REPO / "models" / "default.npz")
    parser.add_argument("--cache-dir", type=Path, default=None, help="feature cache (default: the usual one)")
    parser.add_argument("--video", action="store_true", help="also run count_video on frames 601-800 as MJPG")
    args = parser.parse_args()
    cache = FeatureCache(args.cache_dir)
    started = time.perf_counter()

    # 1-3: the choice, on out-of-fold predictions of 1-600 only.
    oof_truth, oof_pred = out_of_fold(args.root, cache)
    print(
        f"choice data: out-of-fold predictions of Mall 1-600 (4 blocks of {BLOCK}), per frame: "
        f"{figures(oof_truth, oof_pred)}"
    )
    scores: dict[tuple[str, int], float] = {("none", 1): crowd_metrics(oof_truth, oof_pred)["mae"]}
    print(f"{'filter':22s} " + " ".join(f"{span:>6d}" for span in SPANS) + "   (out-of-fold MAE by span)")
    for family, smooth in FAMILIES.items():
        row = []
        for span in SPANS:
            mae = crowd_metrics(oof_truth, by_block(lambda c, s=smooth, n=span: s(c, n), oof_pred))["mae"]
            scores[(family, span)] = mae
            row.append(mae)
        print(f"{family:22s} " + " ".join(f"{value:6.3f}" for value in row))
    family, span = min(scores, key=scores.get)
    print(
        f"chosen: {family}, span {span} (out-of-fold MAE {scores[(family, span)]:.3f}, "
        f"no filter {scores[('none', 1)]:.3f})"
    )
    if family != "linear exponential":
        print("note: counting video implements the linear exponential filter; update CausalSmoother to match")

    # 4: the shipped model on 601-800, once per row.
    model = load_model(args.model)
    test = load_dataset("mall", args.root, split="train=1-600,test=601-800").subset("test")
    result = model.count_paths([sample.path for sample in test.samples], cache=cache)
    truth, raw = np.asarray(test.counts, float), result.counts
    chosen = FAMILIES[family](raw, span) if family != "none" else raw
    print(f"\n{args.model.name} on Mall 601-800 (trained on 1-600; 601-800 used by earlier model choices):")
    print(f"  {'per frame':64s} {figures(truth, raw)}")
    print(f"  {causal_label(span) + ' (chosen, live)':64s} {figures(truth, chosen)}")
    print(f"  {'trailing 5-frame mean (old --smooth 5, live)':64s} {figures(truth, trailing_mean(raw, 5))}")
    print(f"  {'centred 5-frame mean (offline only)':64s} {figures(truth, smooth_counts(raw, 5))}")

    # 5: the smoothed count's interval.
    if model.interval is not None:
        low, high = model.intervals(raw)
        print(f"  90 % interval, per frame: {coverage(truth, low, high)}")
        low, high = model.intervals(chosen)
        outside = np.mean((chosen < low) | (chosen > high))
        print(
            f"  90 % interval of the smoothed count (model's interval at it): {coverage(truth, low, high)}; "
            f"smoothed count outside it: {outside:.1%}"
        )
        smoothed_oof = by_block(lambda c: FAMILIES[family](c, span), oof_pred)
        inside, widths = [], []
        for start in range(0, 600, BLOCK):
            rest = np.r_[0:start, start + BLOCK : 600]
            interval = ConformalInterval.fit(
                oof_truth[rest], oof_pred[rest], model.interval.level, model.interval.scale
            )
            low, high = interval.interval(smoothed_oof[start : start + BLOCK])
            inside.append((oof_truth[start : start + BLOCK] >= low) & (oof_truth[start : start + BLOCK] <= high))
            widths.append(high - low)
        by_fold = ", ".join(f"{np.mean(block):.0%}" for block in inside)
        print(
            f"  the same, cross-validated on out-of-fold 1-600: coverage {np.mean(inside):.1%} "
            f"(blocks {by_fold}), mean width {np.mean(widths):.2f}"
        )

    if args.video:
        video_check(model, test, truth, span)
    print(f"\n{time.perf_counter() - started:.0f} s")


def video_check(model, test, truth: np.ndarray, span: int) -> None:
    """`count_video` on frames 601-800 as a 25 fps MJPG file, with --smooth ``span``."""
    import cv2

    from counting.apply import count_video, overlay_label

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mall-601-800.avi"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (640, 480))
        for sample in test.samples:
            writer.write(cv2.imread(str(sample.path)))
        writer.release()
        runs = {n: count_video(model, str(path), smooth_window=n, keep_records=True) for n in (1, span)}
    rows = runs[span].records
    raw = np.array([row["count"] for row in rows])
    smoothed = np.array([row["smoothed"] for row in rows])
    print(f"\ncount_video on 601-800 as MJPG (decoded frames), --smooth {span}:")
    print(f"  {'per frame':64s} {figures(truth, raw)}")
    print(f"  {causal_label(span):64s} {figures(truth, smoothed)}")
    print(f"  {'trailing 5-frame mean of the same counts':64s} {figures(truth, trailing_mean(raw, 5))}")
    if "smoothed_low" in rows[0]:
        low = np.array([row["smoothed_low"] for row in rows])
        high = np.array([row["smoothed_high"] for row in rows])
        print(f"  smoothed count's interval: {coverage(truth, low, high)}")
        raw_low, raw_high = np.array([row["low"] for row in rows]), np.array([row["high"] for row in rows])
        print(f"  per-frame interval: {coverage(truth, raw_low, raw_high)}")
        for name, values in ((f"span-{span} filter", smoothed), ("old trailing 5-frame mean", trailing_mean(raw, 5))):
            old = np.sum((values < raw_low) | (values > raw_high))
            print(
                f"  the old overlay (smoothed count beside the raw interval) with the {name}: count outside the "
                f"interval on {old} of {len(rows)} frames"
            )
    drawn = [overlay_label(row) for row in rows]
    parsed = [re.fullmatch(r"\w+ (-?[\d.]+) \[(\d+)-(\d+)\]", text) for text in drawn]
    outside = sum(not float(m[2]) <= float(m[1]) <= float(m[3]) for m in parsed if m)
    print(f"  overlay, e.g. {drawn[0]!r}: drawn count outside its drawn interval on {outside} of {len(drawn)} frames")


if __name__ == "__main__":
    main()
