"""Choosing the familiarity score's settings by measurement (counting.heads.familiarity).

    PYTHONPATH=. python scripts/familiarity_study.py --probes /tmp/fam [--models default mall-sums mall-accurate]

For each shipped Mall model: probes of Mall frames 1-600 (fit), 601-800 (held out, the same
camera later in time) and the 559 coco-voc20 photos (pictures unlike Mall) are computed once
(saved under --probes as .npy, reused). Then each setting (PCA axes, whitening, neighbours) is
fitted on frames 1-600 and prints the fraction of held-out frames and of coco photos below the
thresholds 0.01 and 0.05: a good setting marks few held-out frames and nearly every coco photo.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("COUNTING_SHARED_DATA", REPO.parent / "shared" / "data"))


def picture_sets() -> dict[str, list[str]]:
    frames = sorted(str(path) for path in (DATA / "mall-train" / "frames").glob("seq_*.jpg"))
    coco = sorted(str(path) for path in (DATA / "coco-voc20" / "VOCdevkit" / "VOC2007" / "JPEGImages").glob("*.jpg"))
    return {"fit": frames[:600], "held": frames[600:800], "coco": coco}


def probes_of(model_name: str, folder: Path) -> dict[str, np.ndarray]:
    from counting.model import load_model

    model = load_model(REPO / "models" / f"{model_name}.npz")
    out = {}
    for name, paths in picture_sets().items():
        target = folder / f"{model_name}-{name}.npy"
        if not target.exists():
            started = time.perf_counter()
            probes, ok, _ = model.probe_paths(paths, batch_size=8)
            probes[~ok] = np.nan
            np.save(target, probes)
            print(f"{model_name} {name}: {len(paths)} probes in {time.perf_counter() - started:.0f} s", flush=True)
        out[name] = np.load(target)
    return out


def main() -> None:
    from counting.heads import fit_familiarity

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=Path, required=True)
    parser.add_argument("--models", nargs="+", default=["default", "mall-sums", "mall-accurate"])
    args = parser.parse_args()
    args.probes.mkdir(parents=True, exist_ok=True)
    print(f"{'model':14} {'axes':>4} {'whiten':>6} {'k-NN':>4}   held<.01 held<.05   coco<.01 coco<.05")
    for model_name in args.models:
        probes = probes_of(model_name, args.probes)
        for axes, whiten, neighbours in itertools.product((8, 16, 32), (False, True), (1, 5)):
            score = fit_familiarity(probes["fit"], n_components=axes, whiten=whiten, neighbours=neighbours)
            held, coco = score.scores(probes["held"]), score.scores(probes["coco"])
            held, coco = held[np.isfinite(held)], coco[np.isfinite(coco)]
            print(
                f"{model_name:14} {axes:4d} {str(whiten):>6} {neighbours:4d}   "
                f"{np.mean(held < 0.01):8.3f} {np.mean(held < 0.05):8.3f}   "
                f"{np.mean(coco < 0.01):8.3f} {np.mean(coco < 0.05):8.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
