"""Conv density head study: choices on validation inside the train range, the test range once.

Mall: train frames 1-600, test 601-800. ShanghaiTech B: its 400 train images split
random:0.25:0 (300 train, 100 test).

``--folds 1``: one head, trained on three quarters of the train range and validated on the rest
(Mall: frames 451-600; ShanghaiTech B: a seeded random 75 of the 300). ``--folds K``: K heads,
each validated on one of K parts of the train range (Mall: contiguous blocks of frames) and
trained on the others, as ``counting train --head-kind conv`` does; the validation figures are
then out of fold over the whole train range, and the test range is counted by the ensemble (the
mean of the K heads' densities). ``--keep last`` keeps each head's last weights, so that the
validation parts only measure (``best`` early-stops on them, which makes their figures optimistic).

For each head configuration it prints the validation count MAE/MSE of the head alone and of the
AGP on the heads' region sums (5-fold cross-validated inside the validated images). The best
configuration (and whichever of head alone / AGP validates better) is then scored on the test
range once. Speeds are measured now, under the machine's load.

    python scripts/conv_density_study.py --dataset mall --folds 4 --keep last --configs 32x3-e995 32x3c1-e995
    python scripts/conv_density_study.py --dataset shanghaitech --configs 32x3cos
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from counting.core import crowd_metrics
from counting.data import cv_folds, load_dataset
from counting.features import FeatureCache, Preprocessing, get_backbone
from counting.heads import (
    ConvSettings,
    TargetSettings,
    density_targets,
    ensemble,
    extract_maps,
    fit_conv_heads,
    stride8_maps,
    validation_parts,
)
from counting.train import conv_ensemble_counts

SHARED = Path(os.environ.get("COUNTING_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SETUPS = {
    "mall": {
        "root": "mall-train",
        "split": "train=1-600,test=601-800",
        "sequence": True,
    },
    "shanghaitech": {
        "root": "shanghaitech-B-train",
        "split": "random:0.25:0",
        "sequence": False,
    },
}


def metrics(truth: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(MAE, MSE) of counts, as every figure of the package is scored (core.metrics)."""
    figures = crowd_metrics(truth, predicted)
    return figures["mae"], figures["mse"]


def agp_cross_validated(rows: np.ndarray, counts: np.ndarray, indices: np.ndarray, sequence: bool, seed: int):
    """AGP counts of each validation image by an AGP fitted on the other folds of the validation part."""
    predicted = np.zeros(len(rows))
    for members in cv_folds(indices, 5, sequence, seed, 15 if sequence else None):
        train = np.ones(len(rows), bool)
        train[members] = False
        predicted[members] = conv_ensemble_counts(rows[train], counts[train], rows[members], seed)
    return predicted


