"""Can a per-cell "people or not" classifier take the general heads' mass off textures?

    export COUNTING_CACHE_DIR=/work/cache-crowd
    python scripts/foreground_mask_study.py --data ../shared/data [-m models/crowd.npz]
        [--classifier mlp|logistic] [--coco-labels dots|boxes]

The crowd model's general heads put 85-87 % of their mass on everyday photos off the people, on
textures read as a distant crowd (docs/density.md, "Where the heads' excess lies"): a brick wall
above a class photo's children, gravel, a placemat. This study fits a classifier of map cells
(counting.heads.crowd.people_mask: each cell's standardised channels and their mean over the
11x11 cells about it) on the frozen maps of every train picture of the crowd model's sets, people
being cells near a head dot and background cells far from any (``--coco-labels boxes``: on
coco-voc20, inside / outside the person boxes instead), then multiplies each validation picture's
density by a ramp of the cell's chance of people (0 below ``low``, 1 above ``high``), either the
mixed density ("all") or the general heads' share alone ("/g"; the specialists, which ShanghaiTech
B and Mall go to, keep theirs), and prints per set the heads' count MAE without the sparse gate,
and the class photo 000000002299's count. The model's own mask, if it has one, is left out first.
Prints the load.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import numpy as np
from sklearn.linear_model import LogisticRegression

from counting.data import image_size, read_crowd
from counting.features import FeatureCache
from counting.heads import density_targets, fit_people_mask, map_statistics, mask_cells
from counting.model import CountingModel

RAMPS = {"ramp.1-.5": (0.1, 0.5), "ramp.3-.9": (0.3, 0.9), "ramp.4-.95": (0.4, 0.95), "ramp.5-.95": (0.5, 0.95)}
CLASS_PHOTO = "000000002299"


def box_labels(xml_path: Path, shape: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """(h, w) int8 of a coco-voc20 photo: 1 inside a person box, 0 a cell or more outside every
    one, -1 between."""
    boxes = []
    for obj in ElementTree.parse(xml_path).getroot().iter("object"):
        if obj.findtext("name", "").strip() == "person":
            box = obj.find("bndbox")
            boxes.append([float(box.findtext(side)) for side in ("xmin", "ymin", "xmax", "ymax")])
    rows, cols = shape
    cell_y, cell_x = size[0] / rows, size[1] / cols
    centre_y, centre_x = (np.arange(rows) + 0.5) * cell_y, (np.arange(cols) + 0.5) * cell_x
    inside = np.zeros(shape, dtype=bool)
    near = np.zeros(shape, dtype=bool)
    for x1, y1, x2, y2 in boxes:
        inside |= ((centre_y >= y1) & (centre_y <= y2))[:, None] & ((centre_x >= x1) & (centre_x <= x2))[None, :]
        near |= ((centre_y >= y1 - cell_y) & (centre_y <= y2 + cell_y))[:, None] & (
            (centre_x >= x1 - cell_x) & (centre_x <= x2 + cell_x)
        )[None, :]
    labels = np.full(shape, -1, np.int8)
    labels[~near] = 0
    labels[inside] = 1
    return labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("-m", "--model", default="models/crowd.npz")
    parser.add_argument("--cache-dir", default=os.environ.get("COUNTING_CACHE_DIR"))
    parser.add_argument("--classifier", choices=("mlp", "logistic"), default="mlp")
    parser.add_argument("--coco-labels", choices=("dots", "boxes"), default="dots")
    args = parser.parse_args()
    model = CountingModel.load(args.model)
    head = replace(model.density_head, people_mask=None)
    cache = FeatureCache(args.cache_dir) if args.cache_dir else FeatureCache()
    data = read_crowd(args.data)
    annotations = args.data.resolve() / "coco-voc20/VOCdevkit/VOC2007/Annotations"
    started = time.perf_counter()

    def each_maps(part) -> Iterator[tuple[Any, str, np.ndarray]]:
        """``(sample, set name, maps)`` of each readable picture of ``part``, one at a time."""
        sources = part.source_names()
        for index, found in model.head_maps([sample.path for sample in part.samples], cache=cache, batch_size=1):
            yield part.samples[index], sources[index], found

    maps, targets = [], []
    for sample, source, found in each_maps(data.subset("train")):
        size = image_size(sample.path)
        (target,) = density_targets([sample], [found.shape[-2:]])
        if source == "coco-voc20" and args.coco_labels == "boxes":
            # mask_cells labels by cell_labels(target): a target that reads back as the box labels
            labels = box_labels(annotations / f"{sample.path.stem}.xml", found.shape[-2:], size)
            target = np.where(labels == 1, 1.0, np.where(labels == 0, 0.0, 0.01))
        maps.append(found)
        targets.append(target)
    cells = mask_cells(maps, targets, head.x_mean, head.x_scale)
    del maps
    print(
        f"{len(cells.labels)} cells ({cells.labels.mean():.2f} people) of {len(targets)} pictures; "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    mask = fit_people_mask(cells)
    if args.classifier == "logistic":
        # The same cells through a linear classifier: the mask's arrays with no hidden layer's bend.
        linear = LogisticRegression(C=0.01, max_iter=300).fit(cells.features, cells.labels)
        mask = replace(
            mask,
            hidden_weight=np.concatenate([linear.coef_.T, -linear.coef_.T], axis=1),
            hidden_bias=np.concatenate([linear.intercept_ * 0, linear.intercept_ * 0]),
            out_weight=np.array([1.0, -1.0]),
            out_bias=float(linear.intercept_[0]),
        )
    print(f"fitted: {mask.settings}; {time.perf_counter() - started:.0f} s", flush=True)

    names = list(head.specialists)
    errors: dict[str, list[list[float]]] = {}
    for sample, source, found in each_maps(data.subset("test")):
        members = head.member_densities(found[None])[:, 0]
        mix = head.router.mixture(map_statistics(found[None]), names)[0] if names else np.ones(1)
        general = mix[0] * members[0]
        rest = np.tensordot(mix[1:], members[1:], 1) if names else np.zeros_like(general)
        chance = mask.probabilities(found[None])[0]
        variants = [general + rest]
        for low, high in RAMPS.values():
            kept = np.clip((chance - low) / (high - low), 0, 1)
            variants += [(general + rest) * kept, general * kept + rest]
        counts = [
            model.predict_features(head.sum_regions(v[None], model.roi_mask, head.grid), source="frames")[0]
            for v in variants
        ]
        errors.setdefault(source, []).append([abs(count - sample.count) for count in counts])
        if sample.path.stem == CLASS_PHOTO:
            print(f"{CLASS_PHOTO} (13 labelled, ~43 visible):", " ".join(f"{count:.1f}" for count in counts))
    columns = ["none"] + [f"{name}{part}" for name in RAMPS for part in ("", "/g")]
    print(f"{'set':<16}{'n':>5}" + "".join(f"{column:>13}" for column in columns))
    for name, found_errors in errors.items():
        print(
            f"{name:<16}{len(found_errors):>5}" + "".join(f"{value:>13.2f}" for value in np.mean(found_errors, axis=0))
        )
    print(f"{time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
