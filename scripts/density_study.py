"""Density-head study: choices on a validation block inside the train range, the test range once.

Mall: train frames 1-600 (head fitted on 1-450, validated on 451-600), test 601-800.
ShanghaiTech B: its 400 train images split random:0.25:0 (300 train incl. a random quarter for
validation, 100 test). For each input size, layer set and head kind it prints validation MAE/MSE
of the head's count alone and of the AGP on the head's region sums (trained on out-of-fold sums),
then refits the validated choice on the whole train range and prints its test figures once,
with frames/s of map extraction + head (measured now, under whatever load the machine has).

    python scripts/density_study.py --dataset mall
    python scripts/density_study.py --dataset shanghaitech
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from counting.core import crowd_metrics
from counting.data import cv_folds, load_dataset
from counting.features import FeatureCache, Preprocessing, get_backbone
from counting.heads import (
    COUNT_WEIGHTS,
    TargetSettings,
    density_targets,
    extract_maps,
    fit_density_head,
    layer_channels,
)
from counting.train import agp_counts

SHARED = Path(os.environ.get("COUNTING_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SETUPS = {
    "mall": {
        "root": "mall-train",
        "split": "train=1-600,test=601-800",
        "sizes": [224, 320, None],
        "validation": lambda indices, seed: indices > 450,
        "sequence": True,
    },
    "shanghaitech": {
        "root": "shanghaitech-B-train",
        "split": "random:0.25:0",
        "sizes": [384, 512, None],
        "validation": lambda indices, seed: np.isin(
            np.arange(len(indices)), np.random.default_rng(seed).choice(len(indices), len(indices) // 4, replace=False)
        ),
        "sequence": False,
    },
}
LAYER_SETS = ["block10", "block7,block10", "block4,block7,block10", "block4,block7,block10,block14"]
ALL_LAYERS = ["block4", "block7", "block10", "block14"]


def metrics(truth: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(MAE, MSE) of counts, as every figure of the package is scored (core.metrics)."""
    figures = crowd_metrics(truth, predicted)
    return figures["mae"], figures["mse"]


def folds_of(indices: np.ndarray, sequence: bool, seed: int) -> np.ndarray:
    # Mall: runs of 50 frames per fold, so a frame's near-copies are rarely in another fold.
    folds = cv_folds(indices, 5, sequence, seed, 50 if sequence else None)
    labels = np.zeros(len(indices), dtype=int)
    for number, members in enumerate(folds):
        labels[members] = number
    return labels


