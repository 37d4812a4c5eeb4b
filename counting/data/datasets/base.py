"""The dataset types every reader returns, and the split selection they share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import DatasetError
from counting.data.datasets.splits import SPLITS, SplitSpec, random_labels


@dataclass(frozen=True, eq=False)
class Sample:
    """One image or frame with its ground truth.

    ``count`` is a float, or a (K,) float array of per-class counts (VOC, multi-column CSVs).
    ``dots`` are (k, 2) x, y pixel coordinates as stored in the annotation (head positions; VOC:
    box centres of the counted objects), or None where the dataset has none. They are kept as
    published, so a few may lie outside the image (ShanghaiTech B has such points; they still
    count). UCSD's dots cover the whole frame while its count covers the ROI only.
    ``dot_labels`` gives the class index of each dot for multi-class datasets. ``index`` is the
    1-based frame / image number the range splits refer to.
    """

    path: Path
    count: float | np.ndarray
    split: str
    dots: np.ndarray | None = None
    index: int = 0
    dot_labels: np.ndarray | None = None


@dataclass(eq=False)
class CountingDataset:
    """The samples of one dataset under one split, with its ROI and class names."""

    name: str
    root: Path
    samples: list[Sample]
    roi_mask: np.ndarray | None = None
    class_names: list[str] | None = None
    # The perspective map, same (H, W) as the frames: Mall's pMapN, UCSD's dmap.pmapxy; None elsewhere.
    perspective_map: np.ndarray | None = None
    split: str = "standard"

    def __len__(self) -> int:
        return len(self.samples)

    def __repr__(self) -> str:
        # The default would print every sample and the whole ROI mask.
        parts = ", ".join(f"{part}={int((self.splits == part).sum())}" for part in SPLITS)
        return f"CountingDataset(name={self.name!r}, root='{self.root}', split={self.split!r}, {parts})"

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)

    def subset(self, split: str) -> CountingDataset:
        """The samples of one split ("train" or "test"); may be empty."""
        if split not in SPLITS:
            raise DatasetError(f"{self.name}: unknown split part {split!r}; use 'train' or 'test'")
        return replace(self, samples=[sample for sample in self.samples if sample.split == split])

    @property
    def paths(self) -> list[Path]:
        return [sample.path for sample in self.samples]

    @property
    def counts(self) -> np.ndarray:
        """(n,) floats, or (n, K) for per-class counts."""
        width = len(self.class_names) if self.class_names else None
        if not self.samples:
            return np.zeros((0, width) if width else (0,))
        return np.array([sample.count for sample in self.samples], dtype=float)

    @property
    def indices(self) -> np.ndarray:
        return np.array([sample.index for sample in self.samples], dtype=int)

    @property
    def splits(self) -> np.ndarray:
        return np.array([sample.split for sample in self.samples], dtype=object)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary: samples and count range per split (totals over classes)."""
        totals = self.counts.sum(axis=1) if self.counts.ndim == 2 else self.counts
        splits = self.splits
        parts: dict[str, dict[str, Any]] = {}
        for part in SPLITS:
            chosen = totals[splits == part] if len(totals) else totals
            parts[part] = {
                "n": int(len(chosen)),
                "count_min": float(chosen.min()) if len(chosen) else None,
                "count_max": float(chosen.max()) if len(chosen) else None,
                "count_mean": round(float(chosen.mean()), 3) if len(chosen) else None,
            }
        return {
            "name": self.name,
            "root": str(self.root),
            "split": self.split,
            "n": len(self.samples),
            "classes": list(self.class_names) if self.class_names else None,
            "roi_mask": None if self.roi_mask is None else list(self.roi_mask.shape),
            "splits": parts,
        }


@dataclass(frozen=True, eq=False)
class Annotated:
    """A ground-truth entry before split selection; its image may not exist on disk."""

    index: int
    path: Path
    count: float | np.ndarray
    standard_split: str | None = None
    dots: np.ndarray | None = None
    dot_labels: np.ndarray | None = None
    # Frames of one group form a sequence that must have no holes (Mall: one; UCSD: per clip).
    group: int = 0


