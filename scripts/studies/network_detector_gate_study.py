"""Does the sparse gate (the COCO detector's person count on sparse pictures) still earn its place
on top of a trained crowd network? Issue 48 asks each add-on to re-earn its place.

    python scripts/studies/network_detector_gate_study.py --network net3.npz --data ../shared/data

Counts every validation picture of the four crowd sets (counting.data.datasets.crowd's fixed test
parts, coco-voc20 000000002299 left out: its label is wrong) with the network (the count's own
preprocessing, float32) and with the detector (``detect_counts``, its default threshold). The
gate studied is the simplest one that can be fitted without out-of-fold network counts of the
train pictures: the detector's count where the network counts fewer than ``u`` people and the
detector at most ``t``, the network's elsewhere. ``(u, t)`` is chosen on a grid by
``--folds``-fold cross-validation over the pooled validation pictures (lowest summed absolute
error), so each picture's gated count comes from thresholds chosen without it. Prints per part
the MAE and bias of the network, of the detector alone, of the gated count, and of the better
route per picture (an oracle: the most any gate could give).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

NETWORK_BELOW = (3.0, 5.0, 8.0, 12.0, 16.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0)
DETECTOR_AT_MOST = (3.0, 5.0, 8.0, 12.0, 16.0, 20.0, 30.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", type=Path, required=True, help="a network file of train_crowd_network.py")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("COUNTING_SHARED_DATA", "../shared/data")))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, help="write each picture's counts here (part, picture, truth, routes)")
    args = parser.parse_args()
    if args.folds < 2:
        parser.error("--folds must be at least 2")
    from counting.core import CountingError

    try:
        _study(args)
    except (CountingError, ValueError, OSError) as error:
        sys.exit(f"network_detector_gate_study.py: {error}")


def _study(args: argparse.Namespace) -> None:
    from counting.core import atomic_write, check_writable
    from counting.data import read_crowd
    from counting.features import DETECTOR_PERSON, detect_counts
    from counting.train import count_pictures, crowd_parts, load_network

    if args.csv is not None:
        check_writable(args.csv)
    network, _ = load_network(args.network)
    _, validation = crowd_parts(read_crowd(args.data))
    samples = [sample for chosen in validation.values() for sample in chosen]
    parts = [name for name, chosen in validation.items() for _ in chosen]
    part = np.array(parts)
    truth = np.array([float(sample.count) for sample in samples])
    by_network = count_pictures(network, samples)
    by_detector = detect_counts([sample.path for sample in samples])[:, DETECTOR_PERSON].astype(float)

    grid = [(u, t) for u in NETWORK_BELOW for t in DETECTOR_AT_MOST]

    def gated(u: float, t: float, rows: np.ndarray) -> np.ndarray:
        handed = (by_network[rows] < u) & (by_detector[rows] <= t)
        return np.where(handed, by_detector[rows], by_network[rows])

    folds = np.random.default_rng(args.seed).permutation(len(samples)) % args.folds
    cross_validated = np.empty(len(samples))
    for fold in range(args.folds):
        fit, held = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
        u, t = min(grid, key=lambda pair: float(np.abs(gated(*pair, fit) - truth[fit]).sum()))
        cross_validated[held] = gated(u, t, held)
    everything = np.arange(len(samples))
    u, t = min(grid, key=lambda pair: float(np.abs(gated(*pair, everything) - truth).sum()))
    oracle = np.where(np.abs(by_detector - truth) < np.abs(by_network - truth), by_detector, by_network)
    print(f"network {args.network}; thresholds on all pictures: network below {u:g}, detector at most {t:g}")
    print(f"{'part':16} {'n':>4} {'network':>16} {'detector':>16} {'gated (CV)':>16} {'better route':>16}")
    for name in dict.fromkeys(parts):
        rows = part == name
        cells = [
            f"{np.mean(np.abs(counts[rows] - truth[rows])):7.2f} ({np.mean(counts[rows] - truth[rows]):+6.2f})"
            for counts in (by_network, by_detector, cross_validated, oracle)
        ]
        handed = float(np.mean(cross_validated[rows] != by_network[rows]))
        print(f"{name:16} {int(rows.sum()):4d} " + " ".join(f"{cell:>16}" for cell in cells) + f"  handed {handed:.0%}")
    if args.csv is not None:
        lines = ["part,picture,truth,network,detector,gated_cv"]
        for row, sample in enumerate(samples):
            lines.append(
                f"{part[row]},{sample.path.name},{truth[row]:g},{by_network[row]:.3f},"
                f"{by_detector[row]:g},{cross_validated[row]:.3f}"
            )
        with atomic_write(args.csv) as file:
            file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
