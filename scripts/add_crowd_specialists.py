"""Give the crowd model specialist heads and the router that mixes them, and print its figures.

    export COUNTING_CACHE_DIR=/work/cache-crowd
    python scripts/add_crowd_specialists.py --data ../shared/data -m crowd.npz -o crowd.npz
        --set shanghaitech-B --set mall --folds 4 --out-of-fold crowd-oof.csv
        --gate-out-of-fold crowd-gate-oof.csv    (one command)

The fourth step of the crowd model's reproduction (after train_crowd_model.py,
familiarize_several.py and fit_crowd_gate.py; docs/density.md, "Specialists"); `counting train
--recipe recipes/crowd.toml` runs the shipped model's steps in order (its `specialists` step). For each ``--set``
(default: ShanghaiTech B, the set the general heads count worst against one trained on it alone)
one conv head is trained on that set's train pictures alone (and, a quarter of its crops, on their
grayscale copies: ``--gray-share``), and a router is fitted on every train picture's map
statistics and its grayscale copy's (counting.train.crowd.add_specialists), and the model's
interval is calibrated per route (each specialist, the general heads, the detector; with
``--out-of-fold``, the general heads' out-of-fold rows, on out-of-fold counts throughout:
counting.train.crowd.route_intervals). Then the model is scored on each
set's fixed validation part, as train_crowd_model.py scores it, and the share of each part the
router gives to each specialist is printed. Prints the wall time and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from counting.core import CountingError, atomic_write, check_outputs
from counting.data import read_crowd
from counting.features import FeatureCache
from counting.model import CountingModel
from counting.train import CrowdSettings, add_specialists, crowd_figures, read_gate_out_of_fold, read_out_of_fold

DEFAULT_SETS = ("shanghaitech-B",)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding the shared sets")
    parser.add_argument("-m", "--model", required=True, help="the crowd model (gate and familiarity included)")
    parser.add_argument("-o", "--output", required=True, help="model file to write (.npz)")
    parser.add_argument("--set", action="append", dest="sets", help="a set given a specialist (repeatable)")
    parser.add_argument("--steps", type=int, default=CrowdSettings().steps)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gray-share",
        type=float,
        default=0.25,
        help="share of the specialists' crops drawn from grayscale copies (the shipped model's 0.25; 0: none)",
    )
    parser.add_argument(
        "--degraded-share",
        type=float,
        default=0.25,
        help="share of the specialists' crops drawn from degraded copies: blurred or smaller, saved again "
        "(the shipped model's 0.25; 0: none)",
    )
    parser.add_argument("--folds", type=int, default=1, help="heads per specialist (K > 1: an ensemble of K folds)")
    parser.add_argument(
        "--out-of-fold",
        help="the general heads' out-of-fold rows (train_crowd_model.py --out-of-fold): the specialists' "
        "intervals count their pictures with them (without: the general head's own, in-sample, sums)",
    )
    parser.add_argument(
        "--gate-out-of-fold",
        help="the gate's out-of-fold counts (fit_crowd_gate.py --gate-out-of-fold, with the same model): the "
        "general and detector routes are calibrated on them (without: the gate is fitted again, the same fit)",
    )
    parser.add_argument("--figures", help="also write the validation figures to this JSON file")
    args = parser.parse_args()

    sets = tuple(args.sets or DEFAULT_SETS)
    # No output may replace the out-of-fold CSVs it reads; -o may name the model itself (an atomic
    # replace, once the specialists are trained), but not the figures file.
    try:
        check_outputs([args.output, args.figures], inputs=[args.out_of_fold, args.gate_out_of_fold])
        check_outputs([args.figures], inputs=[args.model])
    except CountingError as error:
        parser.error(str(error))
    try:
        settings = CrowdSettings(
            steps=args.steps, seed=args.seed, gray_share=args.gray_share, degraded_share=args.degraded_share
        )
    except ValueError as error:
        parser.error(str(error))
    cache = FeatureCache()
    try:  # inputs that are missing or not what they should be: one line, before any work
        dataset = read_crowd(args.data)
        model = CountingModel.load(args.model)
        out_of_fold = read_out_of_fold(args.out_of_fold) if args.out_of_fold else None
        gate_out_of_fold = read_gate_out_of_fold(args.gate_out_of_fold) if args.gate_out_of_fold else None
    except (CountingError, ValueError) as error:
        sys.exit(f"add_crowd_specialists.py: {error}")
    print(
        f"specialists for {', '.join(sets)} ({args.folds} heads each); load before: {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    started = time.perf_counter()
    try:
        routed = add_specialists(
            model,
            dataset,
            sets,
            settings,
            cache=cache,
            log=lambda line: print(line, file=sys.stderr, flush=True),
            folds=args.folds,
            out_of_fold=out_of_fold,
            gate_out_of_fold=gate_out_of_fold,
        )
    except ValueError as error:  # a set, file or model that does not fit: one line, before the heads train
        sys.exit(f"add_crowd_specialists.py: {error}")
    trained = time.perf_counter() - started
    routed.save(args.output)
    print(f"training: {trained:.0f} s (load now {os.getloadavg()[0]:.1f}); model -> {args.output}", flush=True)

    started = time.perf_counter()
    figures = crowd_figures(routed, dataset, cache=cache)
    shares = _router_shares(routed, dataset, cache)
    print(f"validation scoring: {time.perf_counter() - started:.0f} s", flush=True)
    print(f"{'set':<16}{'n':>5}{'MAE':>9}{'RMSE':>9}{'cover90':>9}  mean router share: " + " / ".join(sets))
    for name, entry in figures.items():
        share = " / ".join(f"{value:.3f}" for value in shares[name])
        print(
            f"{name:<16}{entry['n']:>5}{entry['mae']:>9.2f}{entry['rmse']:>9.2f}"
            f"{entry.get('coverage', float('nan')):>9.2f}  {share}"
        )
    if args.figures:
        with atomic_write(args.figures) as handle:
            document = {"sets": list(sets), "train_seconds": trained, "figures": figures, "router_shares": shares}
            json.dump(document, handle, indent=2)
            handle.write("\n")


def _router_shares(model: CountingModel, dataset, cache) -> dict[str, list[float]]:
    """Per validation part: the mean weight the router gives each specialist (as counting uses it)."""
    head = model.density_head
    names = list(head.specialists)
    chosen = dataset.subset("test")
    sources = chosen.source_names()
    shares = {}
    for name in dict.fromkeys(sources):
        paths = [str(sample.path) for sample, source in zip(chosen.samples, sources, strict=True) if source == name]
        statistics, ok, _ = model.probe_paths(paths, cache=cache)
        shares[name] = [float(value) for value in head.router.mixture(statistics[ok], names)[:, 1:].mean(axis=0)]
    return shares


if __name__ == "__main__":
    main()
