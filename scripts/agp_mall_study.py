#!/usr/bin/env python3
"""The AGP's kernels and mean functions on real Mall descriptors: validation and test MAE side by side.

    COUNTING_CACHE_DIR=/work/cache python scripts/agp_mall_study.py            # ~3 min on 2 cores
    python scripts/agp_mall_study.py --seeds 3 --kernels center,univariate       # quicker

Protocol (issue 5): frames 1-600 train, 601-800 test.  Every choice is made on the training
frames only: the *validation* column trains on frames 1-450 and scores frames 451-600 (a
temporal hold-out, like the test); the *test* column trains on 1-600 and scores 601-800.  Each
AGP cell is the mean over ``--seeds`` seeds (centers and the estimator's own validation rows
vary), with the per-seed spread.  Reference rows: ridge regression (RidgeCV, standardised
inputs) on all training rows, and the AGP's linear mean function alone (the same ridge fitted
on the estimator's non-validation rows), which shows what the AGP adds on top of it.

Features: efficientnet-lite0 ImageNet class scores of whole frames (``--input-size`` short side,
Mall ROI mask unless ``--no-roi``), read from the shared feature cache.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from agp import AGPRegressor, metrics
from agp.mean import RIDGE_ALPHAS

REPO = Path(__file__).resolve().parents[1]
SPLIT = "train=1-600,test=601-800"
VALIDATION_FROM = 451  # frames 451-600 score the models trained on frames 1-450
KERNELS = ("center", "univariate", "diagonal", "lowrank")
MEANS = ("constant", "linear")


def mall_features(root: Path, input_size: int | None, use_roi: bool, cache_dir: Path | None):
    """(X, counts, frame numbers) for the 800 Mall frames, from the feature cache when present."""
    from counting.data import load_dataset
    from counting.features import FeatureCache, Preprocessing, extract_features, get_backbone

    dataset = load_dataset("mall", root, split=SPLIT)
    prep = Preprocessing(input_size, roi_mask=dataset.roi_mask if use_roi else None)
    cache = FeatureCache(cache_dir) if cache_dir else FeatureCache()
    features = extract_features(dataset.paths, get_backbone("efficientnet-lite0"), prep, cache=cache, progress=False)
    frames = np.array([sample.index for sample in dataset.samples])
    return features.features.astype(np.float64), np.asarray(dataset.counts, dtype=np.float64), frames


def linear_mean_prediction(model: AGPRegressor, X: np.ndarray) -> np.ndarray:
    """The fitted AGP's mean function alone (no kernel part)."""
    return ((X - model.x_mean_) / model.x_scale_) @ model.mean_coef_[:, 0] + model.y_mean_[0]


def evaluate(X, y, train, test, kernel: str, mean: str, seeds: int, **params) -> dict:
    errors, mean_only, seconds = [], [], []
    for seed in range(seeds):
        started = time.perf_counter()
        model = AGPRegressor(kernel=kernel, mean=mean, random_state=seed, **params).fit(X[train], y[train])
        seconds.append(time.perf_counter() - started)
        errors.append(metrics.mae(y[test], model.predict(X[test])))
        mean_only.append(metrics.mae(y[test], linear_mean_prediction(model, X[test])))
    return {"mae": np.array(errors), "mean_only": np.array(mean_only), "fit": float(np.median(seconds))}


def ridge(X, y, train, test) -> dict:
    started = time.perf_counter()
    with threadpool_limits(limits=1):  # as AGPRegressor.fit: BLAS threads only slow a shared 2-core machine
        model = make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS)).fit(X[train], y[train])
    seconds = time.perf_counter() - started
    return {"mae": np.array([metrics.mae(y[test], model.predict(X[test]))]), "fit": seconds}


def cell(result: dict, key: str = "mae") -> str:
    values = result[key]
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{values.mean():.2f} ({values.min():.2f}-{values.max():.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO.parent / "shared" / "data" / "mall-train")
    parser.add_argument("--cache-dir", type=Path, default=None, help="feature cache (default $COUNTING_CACHE_DIR)")
    parser.add_argument("--input-size", type=int, default=224, help="short side in px (0 = native 640x480)")
    parser.add_argument("--no-roi", action="store_true", help="do not apply the Mall ROI mask")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--n-centers", type=int, default=25)
    parser.add_argument("--center-method", default="kmeans")
    args = parser.parse_args()

    X, y, frames = mall_features(args.root, args.input_size or None, not args.no_roi, args.cache_dir)
    protocols = {
        "validation": (frames < VALIDATION_FROM, (frames >= VALIDATION_FROM) & (frames <= 600)),
        "test": (frames <= 600, frames > 600),
    }
    load = os.getloadavg()
    print(
        f"Mall, efficientnet-lite0 {args.input_size or 'native'} px, ROI {'off' if args.no_roi else 'on'}; "
        f"validation: train 1-{VALIDATION_FROM - 1} / score {VALIDATION_FROM}-600; test: train 1-600 / score 601-800"
    )
    print(
        f"AGP: {args.n_centers} centers ({args.center_method}), 100 validation rows, {args.epochs} epochs, other "
        f"parameters default; MAE mean (min-max) over "
        f"seeds 0-{args.seeds - 1}; fit s = median, test protocol; load average {load[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print()
    print("| model | mean | validation MAE | test MAE | fit s |")
    print("|---|---|---|---|---|")
    settings = {"max_epochs": args.epochs, "n_centers": args.n_centers, "center_method": args.center_method}
    for kernel in args.kernels.split(","):
        for mean in MEANS:
            results = {
                name: evaluate(X, y, train, test, kernel, mean, args.seeds, **settings)
                for name, (train, test) in protocols.items()
            }
            print(
                f"| AGP {kernel} | {mean} | {cell(results['validation'])} | {cell(results['test'])} "
                f"| {results['test']['fit']:.2f} |",
                flush=True,
            )
            if mean == "linear" and kernel == "center":
                # The mean function does not depend on the kernel: report it once.
                mean_only = (cell(results["validation"], "mean_only"), cell(results["test"], "mean_only"))
    references = {name: ridge(X, y, train, test) for name, (train, test) in protocols.items()}
    if "center" in args.kernels.split(","):
        print(f"| its linear mean alone (ridge, 100 rows fewer) | – | {mean_only[0]} | {mean_only[1]} | – |")
    print(
        f"| ridge (RidgeCV, all training rows) | – | {cell(references['validation'])} | {cell(references['test'])} "
        f"| {references['test']['fit']:.2f} |"
    )


if __name__ == "__main__":
    main()
