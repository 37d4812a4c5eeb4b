"""The general crowd model's data: four head-dot sets in one dataset, each with a fixed validation part.

``root`` is the folder holding the shared sets (``../shared/data``):

- ``shanghaitech-A-train/`` (300 dense photos, 33-3,139 people) and ``shanghaitech-B-train/``
  (400 street photos): validation part a seeded random quarter of each (``random:0.25:0``, the
  split the earlier ShanghaiTech B studies scored as their test part);
- ``mall-train/`` (frames 1-800 of one indoor camera): validation part frames 601-800, one
  contiguous block, because neighbouring frames are near copies of each other;
- ``coco-voc20/`` (559 everyday COCO photos, 0-14 people): the person boxes' centres are the head
  positions; validation part the same seeded random quarter as ``-d voc --split random:0.25:0``.
  COCO marks a region of many unlabelled people with one crowd box (flagged ``difficult`` in the
  VOC XML): such a photo's person count is unknown, so the 25 photos with a person crowd box are
  left out of both parts (``include_crowd_boxes=True`` keeps them, counting their labelled
  people only).

The validation part is the ``test`` part of the returned dataset; ``source_names`` gives each
sample's set. Sample indices are positions in the combined list (1-based), unique across sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from counting.core.errors import DatasetError
from counting.data.datasets.base import CountingDataset, Sample
from counting.data.datasets.mall import read_mall
from counting.data.datasets.shanghaitech import read_shanghaitech
from counting.data.datasets.voc import VOC_CLASSES, count_objects, read_voc

__all__ = ["CROWD_SETS", "CrowdDataset", "read_crowd"]

# Set name -> (folder under root, the split string that makes its validation part the "test" part).
CROWD_SETS: dict[str, tuple[str, str]] = {
    "shanghaitech-A": ("shanghaitech-A-train", "random:0.25:0"),
    "shanghaitech-B": ("shanghaitech-B-train", "random:0.25:0"),
    "mall": ("mall-train", "train=1-600,test=601-800"),
    "coco-voc20": ("coco-voc20", "random:0.25:0"),
}
_PERSON = VOC_CLASSES.index("person")


@dataclass(eq=False, repr=False)  # CountingDataset's short repr, not every sample
class CrowdDataset(CountingDataset):
    """A CountingDataset whose samples come from several sets; ``sources`` names each one's set."""

    sources: dict[str, str] = field(default_factory=dict)  # str(sample.path) -> set name

    def source_names(self) -> np.ndarray:
        """(n,) set name of every sample, in sample order."""
        return np.array([self.sources[str(sample.path)] for sample in self.samples], dtype=object)

    def of_source(self, name: str) -> CrowdDataset:
        """The samples of one set (both parts)."""
        return replace(self, samples=[s for s in self.samples if self.sources[str(s.path)] == name])


def read_crowd(
    root: Path | str,
    split: str = "standard",
    sets: tuple[str, ...] | None = None,
    include_crowd_boxes: bool = False,
) -> CrowdDataset:
    """Read the shared sets under ``root`` into one head-dot dataset (``split``: ``standard`` only,
    the fixed validation parts above). ``sets``: a subset of :data:`CROWD_SETS` (default: all)."""
    root = Path(root).expanduser().resolve()
    if split != "standard":
        raise DatasetError(
            f"{root}: the crowd dataset has one split, 'standard' (fixed validation parts), not {split!r}"
        )
    names = tuple(CROWD_SETS) if sets is None else tuple(sets)
    unknown = [name for name in names if name not in CROWD_SETS]
    if unknown:
        raise DatasetError(f"{unknown[0]}: unknown crowd set (choose from {', '.join(CROWD_SETS)})")
    samples: list[Sample] = []
    sources: dict[str, str] = {}
    for name in names:
        folder, set_split = CROWD_SETS[name]
        for sample in _read_set(name, root / folder, set_split, include_crowd_boxes):
            samples.append(replace(sample, index=len(samples) + 1))
            sources[str(sample.path)] = name
    return CrowdDataset(
        name="crowd",
        root=root,
        samples=samples,
        roi_mask=None,
        class_names=None,
        perspective_map=None,
        split="standard",
        sources=sources,
    )


def _read_set(name: str, folder: Path, split: str, include_crowd_boxes: bool) -> list[Sample]:
    if not folder.is_dir():
        raise DatasetError(f"{folder}: folder not found (the crowd dataset needs the {name} set here)")
    if name.startswith("shanghaitech"):
        return read_shanghaitech(folder, split=split).samples
    if name == "mall":
        # The whole frame is counted (a general model has no ROI): every annotated head.
        return read_mall(folder, split=split).samples
    return _person_samples(read_voc(folder, split=split), include_crowd_boxes)


def _person_samples(voc: CountingDataset, include_crowd_boxes: bool) -> list[Sample]:
    """VOC samples -> person counts with the person boxes' centres as dots."""
    samples = []
    for sample in voc.samples:
        if not include_crowd_boxes:
            xml = voc.root / "Annotations" / f"{sample.path.stem}.xml"
            with_crowd, _, _ = count_objects(xml, include_difficult=True)
            if with_crowd[_PERSON] != sample.count[_PERSON]:
                continue  # a person crowd box: the true count is unknown
        people = sample.dot_labels == _PERSON
        dots = sample.dots[people]
        samples.append(replace(sample, count=float(len(dots)), dots=dots, dot_labels=None))
    return samples
