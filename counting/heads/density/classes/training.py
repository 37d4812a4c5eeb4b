"""The per-class density head inside ``counting train -d voc --density-head``.

Fits :class:`counting.heads.density.classes.head.ClassDensityHead` on the train photos' boxes and gives
the regressor its rows: each photo's 20 class sums (and each class's sums over the cells of
``--grid``), out of fold: summed by a head fitted without the photo's fold, so the AGP learns how
the head errs on photos it has not seen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from counting.core.errors import DatasetError
from counting.heads.density.classes.head import (
    annotation_path,
    class_density_targets,
    extract_class_maps,
    fit_class_head,
    read_boxes,
)

__all__ = ["DEFAULT_CLASS_LAYERS", "DEFAULT_SPREAD", "HEAD_FOLDS", "fit_class_head_descriptors"]

# Chosen on 5-fold validation inside the 419 train photos of random:0.25:0
# (scripts/voc_density_study.py, docs/voc.md).
DEFAULT_CLASS_LAYERS: tuple[str, ...] = ("final", "block14")
DEFAULT_SPREAD = "box"
HEAD_FOLDS = 5


def fit_class_head_descriptors(
    samples: Sequence[Any],
    dataset: Any,
    backbone: Any,
    prep: Any,
    grid: tuple[int, int] | None,
    *,
    seed: int,
    cache: Any = None,
    batch_size: int = 8,
    log: Callable[[str], None] | None = None,
    layers: Sequence[str] = DEFAULT_CLASS_LAYERS,
    spread: str = DEFAULT_SPREAD,
) -> tuple[Any, np.ndarray]:
    """``(head fitted on every photo, (n, classes * (1 + cells)) out-of-fold sums)``."""
    from counting.data.datasets.splits import cv_folds
    from counting.data.imaging import image_size

    classes = list(dataset.class_names)
    boxes = []
    for sample in samples:
        xml = annotation_path(sample.path)
        if not xml.is_file():
            raise DatasetError(f"{xml}: --density-head needs the photo's boxes (VOC Annotations/), not found")
        found, labels = read_boxes(xml, classes)
        if not np.array_equal(np.bincount(labels, minlength=len(classes)), np.asarray(sample.count, dtype=int)):
            raise DatasetError(f"{xml}: its boxes do not match the photo's counts (difficult objects included?)")
        boxes.append((found, labels))
    if log is not None:
        log(f"extracting {', '.join(layers)} maps of {len(samples)} photos (stride 32, cached)")
    maps = extract_class_maps([sample.path for sample in samples], backbone, prep, layers, cache, batch_size)
    targets = [
        class_density_targets(found, labels, image_size(sample.path), item.shape[1:], len(classes), spread)
        for sample, item, (found, labels) in zip(samples, maps, boxes, strict=True)
    ]
    fold_of = np.zeros(len(samples), dtype=int)
    for number, members in enumerate(cv_folds(np.arange(len(samples)), HEAD_FOLDS, False, seed)):
        fold_of[members] = number
    if log is not None:
        log(f"fitting the per-class density head ({len(classes)} classes, {spread} targets) on {len(samples)} photos")
    counts = np.asarray([sample.count for sample in samples], dtype=float)
    head, out_of_fold = fit_class_head(maps, targets, counts, layers, fold_of, grid)
    head.settings |= {"spread": spread, "stride": 32}
    if log is not None:
        whole = out_of_fold.reshape(len(samples), len(classes), -1)[:, :, 0]
        log(f"per-class density head: out-of-fold count MAE {np.abs(whole - counts).mean():.3f} per photo and class")
    return head, out_of_fold
