"""Dataset readers: image/frame paths, counts, the split, and ROI and head dots where present.

ds = load_dataset("mall", root, split="standard")
ds.subset("train").paths, ds.subset("train").counts
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from counting.core.errors import DatasetError
from counting.data.datasets.base import CountingDataset, Sample
from counting.data.datasets.folder import read_folder
from counting.data.datasets.mall import read_mall
from counting.data.datasets.shanghaitech import read_shanghaitech
from counting.data.datasets.splits import SPLIT_SYNTAX, SplitSpec, parse_split
from counting.data.datasets.ucsd import read_ucsd
from counting.data.datasets.voc import VOC_CLASSES, read_voc

# Same names and order as counting.core.defaults.DATASETS.
DATASETS: dict[str, Callable[..., CountingDataset]] = {
    "ucsd": read_ucsd,
    "voc": read_voc,
    "mall": read_mall,
    "shanghaitech": read_shanghaitech,
    "folder": read_folder,
}


def load_dataset(name: str, root: Path | str, split: str = "standard", **options: Any) -> CountingDataset:
    """Read dataset ``name`` from ``root`` under ``split``; reader options go in ``options``."""
    reader = DATASETS.get(name)
    if reader is None:
        raise DatasetError(f"{name}: unknown dataset; choose one of {', '.join(DATASETS)}")
    accepted = [p for p in inspect.signature(reader).parameters if p not in ("root", "split")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise DatasetError(f"{name}: unknown option '{unknown[0]}' (options: {', '.join(accepted) or 'none'})")
    if not Path(root).expanduser().exists():
        raise DatasetError(f"{root}: folder not found")
    return reader(root, split=split, **options)


__all__ = [
    "DATASETS",
    "SPLIT_SYNTAX",
    "VOC_CLASSES",
    "CountingDataset",
    "Sample",
    "SplitSpec",
    "load_dataset",
    "parse_split",
]
