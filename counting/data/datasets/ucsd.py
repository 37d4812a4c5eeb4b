"""UCSD pedestrian (Chan, Liang & Vasconcelos, CVPR 2008): 2000 frames of a campus walkway.

Layout (``root`` holds both folders; ``root`` may also point at either of them):
  vidf/vidf1_33_00X.y/vidf1_33_00X_fNNN.png
      158x238 grayscale frames, 200 per clip, X = 0..9
  vidf-cvpr/vidf1_33_00X_count_roi_mainwalkway.mat
      ``count``: 1x2 cell of per-direction per-frame counts; the frame's count is their sum
  vidf-cvpr/vidf1_33_roi_mainwalkway.mat
      ``roi.mask`` (158x238)
  vidf-cvpr/vidf1_33_00X_frame_full.mat
      ``frame{i}.loc`` head points over the whole frame (people outside the ROI too)
  vidf-cvpr/vidf1_33_dmap3.mat
      ``dmap.pmapxy`` (158x238): the perspective map, a per-pixel area weight that is larger where
      people are far (about 7.5 at the top row, 0.8 at the bottom); read as ``perspective_map``
      like Mall's ``pMapN`` (optional, as the ROI and the head points are)
Frames are numbered globally over the clips: frame f of clip X is X*200 + f. Standard split:
frames 601-1400 train, the other 1200 test.

The real release stores the per-direction counts as uint8 1x200 rows (with a ``dirs`` cell
naming them 'l' and 'r'), ``roi`` with ``xi``/``yi`` polygon fields beside ``mask`` (uint8), and
each ``frame{i}`` as a struct with ``loc`` (k x 3: x, y, frame number), ``id``, ``ldir`` and
``tdir``; ``loc`` is in MATLAB pixel coordinates (pixel centres at 1, 2, ...), as published.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from counting.core.errors import DatasetError
from counting.data.datasets.base import Annotated, CountingDataset, select_samples
from counting.data.datasets.matfiles import cell_items, field, load_mat, numbers, points
from counting.data.datasets.roi import check_roi_size, roi_mask_from
from counting.data.datasets.splits import parse_split

FRAMES_PER_CLIP = 200
STANDARD_TRAIN = (601, 1400)
FRAMES = "vidf"
ANNOTATIONS = "vidf-cvpr"
ROI_FILE = "vidf1_33_roi_mainwalkway.mat"
PERSPECTIVE_FILE = "vidf1_33_dmap3.mat"
_COUNT_FILE = re.compile(r"^vidf1_33_(\d{3})_count_roi_mainwalkway\.mat$")
_FRAME_FOLDER = re.compile(r"^vidf1_33_(\d{3})\.y$")


def clip_name(clip: int) -> str:
    return f"vidf1_33_{clip:03d}"


def frame_path(root: Path, clip: int, frame: int) -> Path:
    """``frame`` is 1-based within the clip."""
    return root / FRAMES / f"{clip_name(clip)}.y" / f"{clip_name(clip)}_f{frame:03d}.png"


def count_file(root: Path, clip: int) -> Path:
    return root / ANNOTATIONS / f"{clip_name(clip)}_count_roi_mainwalkway.mat"


def dots_file(root: Path, clip: int) -> Path:
    return root / ANNOTATIONS / f"{clip_name(clip)}_frame_full.mat"


def read_ucsd(root: Path | str, split: str = "standard") -> CountingDataset:
    """Read the UCSD pedestrian dataset (vidf/ frames + vidf-cvpr/ annotations)."""
    spec = parse_split(split)
    root = _dataset_root(Path(root).expanduser().resolve())
    entries = [entry for clip in _clips(root) for entry in _clip_annotations(root, clip)]
    samples = select_samples(entries, spec, source=root / ANNOTATIONS, sequence=True)
    roi_mask = None
    if (root / ANNOTATIONS / ROI_FILE).exists():
        roi_path = root / ANNOTATIONS / ROI_FILE
        roi_mask = roi_mask_from(field(load_mat(roi_path, ("roi",))["roi"], "mask", roi_path, "roi"), roi_path)
        check_roi_size(roi_mask, samples[0].path, roi_path)
    perspective = _perspective_map(root, samples[0].path)
    return CountingDataset(
        name="ucsd",
        root=root,
        samples=samples,
        roi_mask=roi_mask,
        class_names=None,
        perspective_map=perspective,
        split=spec.text,
    )


def _perspective_map(root: Path, first_frame: Path) -> np.ndarray | None:
    """``dmap.pmapxy`` of ``vidf1_33_dmap3.mat``, checked against the frames; None without the file."""
    path = root / ANNOTATIONS / PERSPECTIVE_FILE
    if not path.exists():
        return None
    values = np.asarray(field(load_mat(path, ("dmap",))["dmap"], "pmapxy", path, "dmap"))
    if values.ndim != 2 or values.dtype == object or not np.issubdtype(values.dtype, np.number):
        raise DatasetError(f"{path}: dmap.pmapxy is not a 2-D numeric matrix")
    values = values.astype(float)
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise DatasetError(f"{path}: dmap.pmapxy has values that are not finite and positive")
    check_roi_size(values, first_frame, path, what="dmap.pmapxy")
    return values


def _dataset_root(root: Path) -> Path:
    for candidate in (root, root.parent):
        if (candidate / ANNOTATIONS).is_dir() and (candidate / FRAMES).is_dir():
            return candidate
    if root.name in (FRAMES, ANNOTATIONS):
        root = root.parent
    missing = ANNOTATIONS if not (root / ANNOTATIONS).is_dir() else FRAMES
    raise DatasetError(f"{root / missing}: folder not found (UCSD needs vidf/ and vidf-cvpr/)")


def _clips(root: Path) -> list[int]:
    annotated = {int(m.group(1)) for p in (root / ANNOTATIONS).iterdir() if (m := _COUNT_FILE.match(p.name))}
    with_frames = {int(m.group(1)) for p in (root / FRAMES).iterdir() if (m := _FRAME_FOLDER.match(p.name))}
    orphans = sorted(with_frames - annotated)
    if orphans:
        raise DatasetError(f"{count_file(root, orphans[0])}: file not found (clip {clip_name(orphans[0])} has frames)")
    if not annotated:
        raise DatasetError(f"{root / ANNOTATIONS}: no vidf1_33_00X_count_roi_mainwalkway.mat files found")
    return sorted(annotated)


def _clip_annotations(root: Path, clip: int) -> list[Annotated]:
    path = count_file(root, clip)
    directions = cell_items(load_mat(path, ("count",))["count"], path, "count")
    per_direction = [numbers(item, path, f"count{{{i + 1}}}") for i, item in enumerate(directions)]
    if len({len(counts) for counts in per_direction}) != 1:
        raise DatasetError(
            f"{path}: the count{{}} cells have different lengths {[len(counts) for counts in per_direction]}"
        )
    counts = np.sum(per_direction, axis=0)
    if len(counts) > FRAMES_PER_CLIP:
        raise DatasetError(f"{path}: {len(counts)} frames, more than the {FRAMES_PER_CLIP} of a UCSD clip")
    dots = _clip_dots(root, clip, len(counts))
    entries = []
    for frame, count in enumerate(counts, start=1):
        number = clip * FRAMES_PER_CLIP + frame
        inside = STANDARD_TRAIN[0] <= number <= STANDARD_TRAIN[1]
        entries.append(
            Annotated(
                index=number,
                path=frame_path(root, clip, frame),
                count=float(count),
                standard_split="train" if inside else "test",
                dots=None if dots is None else dots[frame - 1],
                group=clip,
            )
        )
    return entries


def _clip_dots(root: Path, clip: int, n_frames: int) -> list[np.ndarray] | None:
    path = dots_file(root, clip)
    if not path.exists():
        return None  # head points are optional: counts come from the count file
    frames = cell_items(load_mat(path, ("frame",))["frame"], path, "frame")
    if len(frames) != n_frames:
        raise DatasetError(f"{path}: {len(frames)} frames but the count file has {n_frames}")
    return [
        points(field(frame, "loc", path, f"frame{{{i}}}"), path, f"frame{{{i}}}.loc")
        for i, frame in enumerate(frames, start=1)
    ]
