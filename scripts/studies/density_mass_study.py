"""Where a density model's mass lies on everyday photos: on the people, or on the background.

    python scripts/studies/density_mass_study.py --data ../shared/data [-m models/crowd.npz] [--top 8]

For every photo of the crowd model's coco-voc20 validation part (counting.data.datasets.crowd: a
seeded random quarter, photos with a person crowd box left out) the model's density map is split
into the mass on the labelled people (map cells whose centre lies in a person box grown by one
cell each side: a head's mass spreads about a cell beyond it) and the mass elsewhere. Printed per
route (the photos the model's count takes from the heads, and those its sparse gate hands to the
detector, whose density the count does not use): photos, people labelled, the heads' sum, its
mass on and off the people, and the photos with the most mass off the people, each with its
densest blob off them (connected cells above a fiftieth of a person) and that blob's place.

Why: the general heads overcount everyday photos (their sum alone scored MAE 8.87 on this part)
and the gate hides most of it by handing sparse photos to the detector. Whether the excess sits
on the people (each counted more than once) or beside them (background read as a crowd) decides
what would fix it.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
from scipy import ndimage

import counting
from counting.data import load_image, read_crowd
from counting.model import default_model_path

# A cell holding more than this many people belongs to a blob (the faces' peaks are 0.1-0.3).
BLOB_LEVEL = 0.02


def person_boxes(xml_path: Path) -> np.ndarray:
    """(k, 4) x1, y1, x2, y2 of the photo's person boxes (crowd boxes included: they are people)."""
    boxes = []
    for obj in ElementTree.parse(xml_path).getroot().iter("object"):
        if obj.findtext("name", "").strip() != "person":
            continue
        box = obj.find("bndbox")
        boxes.append([float(box.findtext(side)) for side in ("xmin", "ymin", "xmax", "ymax")])
    return np.asarray(boxes, dtype=float).reshape(-1, 4)


def on_people(shape: tuple[int, int], size: tuple[int, int], boxes: np.ndarray) -> np.ndarray:
    """(h, w) bool: map cells whose centre lies in a person box grown by one cell each side."""
    rows, cols = shape
    height, width = size
    cell_y, cell_x = height / rows, width / cols
    centre_y = (np.arange(rows) + 0.5) * cell_y
    centre_x = (np.arange(cols) + 0.5) * cell_x
    mask = np.zeros(shape, dtype=bool)
    for x1, y1, x2, y2 in boxes:
        inside_y = (centre_y >= y1 - cell_y) & (centre_y <= y2 + cell_y)
        inside_x = (centre_x >= x1 - cell_x) & (centre_x <= x2 + cell_x)
        mask |= inside_y[:, None] & inside_x[None, :]
    return mask


def densest_blob_off_people(density: np.ndarray, people: np.ndarray) -> tuple[float, str]:
    """The mass of the largest blob off the people and where its centre is (fractions of the photo)."""
    off = np.where(people, 0.0, np.clip(density, 0.0, None))
    labels, found = ndimage.label(off > BLOB_LEVEL)
    if not found:
        return 0.0, "-"
    masses = ndimage.sum(off, labels, range(1, found + 1))
    biggest = int(np.argmax(masses)) + 1
    y, x = ndimage.center_of_mass(off, labels, biggest)
    return float(masses[biggest - 1]), f"x {x / density.shape[1]:.2f}, y {y / density.shape[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("-m", "--model", type=Path, default=default_model_path())
    parser.add_argument(
        "--part",
        choices=("validation", "train"),
        default="validation",
        help="which part of coco-voc20 (train: the photos the heads trained on, in sample)",
    )
    parser.add_argument("--top", type=int, default=8, help="photos listed with the most mass off the people")
    args = parser.parse_args()
    model = counting.load_model(args.model)
    if model.density_head is None:
        parser.error(f"{args.model}: has no density head")
    coco = read_crowd(args.data, sets=("coco-voc20",)).subset("test" if args.part == "validation" else "train")
    annotations = args.data.resolve() / "coco-voc20/VOCdevkit/VOC2007/Annotations"
    started = time.perf_counter()
    rows = []
    for sample in sorted(coco.samples, key=lambda sample: sample.path.name):
        rgb = np.asarray(load_image(sample.path))
        (result,) = counting.count([rgb], model=model)
        density = model.density_maps([model.prepare_image(rgb, source=str(sample.path))])[0]
        people = on_people(density.shape, rgb.shape[:2], person_boxes(annotations / f"{sample.path.stem}.xml"))
        blob, where = densest_blob_off_people(density, people)
        rows.append(
            {
                "photo": sample.path.stem,
                "truth": float(sample.count),
                "count": float(result["count"]),
                "route": result.get("counted_by", "density"),
                "sum": float(density.sum()),
                "on": float(density[people].sum()),
                "off": float(density[~people].sum()),
                "blob": blob,
                "where": where,
            }
        )
    print(
        f"{args.model} on {len(rows)} coco-voc20 {args.part} photos; {time.perf_counter() - started:.0f} s, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'route':<10} {'photos':>6} {'people':>7} {'heads sum':>10} {'on people':>10} {'off people':>11}"
        f" {'count MAE':>10} {'sum MAE':>8}"
    )
    for route in sorted({row["route"] for row in rows}):
        part = [row for row in rows if row["route"] == route]
        truth = np.array([row["truth"] for row in part])
        total = {key: np.array([row[key] for row in part]) for key in ("count", "sum", "on", "off")}
        print(
            f"{route:<10} {len(part):>6} {truth.sum():>7.0f} {total['sum'].sum():>10.1f} {total['on'].sum():>10.1f}"
            f" {total['off'].sum():>11.1f} {np.abs(total['count'] - truth).mean():>10.2f}"
            f" {np.abs(total['sum'] - truth).mean():>8.2f}"
        )
    print(f"\nthe {args.top} photos with the most mass off the people:")
    print(
        f"{'photo':<14} {'route':<10} {'truth':>5} {'count':>6} {'heads sum':>9} {'on':>6} {'off':>6}"
        f" {'densest blob off':>16}  where"
    )
    for row in sorted(rows, key=lambda row: -row["off"])[: args.top]:
        print(
            f"{row['photo']:<14} {row['route']:<10} {row['truth']:>5.0f} {row['count']:>6.1f} {row['sum']:>9.1f}"
            f" {row['on']:>6.1f} {row['off']:>6.1f} {row['blob']:>16.1f}  {row['where']}"
        )


if __name__ == "__main__":
    main()
