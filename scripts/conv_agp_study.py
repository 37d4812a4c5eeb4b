"""How the AGP should read a conv-head ensemble: `train`'s whole procedure, nested inside the train range.

`counting train --density-head --head-kind conv` trains K heads on K parts of the train images,
fits the AGP on each image's out-of-fold sums (one head's), and counts new images with the
ensemble. Out-of-fold figures measure single heads, not the ensemble the model uses, so they
cannot say how the AGP should be given an ensemble. This script runs that procedure on K-1 parts
of the train range (K inner heads, the AGP on their out-of-fold sums) and counts the remaining
part as the model would count a test image, for each outer part in turn. The test range is
never read. It prints, per way of combining:

- ``head``: the ensemble's mean density summed (no AGP);
- ``ratio``: the ensemble's sum times the train images' total count over the total of their
  out-of-fold sums (a calibration that noise in the sums does not shrink, unlike a fitted slope);
- ``agp-mean``: the AGP given the ensemble's mean sums (what `train` did up to now);
- ``agp-members``: the AGP given each member's sums, its counts averaged over the members;
- ``agp-residual``: the ensemble's sum plus an AGP fitted to the count minus the head's sum
  (the AGP corrects the head and, away from its centres, leaves it alone);
- ``agp-members-residual``: the same correction given each member's sums, averaged.

- ``weight W``: ``agp-residual`` with its correction scaled by W (0: ``head``, 1: ``agp-residual``).
  The correction is learnt from single heads' out-of-fold errors, and the ensemble errs less.

``--sums FILE`` keeps each part's sums (the heads are the expensive part); ``--from-sums FILE``
prints every figure again from them without training.

    python scripts/conv_agp_study.py --dataset shanghaitech --sums shb-sums.npz
    python scripts/conv_agp_study.py --dataset mall --input-size 720 --sums mall-sums.npz
    python scripts/conv_agp_study.py --from-sums mall-sums.npz
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conv_density_study import SETUPS, SHARED, metrics  # noqa: E402

from counting.data import load_dataset  # noqa: E402
from counting.features import (  # noqa: E402
    FeatureCache,  # noqa: E402
    Preprocessing,
    get_backbone,
)
from counting.heads import (  # noqa: E402  # noqa: E402  # noqa: E402
    CONV_LAYERS,
    DEFAULT_CONV_SETTINGS,
    TargetSettings,
    corrected_counts,
    correction_targets,
    density_targets,
    fit_conv_heads,
    stride8_maps,
    validation_parts,
)
from counting.train import fit_agp  # noqa: E402

COMBINERS = ("head", "ratio", "agp-mean", "agp-members", "agp-residual", "agp-members-residual")
# Weights of the AGP's correction swept for ``agp-residual`` (0: the head alone, 1: all of it).
WEIGHTS = np.round(np.linspace(0.0, 1.2, 13), 2)


def combine(oof: np.ndarray, counts: np.ndarray, members: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Counts of the held-out part by each combiner. ``oof``: (n, 1 + cells) inner out-of-fold
    sums; ``members``: (n_held, M, 1 + cells) each inner head's sums of the held-out images."""
    n_held, n_members, dim = members.shape
    mean = members.mean(axis=1)
    flat = members.reshape(-1, dim)
    direct = fit_agp(oof, counts, seed)
    residual = fit_agp(oof, correction_targets(oof, counts), seed)
    correction = np.asarray(residual.predict(mean), float)
    out = {
        "head": mean[:, 0],
        "ratio": mean[:, 0] * counts.sum() / oof[:, 0].sum(),
        "agp-mean": direct.predict(mean),
        "agp-members": direct.predict(flat).reshape(n_held, n_members).mean(axis=1),
        "agp-residual": corrected_counts(mean, correction, 1.0),
        "agp-members-residual": corrected_counts(flat, residual.predict(flat), 1.0)
        .reshape(n_held, n_members)
        .mean(axis=1),
    } | {f"weight {weight:.2f}": corrected_counts(mean, correction, weight) for weight in WEIGHTS}
    return {name: np.clip(np.asarray(value, float), 0.0, None) for name, value in out.items()}