def parse_config(text: str) -> ConvSettings:
    """``WxD[cK][cos][-eNNN]``: width, depth of 3x3 convs, count weight K, cosine learning-rate decay,
    weight averaging with decay 0.NNN per step (``-e995``: 0.995)."""
    text, _, averaging = text.partition("-e")
    cosine = text.endswith("cos")
    shape, _, weight = text.removesuffix("cos").partition("c")
    width, depth = (int(side) for side in shape.split("x"))
    schedule = "cosine" if cosine else "constant"
    ema = float(f"0.{averaging}") if averaging else 0.0
    return ConvSettings(width=width, depth=depth, count_weight=float(weight or 0.0), schedule=schedule, ema=ema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SETUPS), default="shanghaitech")
    parser.add_argument(
        "--configs", nargs="*", default=["32x3", "32x3c1"], help="WxD[cK]: width, 3x3 convs, count weight"
    )
    parser.add_argument("--layers", default="block4,block7,block10")
    parser.add_argument("--grid", default="2x2", help="cells whose density sums join the AGP descriptor ('none')")
    parser.add_argument("--max-steps", type=int, default=ConvSettings.max_steps)
    parser.add_argument("--batch", type=int, default=ConvSettings.batch, help="crops per Adam step")
    parser.add_argument("--eval-every", type=int, default=ConvSettings.eval_every, help="steps between validations")
    parser.add_argument("--patience", type=int, default=ConvSettings.patience)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--folds",
        type=int,
        default=1,
        help="1: one validation part (above); K > 1: K heads, each validated on one of K parts of the "
        "train range (Mall: contiguous blocks) and trained on the rest; the figures are out of fold over "
        "the whole train range, and the test range is counted by the mean of the K heads' densities",
    )
    parser.add_argument("--input-size", default="native", help="short side in pixels, or native")
    parser.add_argument("--crop", type=int, default=ConvSettings.crop, help="cells per side of a training crop")
    parser.add_argument("--ema", type=float, default=0.0, help="weight averaging decay per step (0: off)")
    parser.add_argument(
        "--keep", choices=("best", "last"), default="best", help="weights kept: best validation or last"
    )
    parser.add_argument("--no-test", action="store_true", help="stop after the validation rows")
    parser.add_argument(
        "--test-if-below",
        type=float,
        help="score the test range only if the best validation MAE is below this (an earlier choice's)",
    )
    parser.add_argument("--json", type=Path, help="write every figure here too")
    args = parser.parse_args()
    torch.set_num_threads(2)

    setup = SETUPS[args.dataset]
    dataset = load_dataset(args.dataset, SHARED / setup["root"], split=setup["split"])
    train, test = dataset.subset("train"), dataset.subset("test")
    parts = validation_parts(train.indices, setup["sequence"], args.seed, args.folds)
    validated = np.any(parts, axis=0)
    val_part = np.flatnonzero(validated)
    grid = None if args.grid == "none" else tuple(int(v) for v in args.grid.split("x"))
    layers = args.layers.split(",")
    roi = dataset.roi_mask
    backbone = get_backbone("efficientnet-lite0")
    cache = FeatureCache()
    prep = Preprocessing(input_size=None if args.input_size == "native" else int(args.input_size), roi_mask=roi)
    scheme = (
        f"{int((~parts[0]).sum())} fit / {int(parts[0].sum())} validation"
        if args.folds == 1
        else f"{args.folds} heads, each validated on one of {args.folds} parts and fitted on the rest"
    )
    print(
        f"{args.dataset}: {len(train)} train ({scheme}), "
        f"{len(test)} test; layers {args.layers} at stride 8, input {args.input_size}, AGP grid {args.grid}, "
        f"ema {args.ema:g}, keep {args.keep}, runtime {backbone.runtime}, torch threads {torch.get_num_threads()}, "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    maps = stride8_maps(train.paths, backbone, prep, layers, cache=cache, progress=True)
    targets = density_targets(
        train.samples, [item.shape[1:] for item in maps], TargetSettings(), None, str(dataset.root)
    )
    counts = train.counts.astype(float)
    truth = counts[val_part]
    rows: list[dict] = []
    best: dict | None = None
    for text in args.configs:
        settings = parse_config(text)
        settings = ConvSettings(
            **(
                settings.record()
                | {
                    "max_steps": args.max_steps,
                    "batch": args.batch,
                    "crop": args.crop,
                    "eval_every": args.eval_every,
                    "patience": args.patience,
                    "seed": args.seed,
                    "ema": settings.ema or args.ema,
                    "keep": args.keep,
                }
            )
        )
        load = os.getloadavg()[0]
        # Each head's sums of the part it was validated on: out of fold over the validated images.
        fits, sums = fit_conv_heads(maps, targets, counts, layers, parts, roi_mask=roi, grid=grid, settings=settings)
        if args.folds > 1:
            for number, (part, fit) in enumerate(zip(parts, fits, strict=True), start=1):
                fold_mae = metrics(counts[part], np.clip(fit.validation_sums[:, 0], 0, None))[0]
                print(
                    f"    {text}: part {number}/{args.folds} validation head MAE {fold_mae:.2f} ({fit.seconds:.0f} s)"
                )
        validation_sums = sums[val_part]
        head_alone = metrics(truth, np.clip(validation_sums[:, 0], 0, None))
        agp = agp_cross_validated(validation_sums, truth, train.indices[val_part], setup["sequence"], args.seed)
        row = {
            "config": text,
            "best_step": [fit.best_step for fit in fits],
            "val_head": head_alone,
            "val_agp_cv": metrics(truth, agp),
            "bias": float(np.mean(validation_sums[:, 0] - truth)),
            "seconds": round(sum(fit.seconds for fit in fits), 1),
            "load": round(load, 1),
            "history": [fit.history for fit in fits],
        }
        rows.append(row)
        print(
            f"  {text:10} kept step {max(row['best_step']):5d}  validation head MAE {head_alone[0]:6.2f} MSE {head_alone[1]:8.2f}"
            f" (bias {row['bias']:+.2f}) | head + AGP correction (5-fold inside validation) MAE {row['val_agp_cv'][0]:6.2f}"
            f" MSE {row['val_agp_cv'][1]:8.2f}  ({row['seconds']:.0f} s, load {load:.1f})",
            flush=True,
        )
        score = min(head_alone[0], row["val_agp_cv"][0])
        if best is None or score < best["score"]:
            best = {"score": score, "row": row, "fits": fits, "sums": validation_sums}
    assert best is not None
    chosen, fits = best["row"], best["fits"]
    use_agp = chosen["val_agp_cv"][0] < chosen["val_head"][0]
    print(f"validated choice: {chosen['config']} ({'head + AGP correction' if use_agp else 'head alone'})", flush=True)
    result = {"rows": rows, "choice": chosen["config"], "use_agp": use_agp, "folds": args.folds}
    if args.test_if_below is not None and best["score"] >= args.test_if_below:
        print(f"validation MAE {best['score']:.2f} does not beat {args.test_if_below:g}: the test range is not scored")
        args.no_test = True
    if not args.no_test:
        del maps
        test_maps = stride8_maps(test.paths, backbone, prep, layers, cache=cache, progress=True)
        # The K heads' densities averaged: one ensemble (K = 1: the head as trained).
        counting_head = ensemble([fit.head for fit in fits])
        sums = np.stack([counting_head.region_counts(item.astype(np.float32), roi, grid)[0] for item in test_maps])
        test_head = metrics(test.counts, np.clip(sums[:, 0], 0, None))
        test_agp = metrics(test.counts, conv_ensemble_counts(best["sums"], truth, sums, args.seed))
        print(f"TEST (once) head alone:       MAE {test_head[0]:.2f}  MSE {test_head[1]:.2f}")
        print(f"TEST (once) head + AGP correction: MAE {test_agp[0]:.2f}  MSE {test_agp[1]:.2f}")
        fps = frames_per_second(test.paths[:16], backbone, prep, counting_head)
        print(f"speed: {fps:.1f} images/s (one trunk pass + conv head, uncached, load now {os.getloadavg()[0]:.1f})")
        result |= {"test_head": test_head, "test_agp": test_agp, "fps": fps}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


def frames_per_second(paths, backbone, prep, head) -> float:
    """Uncached maps (one trunk pass per image) + conv head, images per second."""
    head.density(extract_maps(paths[:2], backbone, prep, head.layers, stride=head.stride).stacked())  # warm-up
    start = time.perf_counter()
    for first in range(0, len(paths), 4):
        head.density(extract_maps(paths[first : first + 4], backbone, prep, head.layers, stride=head.stride).stacked())
    return len(paths) / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
