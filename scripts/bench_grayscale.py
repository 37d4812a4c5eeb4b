"""How a crowd model counts grayscale pictures: each validation picture in colour and as its
grayscale copy (CCTV, infrared and old photos are grayscale; the training sets are mostly colour).

    python scripts/bench_grayscale.py [-m models/crowd.npz] [--data ../shared/data] [--sets mall ...]

The grayscale copy is the model's backbone seeing the picture's ITU-R 601 luma in all three
channels (`CountingModel.seeing_grayscale()`, what a grayscale file gives it to within two grey
levels); the COCO detector behind the sparse gate still sees the colour photo. Grayscale PNG
files of the same pictures, where the detector sees grayscale too, gave every figure to within
0.03 (docs/density.md, "Grayscale pictures").
``--files jpeg`` (or ``png``): the grayscale copy is a real 8-bit grayscale file instead, written
to a temporary folder (JPEG at quality 95), which the detector sees too: what a user's grayscale
photo gives. A JPEG copy moves the heads' sum by a few per cent, enough to cross the sparse gate's
head limit where a picture lies near it (docs/density.md, "The people mask with its copies").
Prints per set of the crowd validation parts (counting.data.datasets.crowd): pictures, the
model's MAE in colour and in grayscale, the ratio of the grayscale to the colour count summed over
the set, the share of grayscale copies the familiarity score marks, and how many pictures the
sparse gate disputes in colour and in grayscale (counting.heads.crowd.sparse_gate, "Disputed counts":
the heads' count above the gate's limit stands where the gate says sparse; marked unreliable). Add ``--json FILE`` for
the figures in a file.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from counting.core import atomic_write
from counting.data import read_crowd
from counting.features import FeatureCache, cpu_description
from counting.model import CountingModel


def grayscale_files(paths: list[str], folder: Path, kind: str) -> list[str]:
    """Each picture saved as an 8-bit grayscale ``kind`` file (ITU-R 601 luma, PIL's "L")."""
    from PIL import Image

    written = []
    for index, path in enumerate(paths):
        target = folder / f"{index:05d}-{Path(path).stem}.{'jpg' if kind == 'jpeg' else 'png'}"
        with Image.open(path) as picture:
            gray = picture.convert("L")
        gray.save(target, **({"quality": 95} if kind == "jpeg" else {}))
        written.append(str(target))
    return written


def _disputed(result: object, ok: np.ndarray) -> int:
    """Pictures of ``result`` (a CountResult) whose count the sparse gate disputes (0 without a gate)."""
    disputed = getattr(result, "disputed", None)
    return 0 if disputed is None else int(np.sum(disputed[ok]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", default="models/crowd.npz")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--sets", nargs="*", help="crowd sets to measure (default: all four)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--files", choices=("jpeg", "png"), help="count grayscale files of this kind, not the backbone seeing luma"
    )
    args = parser.parse_args()
    model = CountingModel.load(args.model)
    gray = model.seeing_grayscale()
    cache = FeatureCache()
    validation = read_crowd(args.data, sets=tuple(args.sets) if args.sets else None).subset("test")
    sources = validation.source_names()
    print(f"{model.name}: {cpu_description()}, load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"grayscale copies: {f'{args.files} files' if args.files else 'the backbone seeing luma'}", flush=True)
    scratch = tempfile.TemporaryDirectory(prefix="bench-grayscale-")
    print(
        f"{'set':16s} {'n':>4s} {'colour MAE':>11s} {'gray MAE':>9s} {'gray/colour':>12s} {'gray marked':>12s} "
        f"{'disputed':>9s}"
    )
    figures = {}
    started = time.perf_counter()
    for name in dict.fromkeys(sources):
        members = [sample for sample, source in zip(validation.samples, sources, strict=True) if source == name]
        paths = [str(sample.path) for sample in members]
        truth = np.array([float(sample.count) for sample in members])
        colour = model.count_paths(paths, cache=cache, batch_size=4)
        if args.files:
            seen = model.count_paths(grayscale_files(paths, Path(scratch.name), args.files), batch_size=4)
        else:
            seen = gray.count_paths(paths, cache=cache, batch_size=4)
        ok = colour.ok & seen.ok
        marked = (
            float(np.mean(model.familiarity.unfamiliar(seen.familiarity[ok])))
            if seen.familiarity is not None
            else float("nan")
        )
        worst = int(np.argmax(np.where(ok, np.abs(seen.counts - truth), -np.inf)))
        entry = {
            "n": int(ok.sum()),
            "colour_mae": float(np.mean(np.abs(colour.counts[ok] - truth[ok]))),
            "gray_mae": float(np.mean(np.abs(seen.counts[ok] - truth[ok]))),
            "gray_over_colour": float(np.sum(seen.counts[ok]) / max(np.sum(colour.counts[ok]), 1e-9)),
            "gray_marked": marked,
            "colour_disputed": _disputed(colour, ok),
            "gray_disputed": _disputed(seen, ok),
            "gray_worst": {"picture": paths[worst], "truth": float(truth[worst]), "count": float(seen.counts[worst])},
        }
        figures[name] = entry
        print(
            f"{name:16s} {entry['n']:4d} {entry['colour_mae']:11.2f} {entry['gray_mae']:9.2f} "
            f"{entry['gray_over_colour']:12.3f} {entry['gray_marked']:12.2f} "
            f"{entry['colour_disputed']:>4d} {entry['gray_disputed']:>4d}   worst in gray: "
            f"{Path(paths[worst]).name} {truth[worst]:.0f} -> {seen.counts[worst]:.1f}",
            flush=True,
        )
    scratch.cleanup()
    print(f"{time.perf_counter() - started:.0f} s, load now {os.getloadavg()[0]:.1f}")
    if args.json:
        with atomic_write(args.json) as handle:
            json.dump({"model": str(args.model), "figures": figures}, handle, indent=2)
            handle.write("\n")


if __name__ == "__main__":
    main()
