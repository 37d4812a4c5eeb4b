#!/usr/bin/env python3
"""Train the shipped default model (models/default.npz) on real Mall frames and print its figures.

Train on frames 1-600, test on 601-800 of ../shared/data/mall-train (the frames present here),
with every setting from counting.core.defaults and a fixed seed, so a re-run gives the same model.
The ROI is not applied: the default model must count photos of any size, and the Mall ROI
covers 90 % of the frame with every annotated head inside it.

    python scripts/train_default_model.py            # extracts every frame afresh (reproducible)
    python scripts/train_default_model.py --cache-dir DIR   # reuse a feature cache (development)

A feature cache is only as good as its key: entries written by an older preprocessing with the
same settings would be reused silently, so the shipped model is built without one by default.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from counting.core import defaults
from counting.data import load_dataset
from counting.evaluate import evaluate_model, plot_loss
from counting.features import FeatureCache
from counting.train import TrainingConfig, train_model

REPO = Path(__file__).resolve().parents[1]
SPLIT = "train=1-600,test=601-800"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO.parent / "shared" / "data" / "mall-train")
    parser.add_argument("--out", type=Path, default=REPO / "models" / "default.npz")
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="feature cache folder (default: none, extract afresh)"
    )
    args = parser.parse_args()

    dataset = load_dataset("mall", args.root, split=SPLIT)
    config = TrainingConfig(use_roi=False, seed=defaults.SEED)
    cache = FeatureCache(args.cache_dir) if args.cache_dir else None
    started = time.perf_counter()
    model = train_model(dataset, config, cache=cache, progress=False, split=SPLIT)
    fit_seconds = time.perf_counter() - started
    result = evaluate_model(model, dataset.subset("test"), cache=cache, split=SPLIT)
    model.test_metrics = result.to_dict()
    model.dataset["trained_on"] = "Mall frames 1-600 (Chen et al. BMVC 2012), real frames from ../shared/data"
    path = model.save(args.out)
    plot_loss(model.history, path.with_name(f"{path.stem}.loss.png"), model.training.get("best_epoch"))

    print(f"default model: {path} ({path.stat().st_size / 1024:.0f} KB), trained in {fit_seconds:.1f} s")
    print(f"settings: {json.dumps(model.summary())}")
    print(f"train split, {model.validation_metrics['on']}: {json.dumps(model.validation_metrics)}")
    print(f"test frames 601-800 per frame: {json.dumps(result.metrics)}")
    print(f"test frames 601-800 smoothed ({result.smoothing_window} frames): {json.dumps(result.sequence_metrics)}")
    print(f"interval: {json.dumps(result.interval_metrics)}")


if __name__ == "__main__":
    main()
