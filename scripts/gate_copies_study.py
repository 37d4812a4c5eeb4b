"""The sparse gate fitted with and without everyday copies, compared out of fold on the train pictures.

    export COUNTING_CACHE_DIR=/work/cache-crowd     # optional: reuses the training maps
    python scripts/gate_copies_study.py --data ../shared/data -m crowd-fam.npz --out-of-fold crowd-oof.csv

Makes what the gate reads of the train pictures and of an everyday copy of each
(counting.train.gate_inputs, as fit_crowd_gate does: copies saved again as JPEG or WebP, some
smaller, counting.data.copies). Each variant's gate settings (familiarity axes, C, detector
threshold, head limit) are those fit_sparse_gate chooses on all its rows: "pictures" fits on the
pictures alone, "with copies" on the pictures and their copies. Then, for each fold seed, five
folds hold a picture and its copy together (scikit-learn's StratifiedGroupKFold); each variant's
logistic regression is fitted on the other folds (the pictures' rows, or the pictures' and their
copies') and routes the held-out pictures and their copies. Prints, per seed and variant, the
out-of-fold MAE of the pictures and of their copies (all sets and coco-voc20's), the pictures
whose copy takes another route than they do, and the ShanghaiTech A pictures sent to the
detector. Prints the load.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from counting.data import read_crowd
from counting.features import FeatureCache
from counting.heads import WEIGHT_FLOOR, fit_sparse_gate, gate_features
from counting.model import load_model
from counting.train import CrowdSettings, gate_inputs, read_out_of_fold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding the shared sets")
    parser.add_argument("-m", "--model", required=True, help="crowd model with a familiarity section (step 2's file)")
    parser.add_argument("--out-of-fold", required=True, help="CSV of train_crowd_model.py --out-of-fold")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="fold seeds")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
    started = time.perf_counter()
    model = load_model(args.model)
    inputs = gate_inputs(
        model, read_crowd(args.data), CrowdSettings(), FeatureCache(), 4, read_out_of_fold(args.out_of_fold)
    )
    copies = inputs.copies
    n = len(inputs.paths)
    sets = np.array(
        ["coco-voc20" if "VOC" in path else path.split("/")[-3].removesuffix("-train") for path in inputs.paths]
    )
    print(f"gate inputs of {n} pictures and their copies: {time.perf_counter() - started:.0f} s", flush=True)

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(inputs, name), getattr(copies, name)])

    rows = [joined(name) for name in ("heads", "persons", "familiarity", "projected", "truth")]
    head, persons, familiarity, projected, truth = rows
    groups = np.tile(np.arange(n), 2)
    originals = np.arange(2 * n) < n
    gates = {
        "pictures": fit_sparse_gate(*(row[:n] for row in rows))[0],
        "with copies": fit_sparse_gate(*rows, groups=groups, originals=originals)[0],
    }
    for name, gate in gates.items():
        print(
            f"{name}: axes {gate.axes}, C {gate.settings['C']:g}, detector threshold "
            f"{gate.settings['detector_threshold']:g}, head limit {gate.head_limit:.1f}"
        )
    print(
        f"{'seed':>4}  {'gate fitted on':<13}{'MAE pictures':>13}{'copies':>8}"
        f"{'coco pictures':>15}{'copies':>8}{'other route':>13}{'SHA sent':>10}"
    )
    for seed in args.seeds:
        for name, gate in gates.items():
            features = gate_features(head, persons, familiarity, projected[:, : gate.axes])
            detector = gate.detector_counts(persons)
            saved = np.abs(head - truth) - np.abs(detector - truth)
            closer, weight = saved > 0, np.log1p(np.abs(saved)) + WEIGHT_FLOOR
            probability = np.zeros(2 * n)
            folds = StratifiedGroupKFold(5, shuffle=True, random_state=seed)
            for fitting, held in folds.split(features, closer, groups):
                if name == "pictures":
                    fitting = fitting[originals[fitting]]
                scaler = StandardScaler().fit(features[fitting])
                regression = LogisticRegression(C=gate.settings["C"], max_iter=5000)
                regression.fit(scaler.transform(features[fitting]), closer[fitting], sample_weight=weight[fitting])
                probability[held] = regression.predict_proba(scaler.transform(features[held]))[:, 1]
            sent = (probability > 0.5) & gate.within_limit(head)
            error = np.abs(np.where(sent, detector, head) - truth)
            coco = np.tile(sets == "coco-voc20", 2)
            dense = np.tile(sets == "shanghaitech-A", 2)
            print(
                f"{seed:>4}  {name:<13}{error[originals].mean():>13.2f}{error[~originals].mean():>8.2f}"
                f"{error[coco & originals].mean():>15.3f}{error[coco & ~originals].mean():>8.3f}"
                f"{int((sent[:n] != sent[n:]).sum()):>13d}{int(sent[dense & originals].sum()):>10d}"
            )
    print(f"{time.perf_counter() - started:.0f} s in all (load now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
