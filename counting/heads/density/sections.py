"""The pieces every density-head section of a model file shares: base64 float64 arrays and the
checks of ``layers`` and ``settings``. One-line errors come from the caller's ``fail``, which
names the file and the head."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from counting.core.errors import ModelFileError

__all__ = ["DensityHeadError", "checked_layers", "checked_settings", "decode_array", "encode_array"]

Fail = Callable[[str], Exception]


class DensityHeadError(ModelFileError):
    """A density head file (or a model's head section) is missing, damaged or inconsistent."""


def encode_array(value: Any) -> dict[str, Any]:
    """``{"shape", "float64_base64"}``: the array as little-endian float64, JSON-ready."""
    array = np.asarray(value, dtype="<f8")
    return {"shape": list(array.shape), "float64_base64": base64.b64encode(array.tobytes()).decode()}


def decode_array(name: str, entry: Any, fail: Fail) -> np.ndarray:
    """Inverse of :func:`encode_array`; a damaged entry is ``fail("array NAME is damaged (...)")``."""
    try:
        shape = tuple(int(side) for side in entry["shape"])
        raw = base64.b64decode(entry["float64_base64"], validate=True)  # binascii.Error is a ValueError
        return np.frombuffer(raw, dtype="<f8").reshape(shape).astype(np.float64)
    except (KeyError, TypeError, ValueError) as error:
        raise fail(f"array {name!r} is damaged ({error})") from None


def checked_layers(document: Mapping[str, Any], fail: Fail) -> list[str]:
    layers = document.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(layer, str) and layer for layer in layers):
        raise fail("layers must be a non-empty list of layer names")
    return layers


def checked_settings(document: Mapping[str, Any], fail: Fail, max_grid: int, *, display_max: bool) -> dict:
    """The ``settings`` mapping with its ``grid`` (and, if ``display_max``, its heat-map top) checked."""
    settings = document.get("settings", {})
    if not isinstance(settings, dict):
        raise fail("settings must be a mapping")
    grid = settings.get("grid")
    if grid is not None and (
        not isinstance(grid, list)
        or len(grid) != 2
        or not all(isinstance(side, int) and not isinstance(side, bool) and 1 <= side <= max_grid for side in grid)
    ):
        raise fail(f"settings.grid must be [rows, cols] from 1 to {max_grid}, got {grid!r:.60}")
    top = settings.get("display_max") if display_max else None
    if top is not None and (isinstance(top, bool) or not isinstance(top, (int, float)) or not 0 <= top < np.inf):
        raise fail(f"settings.display_max must be a number from 0, got {top!r:.60}")
    return settings
