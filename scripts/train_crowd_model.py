"""Train the general crowd model (models/crowd.npz) end to end and print its validation figures.

    export COUNTING_CACHE_DIR=/work/cache-crowd
    python scripts/train_crowd_model.py --data ../shared/data -o crowd-heads.npz --out-of-fold crowd-oof.csv

The first step of the crowd model (then scripts/familiarize_several.py, scripts/fit_crowd_gate.py,
scripts/add_crowd_specialists.py and scripts/calibrate_zero_floor.py; docs/density.md, "The ensemble").
The shipped model's steps run in order in one command: `counting train --recipe recipes/crowd.toml`;
this script stays for studies of other settings.

Reads the four shared sets (counting.data.datasets.crowd: ShanghaiTech A and B train, Mall
frames 1-800, coco-voc20 person boxes), trains on their train parts (counting.train.crowd) and
scores the model on each set's fixed validation part: MAE / MSE / RMSE, the head's sum alone, the
90 % interval's coverage, and the MAE at other correction weights. Prints the wall time of the
training (maps included: a fresh cache makes them) and of the scoring, and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from counting.core import atomic_write
from counting.data import read_crowd
from counting.features import FeatureCache
from counting.train import CrowdSettings, crowd_figures, train_crowd_model, write_out_of_fold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding the shared sets")
    parser.add_argument("-o", "--output", required=True, help="model file to write (.npz)")
    parser.add_argument("--figures", help="also write the validation figures to this JSON file")
    defaults = CrowdSettings()
    parser.add_argument("--input-size", type=int, default=defaults.input_size)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--sampling", default=defaults.sampling, choices=("balanced", "uniform"))
    parser.add_argument("--sequence-stride", type=int, default=defaults.sequence_stride)
    parser.add_argument("--width", type=int, default=defaults.width)
    parser.add_argument(
        "--count-weight",
        type=float,
        default=defaults.count_weight,
        help="weight of each training crop's count error beside its cells' errors (0: cells only)",
    )
    parser.add_argument("--correction-weight", type=float, default=defaults.correction_weight)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--folds", type=int, default=defaults.folds, help="heads in the ensemble (1: one head)")
    parser.add_argument(
        "--gray-share", type=float, default=defaults.gray_share, help="share of crops from grayscale copies (0: none)"
    )
    parser.add_argument(
        "--degraded-share",
        type=float,
        default=0.25,
        help="share of crops from degraded copies: blurred or smaller, saved again (the shipped model's 0.25; 0: none)",
    )
    parser.add_argument(
        "--people-mask",
        action="store_true",
        help="a people mask on the general heads (not in the shipped model: docs/density.md)",
    )
    parser.add_argument(
        "--out-of-fold",
        help="write each validated train picture's out-of-fold head count to this CSV (fit_crowd_gate.py reads it)",
    )
    parser.add_argument(
        "--share",
        action="append",
        default=[],
        metavar="SET=SHARE",
        help="relative share of crops of a set (default: the shipped shares, mall=0.5; others 1)",
    )
    args = parser.parse_args()

    try:
        settings = CrowdSettings(
            input_size=args.input_size,
            steps=args.steps,
            sampling=args.sampling,
            sequence_stride=args.sequence_stride,
            width=args.width,
            count_weight=args.count_weight,
            correction_weight=args.correction_weight,
            seed=args.seed,
            folds=args.folds,
            gray_share=args.gray_share,
            degraded_share=args.degraded_share,
            people_mask=args.people_mask,
            shares=tuple((name, float(value)) for name, value in (item.split("=") for item in args.share))
            if args.share
            else defaults.shares,
        )
    except ValueError as error:
        parser.error(str(error))
    cache = FeatureCache()
    dataset = read_crowd(args.data)
    print(f"settings: {settings.record()}", flush=True)
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)

    started = time.perf_counter()
    out_of_fold: dict = {}
    model = train_crowd_model(
        dataset,
        settings,
        cache=cache,
        log=lambda line: print(line, file=sys.stderr, flush=True),
        out_of_fold=out_of_fold,
    )
    trained = time.perf_counter() - started
    model.save(args.output)
    if args.out_of_fold:
        write_out_of_fold(args.out_of_fold, out_of_fold)
    print(f"training: {trained:.0f} s (load now {os.getloadavg()[0]:.1f}); model -> {args.output}", flush=True)

    started = time.perf_counter()
    figures = crowd_figures(model, dataset, cache=cache, correction_weights=(0.0, 0.25, 0.5, 0.75, 1.0))
    print(f"validation scoring: {time.perf_counter() - started:.0f} s", flush=True)
    print(f"{'set':<16}{'n':>5}{'MAE':>9}{'RMSE':>9}{'head MAE':>10}{'cover90':>9}  MAE at weight 0/.25/.5/.75/1")
    for name, entry in figures.items():
        weights = " / ".join(f"{entry[f'mae_w{w:g}']:.2f}" for w in (0.0, 0.25, 0.5, 0.75, 1.0))
        print(
            f"{name:<16}{entry['n']:>5}{entry['mae']:>9.2f}{entry['rmse']:>9.2f}{entry['head_mae']:>10.2f}"
            f"{entry.get('coverage', float('nan')):>9.2f}  {weights}"
        )
    if args.figures:
        with atomic_write(args.figures) as handle:
            json.dump({"settings": settings.record(), "train_seconds": trained, "figures": figures}, handle, indent=2)
            handle.write("\n")


if __name__ == "__main__":
    main()
