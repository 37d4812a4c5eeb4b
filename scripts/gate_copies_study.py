"""The sparse gate fitted with and without everyday copies, and with copies of either family, compared out of fold.

    export COUNTING_CACHE_DIR=/work/cache-crowd     # optional: reuses the training maps
    python scripts/gate_copies_study.py --data ../shared/data -m crowd-fam.npz --out-of-fold crowd-oof.csv

Makes what the gate reads of the train pictures and of two copies of each (counting.train.gate_inputs,
as fit_crowd_gate does; counting.data.copies.recipe_for): "recompressed", saved again as JPEG or
WebP, half of them smaller (the gate's copies until 2026-11-27), and "wider", the same recipes
with a quarter of the copies also grayscale and a quarter blurred (the gate's copies since). The
variants: "pictures" fits on the pictures alone; "+ recompressed" and "+ wider" on the pictures
and one copy family; "+ wider, all-row limit" is the last with its head limit (twice the largest
head count of a sparse fitting row the detector counted closer) taken from the copies' rows too,
as fit_sparse_gate took it until 2026-11-27. Each variant's settings (familiarity axes, C,
detector threshold, head limit) are those fit_sparse_gate chooses on its rows. Then, for each fold
seed, five folds hold a picture and both its copies together (scikit-learn's
StratifiedGroupKFold); each variant's logistic regression is fitted on its rows of the other folds
and routes the held-out pictures and both their copies. Prints, per seed and variant, the
out-of-fold MAE of the pictures and of each copy family (all sets, and coco-voc20's), and the
ShanghaiTech A pictures (or copies) sent to the detector. Prints the load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from counting.core import CountingError
from counting.data import read_crowd
from counting.features import FeatureCache
from counting.heads import HEAD_LIMIT_FACTOR, WEIGHT_FLOOR, fit_sparse_gate, gate_features, per_photo
from counting.model import load_model
from counting.train import CrowdSettings, gate_inputs, read_out_of_fold

NAMES = ("heads", "persons", "familiarity", "projected", "truth")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding the shared sets")
    parser.add_argument("-m", "--model", required=True, help="crowd model with a familiarity section (step 2's file)")
    parser.add_argument("--out-of-fold", required=True, help="CSV of train_crowd_model.py --out-of-fold")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="fold seeds")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
    started = time.perf_counter()
    try:  # inputs that are missing or not what they should be: one line, before any work
        model = load_model(args.model)
        dataset, cache, rows_of = read_crowd(args.data), FeatureCache(), read_out_of_fold(args.out_of_fold)
    except (CountingError, ValueError) as error:
        sys.exit(f"gate_copies_study.py: {error}")
    families = {
        family: gate_inputs(model, dataset, CrowdSettings(gate_copy_family=family), cache, 4, rows_of)
        for family in ("recompressed", "wider")
    }
    inputs = families["wider"]
    n = len(inputs.paths)
    sets = np.array(
        ["coco-voc20" if "VOC" in path else path.split("/")[-3].removesuffix("-train") for path in inputs.paths]
    )
    print(f"gate inputs of {n} pictures and two copies of each: {time.perf_counter() - started:.0f} s", flush=True)

    # Rows: the pictures, their recompressed copies, their wider copies.
    parts = [inputs, families["recompressed"].copies, inputs.copies]
    head, persons, familiarity, projected, truth = (
        np.concatenate([getattr(part, name) for part in parts]) for name in NAMES
    )
    part = np.repeat(np.arange(3), n)
    groups = np.tile(np.arange(n), 3)
    # What the gate reads of a picture wider than 2:1: its average photo (sparse_gate.per_photo).
    photos = np.concatenate([np.ones(n) if one.photos is None else one.photos for one in parts])
    each, each_persons = per_photo(head, persons, photos)
    finite = np.isfinite(gate_features(each, each_persons, familiarity, projected)).all(axis=1)
    fitted_on = {
        "pictures": part == 0,
        "+ recompressed": part <= 1,
        "+ wider": part != 1,
        "+ wider, all-row limit": part != 1,
    }
    gates = {}
    for name, rows in fitted_on.items():
        chosen = (head[rows], persons[rows], familiarity[rows], projected[rows], truth[rows])
        gate = fit_sparse_gate(*chosen, groups=groups[rows], originals=part[rows] == 0, photos=photos[rows])[0]
        if name.endswith("all-row limit"):
            detector = gate.detector_counts(persons[rows])
            closer = (np.abs(detector - truth[rows]) < np.abs(head[rows] - truth[rows])) & (
                truth[rows] <= gate.sparse_max
            )
            usable = closer & finite[rows]
            gate = replace(gate, head_limit=HEAD_LIMIT_FACTOR * float(np.max(each[rows][usable])))
        gates[name] = gate
        print(
            f"{name}: axes {gate.axes}, C {gate.settings['C']:g}, detector threshold "
            f"{gate.settings['detector_threshold']:g}, head limit {gate.head_limit:.1f}"
        )
    print(
        f"{'seed':>4}  {'gate fitted on':<24}{'MAE pictures':>13}{'recompr.':>9}{'wider':>8}"
        f"{'coco pictures':>15}{'recompr.':>9}{'wider':>8}{'SHA sent':>10}"
    )
    for seed in args.seeds:
        for name, gate in gates.items():
            features = np.nan_to_num(gate_features(each, each_persons, familiarity, projected[:, : gate.axes]))
            detector = gate.detector_counts(persons)
            saved = np.abs(head - truth) - np.abs(detector - truth)
            closer, weight = saved > 0, np.log1p(np.abs(saved)) + WEIGHT_FLOOR
            probability = np.zeros(len(head))
            folds = StratifiedGroupKFold(5, shuffle=True, random_state=seed)
            for fitting, held in folds.split(features, closer, groups):
                fitting = fitting[fitted_on[name][fitting] & finite[fitting]]
                scaler = StandardScaler().fit(features[fitting])
                regression = LogisticRegression(C=gate.settings["C"], max_iter=5000)
                regression.fit(scaler.transform(features[fitting]), closer[fitting], sample_weight=weight[fitting])
                probability[held] = regression.predict_proba(scaler.transform(features[held]))[:, 1]
            sent = (probability > 0.5) & gate.within_limit(each) & finite
            error = np.abs(np.where(sent, detector, head) - truth)
            coco, dense = np.tile(sets == "coco-voc20", 3), np.tile(sets == "shanghaitech-A", 3)
            every = [_mae(error, part == k) for k in range(3)]
            cocos = [_mae(error, coco & (part == k)) for k in range(3)]
            print(
                f"{seed:>4}  {name:<24}{every[0]:>13.2f}{every[1]:>9.2f}{every[2]:>8.2f}"
                f"{cocos[0]:>15.3f}{cocos[1]:>9.3f}{cocos[2]:>8.3f}{int(sent[dense].sum()):>10d}"
            )
    print(f"{time.perf_counter() - started:.0f} s in all (load now {os.getloadavg()[0]:.1f})")


def _mae(error: np.ndarray, mask: np.ndarray) -> float:
    return float(np.nanmean(error[mask]))


if __name__ == "__main__":
    main()