def evaluate(maps, targets, counts, layer_index, fit, score, folds, kind, roi, grid, seed, n_random, count_weights):
    """Fit on ``fit`` positions, score head and AGP on ``score`` positions."""
    chosen = np.concatenate([layer_index[name] for name in layer_index["__order__"]])
    picked = [maps[i][chosen] for i in fit]
    result = fit_density_head(
        picked,
        [targets[i] for i in fit],
        counts[fit],
        layer_index["__order__"],
        roi_mask=roi,
        grid=grid,
        folds=folds,
        kind=kind,
        n_random=n_random,
        seed=seed,
        count_weights=count_weights,
    )
    scored = np.stack([maps[i][chosen] for i in score])
    regions = result.head.region_counts(scored, roi, grid)
    head_count = np.clip(regions[:, 0], 0.0, None)
    agp = agp_counts(result.out_of_fold, counts[fit], regions, seed)
    return result, head_count, agp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SETUPS), default="mall")
    parser.add_argument("--sizes", nargs="*", help="input sizes to try (native = full resolution)")
    parser.add_argument("--layer-sets", nargs="*", default=LAYER_SETS)
    parser.add_argument("--kinds", nargs="*", default=["ridge", "rff"])
    parser.add_argument("--grid", default="2x2", help="cells whose density sums join the AGP descriptor ('none')")
    parser.add_argument("--sigma", type=float, default=4.0)
    parser.add_argument("--perspective", action="store_true", help="Mall: scale sigma with pMapN")
    parser.add_argument("--n-random", type=int, default=1024)
    parser.add_argument(
        "--count-weights",
        default="auto",
        help="weight of the region-count term: 'auto' (chosen with the penalty on out-of-fold counts "
        f"among {', '.join(f'{w:g}' for w in COUNT_WEIGHTS)}) or one number (0: pixel loss only)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write every figure here too")
    args = parser.parse_args()

    setup = SETUPS[args.dataset]
    dataset = load_dataset(args.dataset, SHARED / setup["root"], split=setup["split"])
    train, test = dataset.subset("train"), dataset.subset("test")
    train_indices = train.indices
    validation = setup["validation"](train_indices, args.seed)
    fit_part, val_part = np.flatnonzero(~validation), np.flatnonzero(validation)
    sizes = setup["sizes"] if not args.sizes else [None if s == "native" else int(s) for s in args.sizes]
    grid = None if args.grid == "none" else tuple(int(v) for v in args.grid.split("x"))
    roi = dataset.roi_mask
    target_settings = TargetSettings(sigma=args.sigma, perspective=args.perspective)
    count_weights = COUNT_WEIGHTS if args.count_weights == "auto" else (float(args.count_weights),)
    backbone = get_backbone("efficientnet-lite0")
    cache = FeatureCache()
    print(f"{args.dataset}: {len(train)} train ({len(fit_part)} fit / {len(val_part)} validation), {len(test)} test")
    print(
        f"targets: {target_settings.record()}, count weights {args.count_weights}, AGP grid {args.grid}, "
        f"runtime {backbone.runtime}, load {os.getloadavg()[0]:.1f}"
    )
    rows: list[dict] = []
    best: dict | None = None
    for size in sizes:
        prep = Preprocessing(input_size=size, roi_mask=roi)
        train_maps = extract_maps(train.paths, backbone, prep, ALL_LAYERS, cache=cache, progress=True).maps
        widths = np.cumsum([0] + [layer_channels(backbone, name) for name in ALL_LAYERS])
        channels = {name: np.arange(widths[k], widths[k + 1]) for k, name in enumerate(ALL_LAYERS)}
        sizes_hw = [item.shape[1:] for item in train_maps]
        targets = density_targets(train.samples, sizes_hw, target_settings, dataset.perspective_map, str(dataset.root))
        counts = train.counts
        folds = folds_of(train_indices[fit_part], setup["sequence"], args.seed)
        label = "native" if size is None else str(size)
        for kind in args.kinds:
            for layer_set in args.layer_sets:
                names = layer_set.split(",")
                index = {name: channels[name] for name in names} | {"__order__": names}
                start = time.perf_counter()
                fit, head, agp = evaluate(
                    train_maps,
                    targets,
                    counts,
                    index,
                    fit_part,
                    val_part,
                    folds,
                    kind,
                    roi,
                    grid,
                    args.seed,
                    args.n_random,
                    count_weights,
                )
                seconds = time.perf_counter() - start
                truth = counts[val_part]
                row = {
                    "size": label,
                    "layers": layer_set,
                    "kind": kind,
                    "penalty": fit.penalty,
                    "count_weight": fit.count_weight,
                    "val_head": metrics(truth, head),
                    "val_agp": metrics(truth, agp),
                    "fit_seconds": round(seconds, 1),
                }
                rows.append(row)
                print(
                    f"  {label:>6} {kind:5} {layer_set:32} penalty {fit.penalty:<6g} count weight {fit.count_weight:<4g} "
                    "validation head MAE "
                    f"{row['val_head'][0]:6.2f} MSE {row['val_head'][1]:7.2f} | AGP MAE {row['val_agp'][0]:6.2f} "
                    f"MSE {row['val_agp'][1]:7.2f}  ({seconds:.0f} s)",
                    flush=True,
                )
                score = min(row["val_head"][0], row["val_agp"][0])
                if best is None or score < best["score"]:
                    best = {"score": score, "size": size, "row": row, "index": index, "kind": kind}
    assert best is not None
    # The validated choice, refitted on the whole train range; the test range is used once here.
    size, index, kind = best["size"], best["index"], best["kind"]
    prep = Preprocessing(input_size=size, roi_mask=roi)
    all_maps = extract_maps(train.paths, backbone, prep, ALL_LAYERS, cache=cache).maps
    test_maps = extract_maps(test.paths, backbone, prep, ALL_LAYERS, cache=cache, progress=True).maps
    merged = all_maps + test_maps
    targets = density_targets(
        train.samples, [item.shape[1:] for item in all_maps], target_settings, dataset.perspective_map
    ) + [np.zeros(item.shape[1:]) for item in test_maps]
    counts = np.concatenate([train.counts, test.counts])
    fit_positions = np.arange(len(train))
    test_positions = np.arange(len(train), len(merged))
    folds = folds_of(train_indices, setup["sequence"], args.seed)
    _, head, agp = evaluate(
        merged,
        targets,
        counts,
        index,
        fit_positions,
        test_positions,
        folds,
        kind,
        roi,
        grid,
        args.seed,
        args.n_random,
        count_weights,
    )
    chosen = best["row"]
    use_agp = chosen["val_agp"][0] < chosen["val_head"][0]
    print(
        f"validated choice: {chosen['size']} {kind} {chosen['layers']} ({'AGP on head sums' if use_agp else 'head alone'})"
    )
    test_head, test_agp = metrics(test.counts, head), metrics(test.counts, agp)
    print(f"TEST head alone:      MAE {test_head[0]:.2f}  MSE {test_head[1]:.2f}")
    print(f"TEST AGP on head sums: MAE {test_agp[0]:.2f}  MSE {test_agp[1]:.2f}")
    speed = frames_per_second(test.paths[:32], backbone, prep, index["__order__"])
    print(
        f"speed at {chosen['size']}: {speed:.1f} frames/s (maps + head, this machine, load now {os.getloadavg()[0]:.1f})"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": rows, "choice": chosen, "test_head": test_head, "test_agp": test_agp, "fps": speed}, indent=2
            )
        )


def frames_per_second(paths, backbone, prep, layers) -> float:
    """Uncached map extraction of ``paths`` (decode, resize, trunk) per second."""
    extract_maps(paths[:4], backbone, prep, layers)  # export / warm-up
    start = time.perf_counter()
    extract_maps(paths, backbone, prep, layers)
    return len(paths) / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
