"""Does the detector count people better in 2x2 tiles than in the whole photo?

The class photo coco-voc20 000000002299 (13 people labelled, about 43 visible, small grey faces)
is counted 80.8 by the crowd model's heads and 4-8 by the detector on the whole photo: its people
are too small for the detector's 512x512 input. This study feeds the detector each quarter of a
photo, every quarter reaching ``--margin`` of the photo's side beyond its core, and counts a
person where its box's centre lies in the core (each place of the photo lies in one core), at
several score thresholds, against the whole photo's count. From the original files, not the
model's prepared input. Prints MAE / RMSE per set and part, the coco-voc20 photos by how many
people they hold, and the class photo's row.

    python scripts/studies/detector_tiles_study.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from counting.core import CountingError
from counting.data import load_image, read_crowd
from counting.features import DetectorBackbone

THRESHOLDS = np.array([0.1, 0.15, 0.2, 0.25, 0.3, 0.4])
CLASS_PHOTO = "000000002299"
COCO_PERSON = 0  # COCO's class 0, the detector's person class


def person_scores(found, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores and box centres (row, column) of picture ``k``'s person detections."""
    person = found.classes[k] == COCO_PERSON
    boxes = found.boxes[k][person]
    return found.scores[k][person], np.stack([(boxes[:, 1] + boxes[:, 3]) / 2, (boxes[:, 0] + boxes[:, 2]) / 2], 1)


def counts(picture: np.ndarray, backbone, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Person counts at each threshold: the whole picture, and its 2x2 tiles."""
    height, width = picture.shape[:2]
    scores, _ = person_scores(backbone.detect_pictures([picture]), 0)
    whole = (scores[:, None] >= THRESHOLDS).sum(0)
    reach_rows, reach_cols = int(margin * height), int(margin * width)
    tiles, cores = [], []
    for top, bottom in ((0, height // 2), (height // 2, height)):
        for left, right in ((0, width // 2), (width // 2, width)):
            row0, row1 = max(0, top - reach_rows), min(height, bottom + reach_rows)
            col0, col1 = max(0, left - reach_cols), min(width, right + reach_cols)
            tiles.append(picture[row0:row1, col0:col1])
            cores.append((top - row0, bottom - row0, left - col0, right - col0))
    found = backbone.detect_pictures(tiles)
    tiled = np.zeros(len(THRESHOLDS), int)
    for k, (top, bottom, left, right) in enumerate(cores):
        scores, centres = person_scores(found, k)
        inside = (centres[:, 0] >= top) & (centres[:, 0] < bottom) & (centres[:, 1] >= left) & (centres[:, 1] < right)
        tiled += (scores[inside][:, None] >= THRESHOLDS).sum(0)
    return whole, tiled


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder holding the shared sets")
    parser.add_argument("--set", action="append", dest="sets", help="crowd sets (default: coco-voc20, shanghaitech-B)")
    parser.add_argument("--margin", type=float, default=0.15, help="a tile's reach beyond its core, in picture sides")
    parser.add_argument("--limit", type=int, default=None, help="at most this many photos per set and part")
    args = parser.parse_args()
    if not 0 <= args.margin < 0.5:
        parser.error(f"--margin {args.margin}: expected at least 0 and under 0.5 (of the picture's side)")
    try:
        crowd = read_crowd(args.data, sets=tuple(args.sets or ("coco-voc20", "shanghaitech-B")))
    except CountingError as error:  # a missing folder or an unknown set: one line, as the CLI says it
        parser.error(str(error))
    backbone = DetectorBackbone(threads=2)
    rows: dict[tuple[str, str], list[tuple[float, np.ndarray, np.ndarray]]] = {}
    started = time.perf_counter()
    for sample in crowd.samples:
        key = (crowd.sources[str(sample.path)], sample.split)
        if args.limit is not None and len(rows.get(key, [])) >= args.limit:
            continue
        whole, tiled = counts(np.asarray(load_image(sample.path)), backbone, args.margin)
        rows.setdefault(key, []).append((float(sample.count), whole, tiled))
        if CLASS_PHOTO in str(sample.path):
            print(
                f"{sample.path.name}: labelled {sample.count:g}; at thresholds {THRESHOLDS.tolist()}: whole {whole.tolist()}, tiles {tiled.tolist()}"
            )
    print(f"{sum(map(len, rows.values()))} photos in {time.perf_counter() - started:.0f} s")
    for (name, part), found in rows.items():
        truth = np.array([row[0] for row in found])
        print(f"{name} {part} ({len(found)} photos, {truth.mean():.1f} people on average): MAE / RMSE, whole | tiles")
        for k, threshold in enumerate(THRESHOLDS):
            whole = np.abs(np.array([row[1][k] for row in found]) - truth)
            tiled = np.abs(np.array([row[2][k] for row in found]) - truth)
            print(
                f"  {threshold:<5g} {whole.mean():7.2f} / {np.sqrt((whole**2).mean()):7.2f} | "
                f"{tiled.mean():7.2f} / {np.sqrt((tiled**2).mean()):7.2f}"
            )
    everyday = [row for (name, _), found in rows.items() if name == "coco-voc20" for row in found]
    if everyday:
        print("coco-voc20 by people held: MAE at 0.2 and 0.3, whole | tiles")
        picked = [list(THRESHOLDS).index(0.2), list(THRESHOLDS).index(0.3)]
        for low, high in ((0, 0), (1, 3), (4, 8), (9, 20)):
            group = [row for row in everyday if low <= row[0] <= high]
            if not group:
                continue
            truth = np.array([row[0] for row in group])
            whole = [np.abs(np.array([row[1][k] for row in group]) - truth).mean() for k in picked]
            tiled = [np.abs(np.array([row[2][k] for row in group]) - truth).mean() for k in picked]
            print(f"  {low}-{high} ({len(group)}): {whole[0]:.2f} {whole[1]:.2f} | {tiled[0]:.2f} {tiled[1]:.2f}")


if __name__ == "__main__":
    main()
