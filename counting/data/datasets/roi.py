"""ROI masks from dataset files, checked against the frames they belong to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from counting.core.errors import DatasetError


def roi_mask_from(value: Any, path: Path) -> np.ndarray:
    """A (H, W) bool mask from a MATLAB numeric or logical matrix."""
    mask = np.asarray(value)
    if mask.ndim != 2 or mask.dtype == object or mask.dtype.names is not None:
        raise DatasetError(f"{path}: roi.mask is not a 2-D matrix")
    mask = mask != 0
    if not mask.any():
        raise DatasetError(f"{path}: roi.mask is empty (no pixel inside the region of interest)")
    return mask


def check_roi_size(mask: np.ndarray, image_path: Path, roi_path: Path, what: str = "roi.mask") -> None:
    """The mask (or another per-pixel map, named by ``what``) must cover the frames pixel for pixel."""
    try:
        with Image.open(image_path) as image:  # reads the header only
            width, height = image.size
    except Exception:
        # An unreadable frame is reported by the image loader, which names it and the problem.
        return
    if mask.shape != (height, width):
        raise DatasetError(
            f"{roi_path}: {what} is {mask.shape[1]}x{mask.shape[0]} (WxH) but frame "
            f"{image_path.name} is {width}x{height}"
        )
