"""ShanghaiTech Part A / B (Zhang et al., CVPR 2016): crowd images with head points.

Layout: a part folder (``part_B_final/``, ``part_B/``) holding ``train_data/`` and
``test_data/`` (the standard split), or a single split folder; each has ``images/IMG_n.jpg``
and ``ground-truth/GT_IMG_n.mat`` (or ``ground_truth/``) with ``image_info{1}{1}{1}`` fields
``location`` (k x 2 head points) and ``number``. A single folder is all train, unless it is
named ``test_data``.
"""

from __future__ import annotations

import re
from pathlib import Path

from counting.core.errors import DatasetError
from counting.data.datasets.base import Annotated, CountingDataset, select_samples
from counting.data.datasets.matfiles import cell_items, field, load_mat, numbers, points
from counting.data.datasets.splits import parse_split

PART_FOLDERS = {"train_data": "train", "test_data": "test"}
GROUND_TRUTH_FOLDERS = ("ground-truth", "ground_truth")
_IMAGE_NAME = re.compile(r"^IMG_(\d+)\.jpg$", re.IGNORECASE)


def read_shanghaitech(root: Path | str, split: str = "standard") -> CountingDataset:
    """Read a ShanghaiTech part folder (train_data/ + test_data/) or one split folder."""
    spec = parse_split(split)
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise DatasetError(f"{root}: folder not found")
    parts = [(root / folder, part) for folder, part in PART_FOLDERS.items() if (root / folder).is_dir()]
    if not parts:
        if not (root / "images").is_dir():
            raise DatasetError(
                f"{root}: neither train_data/ and test_data/ nor images/ found (not a ShanghaiTech folder)"
            )
        parts = [(root, PART_FOLDERS.get(root.name, "train"))]
    entries = [entry for folder, part in parts for entry in _annotations(folder, part)]
    samples = select_samples(entries, spec, source=root, sequence=False)
    return CountingDataset(
        name="shanghaitech",
        root=root,
        samples=samples,
        roi_mask=None,
        class_names=None,
        split=spec.text,
    )


def _annotations(folder: Path, part: str) -> list[Annotated]:
    images = folder / "images"
    if not images.is_dir():
        raise DatasetError(f"{images}: folder not found")
    truth = next((folder / name for name in GROUND_TRUTH_FOLDERS if (folder / name).is_dir()), None)
    if truth is None:
        raise DatasetError(f"{folder / GROUND_TRUTH_FOLDERS[0]}: folder not found (nor ground_truth/)")
    numbered = sorted(
        (int(match.group(1)), path) for path in images.iterdir() if (match := _IMAGE_NAME.match(path.name))
    )
    if not numbered:
        raise DatasetError(f"{images}: no IMG_n.jpg images found")
    _reject_orphan_ground_truth(truth, images, {number for number, _ in numbered})
    return [
        Annotated(
            index=number,
            path=path,
            standard_split=part,
            **_ground_truth(truth / f"GT_IMG_{number}.mat"),
        )
        for number, path in numbered
    ]


def _ground_truth(path: Path) -> dict:
    info = load_mat(path, ("image_info",))["image_info"]
    record = cell_items(info, path, "image_info")[0]
    dots = points(field(record, "location", path, "image_info{1}{1}"), path, "image_info location")
    number = numbers(field(record, "number", path, "image_info{1}{1}"), path, "image_info number")
    if number.size != 1 or number[0] != len(dots):
        raise DatasetError(f"{path}: 'number' is {number.tolist()} but 'location' has {len(dots)} points")
    return {"count": float(len(dots)), "dots": dots}


def _reject_orphan_ground_truth(truth: Path, images: Path, numbers_with_images: set[int]) -> None:
    for path in sorted(truth.glob("GT_IMG_*.mat")):
        number = path.stem.removeprefix("GT_IMG_")
        if number.isdigit() and int(number) not in numbers_with_images:
            raise DatasetError(f"{path}: ground truth without its image {images / f'IMG_{number}.jpg'}")
