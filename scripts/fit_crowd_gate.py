"""Fit the crowd model's sparse gate (counting.heads.crowd.sparse_gate) and print the validation figures.

    export COUNTING_CACHE_DIR=/work/cache-crowd     # optional: reuses the training maps
    python scripts/fit_crowd_gate.py --data ../shared/data -m crowd-fam.npz -o crowd.npz --out-of-fold crowd-oof.csv
        [--gate-out-of-fold crowd-gate-oof.csv]

The third step of the crowd model's reproduction, after `scripts/train_crowd_model.py` and
`scripts/familiarize_several.py` (the gate reads familiarity); `counting train --recipe
recipes/crowd.toml` runs the shipped model's steps in order (its `gate` step is this fit). The gate is fitted on every train
picture of `--out-of-fold` (the CSV train_crowd_model.py wrote: each picture's count by the head
that never trained on it; an ensemble needs it), or, for a one-head model, on the quarter the head
never trained on (counting.train.crowd.head_validation_samples), and on an everyday copy of each
(saved again as JPEG or WebP, half of them smaller: counting.data.copies; the copies' maps are
made from the files, not cached); its interval is recalibrated on
the gate's out-of-fold counts there; then each set's fixed validation
part is scored with and without the gate. The output replaces the model file only when it is
written completely (CountingModel.save is atomic).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

from counting.core import CountingError, check_outputs
from counting.data import read_crowd
from counting.features import FeatureCache
from counting.model import load_model
from counting.train import GateOutOfFold, crowd_figures, fit_crowd_gate, read_out_of_fold, write_gate_out_of_fold


def _table(title: str, figures: dict) -> None:
    print(title)
    print(f"  {'set':<16}{'n':>5}{'MAE':>9}{'RMSE':>9}{'cover90':>9}")
    for name, entry in figures.items():
        print(
            f"  {name:<16}{entry['n']:>5}{entry['mae']:>9.2f}{entry['rmse']:>9.2f}"
            f"{entry.get('coverage', float('nan')):>9.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding the shared sets")
    parser.add_argument("-m", "--model", default="models/crowd.npz", help="crowd model with a familiarity section")
    parser.add_argument("-o", "--output", required=True, help="model file to write (.npz)")
    parser.add_argument(
        "--out-of-fold",
        help="CSV of train_crowd_model.py --out-of-fold: fit on every picture in it, with its out-of-fold head count",
    )
    parser.add_argument(
        "--gate-out-of-fold",
        help="also write the gate's out-of-fold counts and the pictures it sent to the detector to this CSV "
        "(add_crowd_specialists.py --gate-out-of-fold reads it instead of fitting the gate again)",
    )
    args = parser.parse_args()
    # No output may replace the heads' out-of-fold rows; -o may name the model itself (an atomic
    # replace, once the gate is fitted), but not the gate's CSV.
    try:
        check_outputs([args.output, args.gate_out_of_fold], inputs=[args.out_of_fold])
        check_outputs([args.gate_out_of_fold], inputs=[args.model])
    except CountingError as error:
        parser.error(str(error))
    cache = FeatureCache()
    try:  # inputs that are missing or not what they should be: one line, before any work
        dataset = read_crowd(args.data)
        model = load_model(args.model)
        out_of_fold = read_out_of_fold(args.out_of_fold) if args.out_of_fold else None
    except (CountingError, ValueError) as error:
        sys.exit(f"fit_crowd_gate.py: {error}")
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
    started = time.perf_counter()
    found = GateOutOfFold()
    gated = fit_crowd_gate(
        replace(model, sparse_gate=None),
        dataset,
        cache=cache,
        log=lambda line: print(line, file=sys.stderr),
        out_of_fold=out_of_fold,
        gate_out_of_fold=found,
    )
    print(f"gate fitted in {time.perf_counter() - started:.0f} s (load now {os.getloadavg()[0]:.1f})", flush=True)
    gated.save(args.output)
    print(f"model -> {args.output}")
    if args.gate_out_of_fold:
        write_gate_out_of_fold(args.gate_out_of_fold, found)
        print(f"the gate's out-of-fold counts -> {args.gate_out_of_fold}")
    _table("validation parts, with the gate:", crowd_figures(gated, dataset, cache=cache))
    plain = replace(model, sparse_gate=None)
    _table("validation parts, the input model without a gate:", crowd_figures(plain, dataset, cache=cache))


if __name__ == "__main__":
    main()
