"""DensityHead files: one ``.npz`` of arrays plus a JSON ``metadata`` entry, never pickle.

The same state also travels inside a counting model's JSON metadata (:func:`head_to_document`),
with each array as base64 of its little-endian bytes, so one model file holds everything.
Everything read is validated: a damaged or foreign file is a one-line :class:`DensityHeadError`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from agp.persistence import NPY_READ_ERRORS, npy_problem
from counting.heads.density.ridge.head import HEAD_KINDS, DensityHead
from counting.heads.density.sections import (
    DensityHeadError,
    checked_layers,
    checked_settings,
    decode_array,
    encode_array,
)

__all__ = ["DensityHeadError", "head_from_document", "head_to_document", "load_head", "save_head"]

KIND = "counting-density-head"
FORMAT_VERSION = 1
_ARRAYS = ("x_mean", "x_scale", "coef", "projection", "phase")
_MAX_CHANNELS = 100_000
_MAX_RANDOM = 100_000
_MAX_GRID = 64  # cells per side of the head's grid


def _state(head: DensityHead) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays = {name: np.asarray(getattr(head, name), dtype=np.float64) for name in _ARRAYS}
    arrays = {name: value for name, value in arrays.items() if value.ndim and value.size}
    document = {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "head_kind": head.kind,
        "layers": list(head.layers),
        "intercept": float(head.intercept),
        "settings": head.settings,
    }
    return arrays, document


def _from_state(arrays: dict[str, np.ndarray], document: Any, source: str) -> DensityHead:
    def fail(problem: str) -> DensityHeadError:
        return DensityHeadError(f"{source}: {problem}")

    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise fail("not a density head (kind is not 'counting-density-head')")
    version = document.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise fail(f"density head format version {version!r} is not one this version reads ({FORMAT_VERSION})")
    kind = document.get("head_kind")
    if kind not in HEAD_KINDS:
        raise fail(f"head_kind {kind!r} is not one of {', '.join(HEAD_KINDS)}")
    layers = checked_layers(document, fail)
    intercept = document.get("intercept")
    if isinstance(intercept, bool) or not isinstance(intercept, (int, float)) or not np.isfinite(intercept):
        raise fail(f"intercept must be a finite number, got {intercept!r}")
    settings = checked_settings(document, fail, _MAX_GRID, display_max=True)
    for name, value in arrays.items():
        if value.dtype.kind != "f" or not np.all(np.isfinite(value)):
            raise fail(f"array {name!r} must hold finite floats")
    for name in ("x_mean", "x_scale", "coef"):
        if name not in arrays or arrays[name].ndim != 1:
            raise fail(f"array {name!r} is missing or not 1-D")
    channels = arrays["x_mean"].shape[0]
    if not 1 <= channels <= _MAX_CHANNELS or arrays["x_scale"].shape != (channels,):
        raise fail(f"x_mean has {channels} channels and x_scale shape {arrays['x_scale'].shape}: they must match")
    if np.any(arrays["x_scale"] <= 0):
        raise fail("x_scale must be positive")
    projection, phase = arrays.get("projection"), arrays.get("phase")
    if kind == "rff":
        if projection is None or phase is None or projection.ndim != 2 or projection.shape[0] != channels:
            raise fail(f"an rff head needs a ({channels}, R) projection and an (R,) phase")
        if not 1 <= projection.shape[1] <= _MAX_RANDOM or phase.shape != (projection.shape[1],):
            raise fail(f"projection {projection.shape} and phase {phase.shape} do not match")
    elif projection is not None or phase is not None:
        raise fail("a ridge head has no projection or phase")
    features = channels + (0 if projection is None else projection.shape[1])
    if arrays["coef"].shape != (features,):
        raise fail(f"coef has {arrays['coef'].shape[0]} entries but the head has {features} features")
    return DensityHead(
        layers=tuple(layers),
        kind=kind,
        x_mean=arrays["x_mean"],
        x_scale=arrays["x_scale"],
        coef=arrays["coef"],
        intercept=float(intercept),
        projection=projection,
        phase=phase,
        settings=settings,
    )


def save_head(head: DensityHead, path: str | Path) -> Path:
    """Write ``head`` to one ``.npz`` file, atomically."""
    from counting.core.files import atomic_write_bytes

    arrays, document = _state(head)
    buffer = io.BytesIO()
    np.savez(buffer, metadata=np.array(json.dumps(document)), **arrays)
    target = Path(path)
    atomic_write_bytes(target, buffer.getvalue())
    return target


def load_head(path: str | Path) -> DensityHead:
    """Read a head written by :func:`save_head`; anything else -> one-line DensityHeadError."""
    source = Path(path)
    if not source.is_file():
        raise DensityHeadError(f"{source}: density head file not found")
    try:
        with np.load(source, allow_pickle=False) as contents:
            arrays = {name: np.asarray(contents[name]) for name in contents.files}
    except NPY_READ_ERRORS as error:
        raise DensityHeadError(f"{source}: not a density head file ({npy_problem(error)})") from None
    if "metadata" not in arrays:
        raise DensityHeadError(f"{source}: not a density head file (no metadata entry)")
    try:
        document = json.loads(str(arrays.pop("metadata")))
    except json.JSONDecodeError as error:
        raise DensityHeadError(f"{source}: metadata is not valid JSON ({error.msg})") from None
    return _from_state(arrays, document, str(source))


def head_to_document(head: DensityHead) -> dict[str, Any]:
    """The head as a JSON-ready dict (arrays as base64 little-endian float64) for a model file."""
    if getattr(head, "kind", None) == "conv":
        from counting.heads.density.conv.persistence import conv_head_to_document

        return conv_head_to_document(head)  # type: ignore[arg-type]
    if getattr(head, "kind", None) == "network":
        from counting.heads.density.network.persistence import network_head_to_document

        return network_head_to_document(head)  # type: ignore[arg-type]
    arrays, document = _state(head)
    document["arrays"] = {name: encode_array(value) for name, value in arrays.items()}
    return document


def head_from_document(document: Any, source: str) -> DensityHead:
    """Inverse of :func:`head_to_document`, validated (errors name ``source``)."""
    if isinstance(document, dict) and document.get("head_kind") == "conv":
        from counting.heads.density.conv.persistence import conv_head_from_document

        return conv_head_from_document(document, source)  # type: ignore[return-value]
    if isinstance(document, dict) and document.get("head_kind") == "network":
        from counting.heads.density.network.persistence import network_head_from_document

        return network_head_from_document(document, source)  # type: ignore[return-value]
    if not isinstance(document, dict) or not isinstance(document.get("arrays"), dict):
        raise DensityHeadError(f"{source}: density head section has no arrays")
    arrays: dict[str, np.ndarray] = {}
    for name, entry in document["arrays"].items():
        if name not in _ARRAYS or not isinstance(entry, dict):
            raise DensityHeadError(f"{source}: density head has an unknown array {name!r}")
        arrays[name] = decode_array(name, entry, lambda problem: DensityHeadError(f"{source}: density head {problem}"))
    return _from_state(arrays, {key: value for key, value in document.items() if key != "arrays"}, source)