def trained_parts(args) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
    """``(counts, parts)``: each outer part's held-out rows, inner rows, inner out-of-fold sums and
    the inner heads' sums of the held-out images, from training the heads."""
    setup = SETUPS[args.dataset]
    dataset = load_dataset(args.dataset, SHARED / setup["root"], split=setup["split"])
    train = dataset.subset("train")  # the test range is never read
    grid = tuple(int(v) for v in args.grid.split("x"))
    roi = dataset.roi_mask
    backbone = get_backbone("efficientnet-lite0")
    prep = Preprocessing(input_size=None if args.input_size == "native" else int(args.input_size), roi_mask=roi)
    settings = replace(DEFAULT_CONV_SETTINGS, seed=args.seed)
    print(
        f"{args.dataset}: {len(train)} train images, {args.folds} outer parts, each counted by {args.folds} heads "
        f"trained on the rest; input {args.input_size}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    maps = stride8_maps(train.paths, backbone, prep, CONV_LAYERS, cache=FeatureCache(), progress=True)
    targets = density_targets(
        train.samples, [item.shape[1:] for item in maps], TargetSettings(), None, str(dataset.root)
    )
    counts = train.counts.astype(float)
    outer_parts = validation_parts(train.indices, setup["sequence"], args.seed, args.folds)
    parts = []
    for number, held in enumerate(outer_parts[: args.outer], start=1):
        start = time.perf_counter()
        inner = np.flatnonzero(~held)
        inner_parts = validation_parts(train.indices[inner], setup["sequence"], args.seed, args.folds)
        fits, oof = fit_conv_heads(
            [maps[i] for i in inner],
            [targets[i] for i in inner],
            counts[inner],
            CONV_LAYERS,
            inner_parts,
            roi_mask=roi,
            grid=grid,
            settings=settings,
        )
        held_rows = np.flatnonzero(held)
        members = np.stack(
            [
                np.stack([fit.head.region_counts(maps[i].astype(np.float32)[None], roi, grid)[0] for fit in fits])
                for i in held_rows
            ]
        )
        parts.append({"held": held_rows, "inner": inner, "oof": oof, "members": members})
        print(
            f"  part {number}: {len(fits)} heads trained ({time.perf_counter() - start:.0f} s, "
            f"load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        if args.sums:
            saved = {f"part{n}_{key}": value for n, part in enumerate(parts, start=1) for key, value in part.items()}
            np.savez(args.sums, counts=counts, **saved)
    return counts, parts


def saved_parts(path: Path) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
    with np.load(path) as archive:
        numbers = sorted({int(name.split("_")[0][4:]) for name in archive.files if name.startswith("part")})
        parts = [{key: archive[f"part{n}_{key}"] for key in ("held", "inner", "oof", "members")} for n in numbers]
        return archive["counts"], parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SETUPS), default="shanghaitech")
    parser.add_argument("--input-size", default="native", help="short side in pixels, or native")
    parser.add_argument("--grid", default="2x2", help="cells whose density sums join the AGP descriptor")
    parser.add_argument("--folds", type=int, default=DEFAULT_CONV_SETTINGS.folds, help="parts of the train range")
    parser.add_argument("--outer", type=int, help="held-out parts run (default: all, one after the other)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write every figure here too")
    parser.add_argument("--sums", type=Path, help="keep each part's sums here (.npz)")
    parser.add_argument("--from-sums", type=Path, help="figures from sums kept by --sums, without training")
    args = parser.parse_args()
    torch.set_num_threads(2)

    counts, parts = saved_parts(args.from_sums) if args.from_sums else trained_parts(args)
    predicted: dict[str, np.ndarray] = {}
    record: dict = {"parts": [], "total": {}}
    for number, part in enumerate(parts, start=1):
        held, inner = part["held"], part["inner"]
        results = combine(part["oof"], counts[inner], part["members"], args.seed)
        line = {name: metrics(counts[held], value)[0] for name, value in results.items()}
        for name, value in results.items():
            predicted.setdefault(name, np.full(len(counts), np.nan))[held] = value
        inner_oof = metrics(counts[inner], part["oof"][:, 0])[0]
        spread = float(np.mean(np.std(part["members"][:, :, 0], axis=1)))
        print(
            f"  part {number}: inner out-of-fold head MAE {inner_oof:.2f}; members' spread {spread:.2f}; held out: "
            + ", ".join(f"{name} {line[name]:.2f}" for name in COMBINERS)
            + "; by weight: "
            + " ".join(f"{weight:g}:{line[f'weight {weight:.2f}']:.2f}" for weight in WEIGHTS),
            flush=True,
        )
        record["parts"].append({"part": number, "inner_oof_head": inner_oof, "spread": spread, "mae": line})
    done = ~np.isnan(predicted["head"])
    print(f"held-out images counted: {int(done.sum())} of {len(counts)}")
    for name, values in predicted.items():
        mae, mse = metrics(counts[done], values[done])
        bias = float(np.mean(values[done] - counts[done]))
        record["total"][name] = {"mae": mae, "mse": mse, "bias": bias}
        if name in COMBINERS:
            print(f"  {name:22} MAE {mae:6.2f}  MSE {mse:8.2f}  bias {bias:+.2f}")
    print(
        "  agp-residual by weight: "
        + " ".join(f"{weight:g}:{record['total'][f'weight {weight:.2f}']['mae']:.2f}" for weight in WEIGHTS)
    )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
