"""A density map drawn over its frame: OpenCV's colormap, blended where there are people."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

__all__ = ["density_heatmap_png", "overlay_density"]

# Opacity of the heat map where the density is at its display maximum; fades to 0 with it,
# so empty floor keeps its own colours.
_ALPHA = 0.6


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


def density_heatmap_png(model: Any, image_path: str | Path, out_path: str | Path) -> Path:
    """Count one image with a density-head model and write its heat map as a PNG (frame size)."""
    from counting.core.files import atomic_write_bytes
    from counting.data.imaging import load_image

    rgb = np.asarray(load_image(image_path))
    prepared = model.prepare_image(rgb, source=str(image_path))
    density = model.density_maps([prepared])[0]
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    drawn = overlay_density(bgr, density, model.density_head.settings.get("display_max"))
    ok, encoded = cv2.imencode(".png", drawn)
    if not ok:
        raise ValueError(f"{out_path}: could not encode the heat map")
    target = Path(out_path)
    atomic_write_bytes(target, encoded.tobytes())
    return target
