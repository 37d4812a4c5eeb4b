"""A density map drawn over its frame: OpenCV's colormap, blended where there are people."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

__all__ = ["PICTURE_TOP_FLOOR", "density_heatmap_png", "overlay_density", "picture_top"]

# Opacity of the heat map where the density is at its display maximum; fades to 0 with it,
# so empty floor keeps its own colours.
_ALPHA = 0.6

# The lowest top of a picture drawn on its own scale, in people per map cell: about the densest
# cell of one person counted on their own (the crowd model's peaks on the faces of coco-voc20
# photos are 0.1-0.2 people). Below it a picture's own maximum would paint a few hundredths of a
# person as red as a crowd.
PICTURE_TOP_FLOOR = 0.1


def overlay_density(image: np.ndarray, density: np.ndarray, vmax: float | None = None) -> np.ndarray:
    """``image`` (H, W, 3) uint8 BGR (OpenCV's order) with ``density`` (h, w) over it.

    The map is resized to the frame (bilinear) and coloured with ``COLORMAP_JET`` from 0 to
    ``vmax`` people per map cell (default: the map's own maximum); returns a new array.
    """
    picture = np.asarray(image)
    if picture.ndim != 3 or picture.shape[2] != 3 or picture.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {picture.dtype} {picture.shape}")
    height, width = picture.shape[:2]
    values = np.clip(np.asarray(density, dtype=np.float32), 0.0, None)
    top = float(vmax) if vmax else float(values.max())
    level = values / top if top > 0 else np.zeros_like(values)
    level = cv2.resize(np.clip(level, 0.0, 1.0), (width, height), interpolation=cv2.INTER_LINEAR)
    colours = cv2.applyColorMap((level * 255).astype(np.uint8), cv2.COLORMAP_JET)
    weight = (_ALPHA * level)[:, :, None]
    return (picture * (1.0 - weight) + colours * weight).round().astype(np.uint8)


def picture_top(density: np.ndarray, model_top: float | None) -> float:
    """The heat map's top for a picture drawn on its own: its densest cell, at least
    :data:`PICTURE_TOP_FLOOR` and at most the model's top (``display_max``: the 99.9th percentile
    of its training targets, where a dense crowd turns red).

    The model's top keeps a video's frames on one scale. On a photo of a few people the crowd
    model's top (1.4 people a cell, set by ShanghaiTech A) left their faces at a tenth of it,
    nearly invisible, so a miscount could not be seen for what it was (a brick wall counted as
    a distant crowd).
    """
    own = float(np.clip(np.asarray(density, dtype=np.float64), 0.0, None).max(initial=0.0))
    top = max(own, PICTURE_TOP_FLOOR)
    return min(top, float(model_top)) if model_top else top


def density_heatmap_png(model: Any, image_path: str | Path, out_path: str | Path) -> Path:
    """Count one image with a density-head model and write its heat map as a PNG (frame size),
    on the picture's own scale (:func:`picture_top`)."""
    from counting.core.files import atomic_write_bytes
    from counting.data.imaging import load_image

    rgb = np.asarray(load_image(image_path))
    prepared = model.prepare_image(rgb, source=str(image_path))
    density = model.density_maps([prepared])[0]
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    drawn = overlay_density(bgr, density, picture_top(density, model.density_head.settings.get("display_max")))
    ok, encoded = cv2.imencode(".png", drawn)
    if not ok:
        raise ValueError(f"{out_path}: could not encode the heat map")
    target = Path(out_path)
    atomic_write_bytes(target, encoded.tobytes())
    return target
