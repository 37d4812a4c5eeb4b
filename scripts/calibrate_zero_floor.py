"""Give a model's zero-width interval routes a high end measured on its validation parts.

    export COUNTING_CACHE_DIR=/work/cache-crowd OPENBLAS_NUM_THREADS=1
    python scripts/calibrate_zero_floor.py                  # models/crowd.npz in place, coco-voc20
    python scripts/calibrate_zero_floor.py -m crowd.npz -o crowd-floor.npz --sets coco-voc20 mall

The crowd model's ``detector-none`` route (a photo the sparse gate sent to the detector, which
found no one) was calibrated with a quantile of 0, so every such photo got ``0 [0-0]``. This
script counts the validation part of each set in ``--sets`` with the model and sets that route's
``min_high`` to the level conformal quantile of the true counts of those it counted 0
(counting.train.calibrate_zero_floor, which the crowd recipe's `zero-floor` step runs too:
`counting train --recipe recipes/crowd.toml`). Counts are unchanged; what was measured goes into
the model's ``training.zero_interval_floor``. The model file is replaced only once written whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from counting.core import CountingError
from counting.data import read_crowd
from counting.features import FeatureCache
from counting.model import load_model
from counting.train import calibrate_zero_floor

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python scripts/calibrate_zero_floor.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", type=Path, default=ROOT / "models" / "crowd.npz")
    parser.add_argument("-o", "--output", type=Path, help="model file to write (default: the model, replaced)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--sets", nargs="+", default=["coco-voc20"], help="crowd sets whose validation parts measure")
    parser.add_argument("--cache-dir", type=Path, help="feature cache (default $COUNTING_CACHE_DIR)")
    args = parser.parse_args()
    sets = tuple(args.sets)
    command = COMMAND + (f" --sets {' '.join(sets)}" if sets != ("coco-voc20",) else "")
    try:
        model = load_model(args.model)
        cache = FeatureCache(args.cache_dir) if args.cache_dir else FeatureCache()
        found = calibrate_zero_floor(
            model,
            read_crowd(args.data, sets=sets),
            sets,
            cache=cache,
            command=command,
            log=lambda line: print(line, file=sys.stderr),
        )
    except CountingError as error:
        raise SystemExit(f"error: {error}") from None
    if found is None:
        print(f"{args.model}: no interval route with a zero quantile; nothing to do")
        return
    output = args.output or args.model
    found.model.save(output)
    record = found.model.training["zero_interval_floor"]
    print(f"{output}: routes {', '.join(record['routes'])} get a high end of at least {found.floor:g}")
    for part in ("test", "train"):
        name = "validation" if part == "test" else "train (in-sample)"
        print(
            f"  {name}: pictures counted 0 inside [0, {found.floor:g}]: {found.covered(part, found.floor):.3f} "
            f"([0, 0]: {found.covered(part, 0):.3f})"
        )


if __name__ == "__main__":
    main()
