"""Mall (Chen, Loy, Gong & Xiang, BMVC 2012): 2000 frames of one shopping-mall camera.

Layout: ``frames/seq_NNNNNN.jpg``, ``mall_gt.mat`` (``frame{i}.loc`` head points, ``count``),
``perspective_roi.mat`` (``roi.mask``, ``pMapN``). Standard split: frames 1-800 train,
801-2000 test. Works on a partial download too: the frames on disk define what is available.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from counting.core.errors import DatasetError
from counting.data.datasets.base import Annotated, CountingDataset, select_samples
from counting.data.datasets.matfiles import cell_items, field, load_mat, numbers, points
from counting.data.datasets.roi import check_roi_size, roi_mask_from
from counting.data.datasets.splits import parse_split

STANDARD_TRAIN_LAST = 800
GROUND_TRUTH = "mall_gt.mat"
PERSPECTIVE_ROI = "perspective_roi.mat"


def frame_path(root: Path, index: int) -> Path:
    return root / "frames" / f"seq_{index:06d}.jpg"


def read_mall(root: Path | str, split: str = "standard") -> CountingDataset:
    """Read the Mall dataset at ``root`` (the folder holding ``frames/`` and ``mall_gt.mat``)."""
    spec = parse_split(split)
    root = Path(root).expanduser().resolve()
    if not (root / "frames").is_dir():
        raise DatasetError(f"{root / 'frames'}: folder not found (expected the Mall frames/ folder)")
    entries = _annotations(root)
    samples = select_samples(entries, spec, source=root / GROUND_TRUTH, sequence=True)
    roi_mask, perspective = _roi_and_perspective(root)
    if roi_mask is not None:
        check_roi_size(roi_mask, samples[0].path, root / PERSPECTIVE_ROI)
    return CountingDataset(
        name="mall",
        root=root,
        samples=samples,
        roi_mask=roi_mask,
        class_names=None,
        perspective_map=perspective,
        split=spec.text,
    )


def _annotations(root: Path) -> list[Annotated]:
    path = root / GROUND_TRUTH
    contents = load_mat(path, ("frame", "count"))
    frames = cell_items(contents["frame"], path, "frame")
    counts = numbers(contents["count"], path, "count")
    if len(frames) != len(counts):
        raise DatasetError(f"{path}: 'frame' has {len(frames)} entries but 'count' has {len(counts)}")
    entries = []
    for number, (frame, count) in enumerate(zip(frames, counts, strict=True), start=1):
        dots = points(field(frame, "loc", path, f"frame{{{number}}}"), path, f"frame{{{number}}}.loc")
        if len(dots) != count:
            raise DatasetError(f"{path}: frame {number} has {len(dots)} head points but count {count:g}")
        entries.append(
            Annotated(
                index=number,
                path=frame_path(root, number),
                count=float(count),
                dots=dots,
                standard_split="train" if number <= STANDARD_TRAIN_LAST else "test",
            )
        )
    return entries


def _roi_and_perspective(root: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    path = root / PERSPECTIVE_ROI
    if not path.exists():
        # The ROI is a refinement; Mall counts are defined over the whole frame.
        return None, None
    contents = load_mat(path, ("roi",), optional=("pMapN",))
    mask = roi_mask_from(field(contents["roi"], "mask", path, "roi"), path)
    if "pMapN" not in contents:
        return mask, None
    perspective = np.asarray(contents["pMapN"], dtype=float)
    if perspective.shape != mask.shape:
        raise DatasetError(f"{path}: pMapN is {perspective.shape} but roi.mask is {mask.shape}")
    return mask, perspective
