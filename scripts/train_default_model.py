#!/usr/bin/env python3
"""Train the old default model (models/default.npz) on real Mall frames: its recipe, run.

    python scripts/train_default_model.py            # extracts every frame afresh (reproducible)
    python scripts/train_default_model.py --cache-dir DIR   # reuse a feature cache (development)

The same as `counting train --recipe recipes/default.toml -o models/default.npz --no-cache`: frames
1-600 of ../shared/data/mall-train train, 601-800 test, every setting in the recipe (no ROI: the
model counts photos of any size) and a fixed seed. A feature cache is only as good as its key:
entries written by an older preprocessing with the same settings would be reused silently, so the
model is built without one by default.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from counting.cli import main as counting

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "models" / "default.npz")
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="feature cache folder (default: none, extract afresh)"
    )
    args = parser.parse_args()
    cache = ["--cache-dir", str(args.cache_dir)] if args.cache_dir else ["--no-cache"]
    sys.argv = ["counting", "train", "--recipe", str(REPO / "recipes" / "default.toml"), "-o", str(args.out), *cache]
    counting()


if __name__ == "__main__":
    main()
