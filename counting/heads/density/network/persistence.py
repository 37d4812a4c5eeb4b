"""A NetworkDensityHead inside a model file: JSON with its arrays as base64 little-endian float64.

Same envelope as the other density heads (``kind`` ``counting-density-head``, ``head_kind``
``network``): readers that predate it refuse it in one line. Everything read is validated: the
array names and shapes must be the network's for the recorded width and depth, and the values
finite and bounded, so a tampered file is one line, never a NaN count or a torch traceback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from counting.heads.density.network.head import NetworkDensityHead, network_shapes
from counting.heads.density.network.module import LOWER_TAP, NETWORK_STRIDE
from counting.heads.density.sections import DensityHeadError, checked_settings, decode_array, encode_array

__all__ = ["network_head_from_document", "network_head_to_document"]

KIND = "counting-density-head"
FORMAT_VERSION = 1
_MAX_WIDTH = 512
_MAX_DEPTH = 8
_MAX_GRID = 64
# Trained weights, batch-norm statistics and the decoder's standardisation are all far below this.
_MAGNITUDE = 1e6


def network_head_to_document(head: NetworkDensityHead) -> dict[str, Any]:
    """The head as a JSON-ready dict for a model file."""
    return {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "head_kind": "network",
        "layers": list(head.layers),
        "stride": int(head.stride),
        "width": int(head.width),
        "depth": int(head.depth),
        "channels": int(head.n_channels),
        "settings": head.settings,
        "arrays": {name: encode_array(value) for name, value in head.arrays.items()},
    }


def network_head_from_document(document: Any, source: str) -> NetworkDensityHead:
    """Inverse of :func:`network_head_to_document`, validated (module docstring)."""

    def fail(problem: str) -> DensityHeadError:
        return DensityHeadError(f"{source}: network density head: {problem}")

    if not isinstance(document, dict) or document.get("kind") != KIND or document.get("head_kind") != "network":
        raise fail("not a network density head")
    version = document.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise fail(f"format version {version!r} is not one this version reads ({FORMAT_VERSION})")
    if document.get("layers") != [LOWER_TAP] or document.get("stride") != NETWORK_STRIDE:
        raise fail(f"layers must be [{LOWER_TAP!r}] at stride {NETWORK_STRIDE}")
    width = _integer(document, "width", _MAX_WIDTH, fail)
    depth = _integer(document, "depth", _MAX_DEPTH, fail)
    channels = _integer(document, "channels", 10_000, fail)
    settings = checked_settings(document, fail, _MAX_GRID, display_max=True)
    entries = document.get("arrays")
    shapes = network_shapes(width, depth)
    if not isinstance(entries, dict) or set(entries) != set(shapes):
        names = set(entries) if isinstance(entries, dict) else set()
        missing, extra = sorted(set(shapes) - names), sorted(names - set(shapes))
        raise fail(
            f"arrays do not match a network of width {width}, depth {depth} (missing {missing[:2]}, unexpected {extra[:2]})"
        )
    arrays: dict[str, np.ndarray] = {}
    for name, entry in entries.items():
        value = decode_array(name, entry, fail)
        if value.shape != shapes[name]:
            raise fail(f"array {name!r} has shape {value.shape}, expected {shapes[name]}")
        if not np.all(np.isfinite(value)) or np.any(np.abs(value) > _MAGNITUDE):
            raise fail(f"array {name!r} must hold finite floats within {_MAGNITUDE:g} (file edited or corrupt)")
        arrays[name] = value.astype(np.float32)
    if np.any(arrays["decoder.0.scale"] <= 0):
        raise fail("the decoder's standardisation scale must be positive")
    if channels != _block4_channels(shapes):
        raise fail(f"channels {channels} is not block 4's")
    return NetworkDensityHead(arrays, width, depth, np.zeros(channels), settings)


def _block4_channels(shapes: dict[str, tuple[int, ...]]) -> int:
    """Block 4's channels: the input side of block 5's expansion convolution."""
    return int(shapes["upper.0._expand_conv.weight"][1])


def _integer(document: dict[str, Any], key: str, most: int, fail: Any) -> int:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise fail(f"{key} must be a whole number from 1 to {most}, got {value!r:.40}")
    return value
