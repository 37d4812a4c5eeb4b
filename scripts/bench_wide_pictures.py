"""Counts of wide pictures: rows of everyday photos side by side, as a panorama holds them.

    python scripts/bench_wide_pictures.py --data ../shared/data [-m models/crowd.npz] [--rows 30]
        [--photos 1 2 3 4 6] [--crowd]

Each row is made of K different landscape photos of the crowd model's coco-voc20 validation part
(counting.data.read_crowd; the model never trained on them), each resized to 480 pixels high
and set side by side (K = 2 is about 2.7:1, 6 about 8:1); its truth is the sum of their person
counts. Per K it prints the MAE, the mean count against the mean truth, the share of true counts
inside the 90 % intervals, how many rows the sparse gate handed to the detector, and the time
per row (the detector sees a picture wider than 2:1 in tiles: counting.features.detector.evidence;
run on an older checkout, the script measures the code before the tiles). The rows are counted
from memory (CountingModel.count_batch, as files are counted). Prints the load.

``--crowd``: each row starts with a ShanghaiTech B validation photo (a street crowd of tens to
hundreds, resized to 480 pixels high, 4:3) and goes on with K - 1 everyday photos: a crowd beside
sparse photos, which the gate must not hand to the detector whole (read as its average photo, a
crowd of 153 beside one empty photo was counted 5). The column "part" counts the rows the gate
handed to the detector in some tiles only (``counted_by`` "density+detector").
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from counting.data import load_image, read_crowd
from counting.heads import BY_BOTH
from counting.heads import routes as counted_by
from counting.model import CountingModel

HEIGHT = 480


def rows_of_photos(
    data: Path, photos: int, rows: int, seed: int, crowd: bool = False
) -> tuple[list[np.ndarray], np.ndarray]:
    """``rows`` pictures of ``photos`` distinct landscape validation photos side by side, and their
    truth; with ``crowd``, the first photo of each row a ShanghaiTech B validation photo."""
    samples, pictures, landscape = _validation_photos(data, "coco-voc20")
    crowds = _validation_photos(data, "shanghaitech-B") if crowd else None
    rng = np.random.default_rng([seed, photos] + ([1] if crowd else []))
    made, truth = [], []
    for _ in range(rows):
        chosen = [(samples, pictures, k) for k in rng.choice(landscape, photos - int(crowd), replace=False)]
        if crowds is not None:
            chosen.insert(0, (crowds[0], crowds[1], int(rng.choice(crowds[2]))))
        resized = [
            photo[k].resize((round(photo[k].size[0] * HEIGHT / photo[k].size[1]), HEIGHT)) for _, photo, k in chosen
        ]
        made.append(np.concatenate([np.asarray(picture) for picture in resized], axis=1))
        truth.append(sum(part[k].count for part, _, k in chosen))
    return made, np.array(truth, dtype=float)


def _validation_photos(data: Path, name: str) -> tuple[list, list, list[int]]:
    """A set's validation samples (by file name), their pictures and the indices of the landscape ones."""
    validation = read_crowd(data, sets=(name,)).subset("test")
    samples = sorted(validation.samples, key=lambda sample: sample.path.name)
    pictures = [load_image(sample.path).convert("RGB") for sample in samples]
    return samples, pictures, [k for k, picture in enumerate(pictures) if picture.size[0] >= picture.size[1]]


def count_rows(model: CountingModel, pictures: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Counts, interval ends, the number handed to the detector whole and the number in part."""
    counts, low, high, handed, part = [], [], [], 0, 0
    for picture in pictures:
        batch = model.count_batch([model.prepare_image(picture)])
        found, people, lower, upper = batch.counts, batch.people, batch.low, batch.high
        counts.append(found[0])
        low.append(np.nan if lower is None else lower[0])
        high.append(np.nan if upper is None else upper[0])
        way = counted_by(people)[0]
        handed += way != "density" and way != BY_BOTH
        part += way == BY_BOTH
    return np.array(counts), np.array(low), np.array(high), handed, part


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("-m", "--model", default="models/crowd.npz")
    parser.add_argument("--rows", type=int, default=30, help="rows of photos per number of photos")
    parser.add_argument("--photos", type=int, nargs="+", default=[1, 2, 3, 4, 6])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--crowd", action="store_true", help="each row starts with a ShanghaiTech B photo")
    args = parser.parse_args()
    model = CountingModel.load(args.model)
    print(f"{args.model}; load {os.getloadavg()[0]:.1f}{'; a crowd first in each row' if args.crowd else ''}")
    print(
        f"{'photos':>6}{'aspect':>8}{'MAE':>8}{'count':>8}{'truth':>8}{'inside':>8}{'detector':>10}{'part':>6}"
        f"{'s/row':>7}"
    )
    for photos in args.photos:
        pictures, truth = rows_of_photos(args.data, photos, args.rows, args.seed, args.crowd)
        aspect = np.mean([picture.shape[1] / picture.shape[0] for picture in pictures])
        started = time.perf_counter()
        counts, low, high, handed, part = count_rows(model, pictures)
        seconds = (time.perf_counter() - started) / len(pictures)
        inside = np.mean((truth >= low) & (truth <= high)) * 100
        print(
            f"{photos:>6}{aspect:>8.1f}{np.mean(np.abs(counts - truth)):>8.2f}{counts.mean():>8.2f}"
            f"{truth.mean():>8.2f}{inside:>7.0f}%{handed:>7d}/{len(pictures):<2}{part:>6d}{seconds:>7.2f}",
            flush=True,
        )
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
