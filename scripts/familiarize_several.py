"""Add a familiarity score to a model trained on several datasets (e.g. models/crowd.npz).

    PYTHONPATH=. python scripts/familiarize_several.py -m models/crowd.npz -o /tmp/crowd-fam.npz \\
        --data shanghaitech:../shared/data/shanghaitech-A-train:SPLIT \\
        --data shanghaitech:../shared/data/shanghaitech-B-train:SPLIT \\
        --data mall:../shared/data/mall-train:train=1-800,test=801-2000 \\
        --data voc:../shared/data/coco-voc20/VOCdevkit/VOC2007:SPLIT

Each --data is NAME:ROOT:SPLIT, the split the model was trained with (its train part is used).
The score is fitted on all their train pictures together, each dataset cut into its own
contiguous calibration runs (counting.train.familiarize_on_several); the model is written to -o
with only its familiarity section added (its counts are unchanged). One dataset: use
`counting familiarize`. The shipped crowd model runs this as its recipe's `familiarize` step
(`counting train --recipe recipes/crowd.toml`).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    from counting.features import FeatureCache
    from counting.model import load_model
    from counting.train import DatasetPart, familiarize_on_several

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", type=Path, required=True)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--data", action="append", required=True, metavar="NAME:ROOT:SPLIT")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--flag-rate", type=float, default=0.01)
    args = parser.parse_args()
    if args.out.resolve() == args.model.resolve():
        raise SystemExit(f"{args.out}: is the input model; write elsewhere, then move it")
    model = load_model(args.model)
    parts = [DatasetPart(name, Path(root), split) for name, root, split in (spec.split(":", 2) for spec in args.data)]
    cache = FeatureCache(args.cache_dir) if args.cache_dir is not None else None
    section = familiarize_on_several(model, parts, cache=cache, flag_rate=args.flag_rate, log=print)
    model.save(args.out)
    print(
        f"familiarity: {section.probe} probe, {section.settings['n_pictures']} pictures, "
        f"threshold {section.threshold:g}; written to {args.out}"
    )


if __name__ == "__main__":
    main()