def select_samples(entries: list[Annotated], spec: SplitSpec, *, source: Path, sequence: bool) -> list[Sample]:
    """Apply a split to the annotated entries and check that the chosen images exist.

    Sequences (Mall, UCSD): with the standard or a random split, the frames on disk define what
    is available, so a partial download (Mall frames 1-800) works, but a frame missing between
    present ones is an error; with a range split every requested frame must be annotated and
    on disk. Image collections (VOC, ShanghaiTech, folder): every listed image must exist.
    """
    if not entries:
        raise DatasetError(f"{source}: no annotated images found")
    exists = np.array([entry.path.is_file() for entry in entries])
    indices = np.array([entry.index for entry in entries], dtype=int)

    if spec.kind == "ranges":
        _require_unique(indices, source)
        labels = spec.range_labels(indices)
        if sequence:
            _require_requested_annotated(indices, spec, source)
        chosen = labels != ""
        _require_present(entries, exists, chosen)
        if not chosen.any():
            raise DatasetError(
                f"{source}: split {spec.text!r} selects none of the annotated numbers ({indices.min()}-{indices.max()})"
            )
    else:
        if sequence:
            chosen = exists.copy()
            _require_no_holes(entries, exists, indices, source)
        else:
            chosen = np.ones(len(entries), dtype=bool)
            _require_present(entries, exists, chosen)
        if spec.kind == "standard":
            labels = np.array([entry.standard_split or "" for entry in entries], dtype=object)
            if not (labels[chosen] != "").any():
                raise DatasetError(
                    f"{source}: this dataset has no standard split here; use a range or 'random:FRACTION[:SEED]' split"
                )
            chosen &= labels != ""
        else:
            labels = np.full(len(entries), "", dtype=object)
            labels[chosen] = random_labels(int(chosen.sum()), spec.fraction, spec.seed)

    return [
        Sample(
            path=entry.path,
            count=entry.count,
            split=str(label),
            dots=entry.dots,
            index=entry.index,
            dot_labels=entry.dot_labels,
        )
        for entry, label, keep in zip(entries, labels, chosen, strict=True)
        if keep
    ]


def _require_unique(indices: np.ndarray, source: Path) -> None:
    values, counts = np.unique(indices, return_counts=True)
    if (counts > 1).any():
        raise DatasetError(
            f"{source}: image number {values[counts > 1][0]} occurs more than once (e.g. in both "
            "train_data and test_data); range splits need unique numbers, use a single part folder "
            "or 'random:FRACTION[:SEED]'"
        )


def _require_requested_annotated(indices: np.ndarray, spec: SplitSpec, source: Path) -> None:
    annotated = np.sort(indices)
    for ranges in spec.ranges.values():
        for low, high in ranges:
            inside = annotated[(annotated >= low) & (annotated <= high)]
            expected = low + np.arange(len(inside))
            gaps = np.flatnonzero(inside != expected)
            if gaps.size:
                absent = int(expected[gaps[0]])
            elif len(inside) < high - low + 1:
                absent = low + len(inside)
            else:
                continue
            raise DatasetError(
                f"{source}: frame {absent} has no ground truth (annotated frames: "
                f"{annotated.min()}-{annotated.max()}); adjust split {spec.text!r}"
            )


def _require_present(entries: list[Annotated], exists: np.ndarray, chosen: np.ndarray) -> None:
    missing = np.flatnonzero(chosen & ~exists)
    if missing.size:
        raise DatasetError(f"{entries[missing[0]].path}: image not found (it has ground truth)")


def _require_no_holes(entries: list[Annotated], exists: np.ndarray, indices: np.ndarray, source: Path) -> None:
    if not exists.any():
        raise DatasetError(
            f"{entries[0].path}: image not found (none of the {len(entries)} annotated frames under {source} exist)"
        )
    groups = np.array([entry.group for entry in entries])
    for group in np.unique(groups[exists]):
        members = np.flatnonzero(groups == group)
        last_present = indices[members][exists[members]].max()
        holes = members[~exists[members] & (indices[members] < last_present)]
        if holes.size:
            first = holes[np.argmin(indices[holes])]
            raise DatasetError(f"{entries[first].path}: frame not found, but later frames of the sequence are present")
