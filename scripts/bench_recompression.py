"""Counts of photos saved again: each validation photo as its file and as everyday copies.

    python scripts/bench_recompression.py --data ../shared/data [-m models/crowd.npz -m other.npz]
        [--set coco-voc20 --set shanghaitech-B] [--limit N]

A photo reaches a counter after a phone, a messenger or a web page saved it again
(counting.data.copies). For each model and each fixed validation part (counting.data.read_crowd;
the crowd model never trained on it) this counts every photo as its own file and as six copies:
JPEG at quality 95 (invisible), 85 and 75, WebP at 80, 0.8 of its size (then JPEG 95), and a
1-pixel Gaussian blur (PNG; scripts/bench_grayscale.py counts grayscale copies). It
prints, per copy kind, MAE and RMSE against the truth, how many photos the copy sends by another
route than the file (the detector's count or the density head's: ``CountResult.counted_by``),
and the mean change of the count. The copies are counted from memory (CountingModel.count_images
counts as the files are counted). Prints the load.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from counting.data import CopyRecipe, everyday_copy, load_image, read_crowd
from counting.model import CountingModel

KINDS: dict[str, CopyRecipe | None] = {
    "JPEG 95": CopyRecipe("JPEG", 95),
    "JPEG 85": CopyRecipe("JPEG", 85),
    "JPEG 75": CopyRecipe("JPEG", 75),
    "WebP 80": CopyRecipe("WEBP", 80),
    "0.8 size": CopyRecipe("JPEG", 95, scale=0.8),
    "blur 1 px": None,
}


def copy_of(picture: Image.Image, kind: str) -> Image.Image:
    recipe = KINDS[kind]
    if recipe is None:
        return picture.filter(ImageFilter.GaussianBlur(1.0))  # kept lossless: PNG
    return everyday_copy(picture, recipe)


def count_one(model: CountingModel, picture: Image.Image) -> tuple[float, str]:
    """The count of one in-memory picture and its route (``detector`` or ``density``)."""
    batch = model.count_batch([model.prepare_image(picture)])
    counts, people = batch.counts, batch.people
    return float(counts[0]), "density" if people[0] is None else "detector"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument(
        "-m", "--model", action="append", help="model file (repeat to compare; default the crowd model)"
    )
    parser.add_argument("--set", action="append", dest="sets", help="validation part (default coco-voc20)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many photos per part (0: all)")
    args = parser.parse_args()
    models = args.model or ["models/crowd.npz"]
    sets = args.sets or ["coco-voc20"]
    validation = read_crowd(args.data).subset("test")
    sources = validation.source_names()
    print(f"load {os.getloadavg()[0]:.1f}; copies: {', '.join(KINDS)}")
    for name in sets:
        members = [sample for sample, source in zip(validation.samples, sources, strict=True) if source == name]
        if not members:
            parser.error(f"no validation part named {name!r} (parts: {', '.join(dict.fromkeys(sources))})")
        members = members[: args.limit] if args.limit else members
        truth = np.array([float(sample.count) for sample in members])
        pictures = [load_image(sample.path) for sample in members]
        for path in models:
            model = CountingModel.load(path)
            started = time.perf_counter()
            own = [count_one(model, picture) for picture in pictures]
            counts = np.array([count for count, _ in own])
            routes = [route for _, route in own]
            print(f"\n{name} ({len(members)} photos), {path}")
            print(f"  {'copy':<16}{'MAE':>8}{'RMSE':>8}{'other route':>13}{'mean |change|':>15}")
            print(f"  {'the files':<16}{_mae(counts, truth):>8.2f}{_rmse(counts, truth):>8.2f}{'':>13}{'':>15}")
            maes = [_mae(counts, truth)]
            for kind in KINDS:
                copied = [count_one(model, copy_of(picture, kind)) for picture in pictures]
                again = np.array([count for count, _ in copied])
                moved = sum(route != mine for (_, route), mine in zip(copied, routes, strict=True))
                maes.append(_mae(again, truth))
                print(
                    f"  {kind:<16}{maes[-1]:>8.2f}{_rmse(again, truth):>8.2f}{moved:>13d}"
                    f"{np.mean(np.abs(again - counts)):>15.2f}"
                )
            print(
                f"  mean MAE over the files and their copies {np.mean(maes):.2f}; "
                f"{time.perf_counter() - started:.0f} s (load {os.getloadavg()[0]:.1f})"
            )


def _mae(counts: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(counts - truth)))


def _rmse(counts: np.ndarray, truth: np.ndarray) -> float:
    return float(np.sqrt(np.mean((counts - truth) ** 2)))


if __name__ == "__main__":
    main()
