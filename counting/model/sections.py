"""Pieces of a model file that are not a stage's own: the ROI mask's run-length code, the count
offset's record (what the regressor's output is added to), and the checks before it is opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import ModelFileError

__all__ = ["COUNT_OFFSETS", "check_offset_record", "check_readable", "decode_mask", "encode_mask"]

# What the regressor's output is added to: nothing, or the density head's whole-ROI sum (the
# regressor then learns the count minus the head's sum: a correction of the head that, away
# from its training rows, leaves the head's count alone; docs/density.md).
COUNT_OFFSETS = ("none", "head_sum")


def check_offset_record(metadata: dict[str, Any], version: int, source: str) -> None:
    """The count offset's record, beyond its values (checked by the model): a file that lost
    or changed part of it would count silently wrong (the regressor learnt a correction)."""
    if "count_offset" not in metadata and version >= 3:
        raise ModelFileError(f"{source}: format version {version} records a count_offset, this file has none")
    offset = metadata.get("count_offset", "none")
    if not isinstance(offset, str) or offset not in COUNT_OFFSETS:
        return  # the model refuses it, saying why
    if offset != "none":
        if version < 3:
            raise ModelFileError(f"{source}: count offset {offset!r} needs format version 3, the file says {version}")
        if "correction_weight" not in metadata:
            raise ModelFileError(f"{source}: count offset {offset!r} without its correction_weight")
    training = metadata.get("training") or {}
    trained = training.get("count_offset", offset)
    if trained != offset:
        raise ModelFileError(
            f"{source}: count offset {offset!r:.40} differs from the one it was trained with ({trained!r:.40})"
        )


def encode_mask(mask: np.ndarray) -> dict[str, Any]:
    """Run-length code of a bool mask, small enough for the JSON metadata (ROIs are few runs)."""
    flat = np.asarray(mask, dtype=bool).ravel()
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    return {
        "shape": [int(side) for side in np.shape(mask)],
        "first": bool(flat[0]) if flat.size else False,
        "runs": np.diff(bounds).astype(int).tolist(),
    }


def decode_mask(code: dict[str, Any]) -> np.ndarray:
    """Inverse of :func:`encode_mask`."""
    runs = np.asarray(code["runs"], dtype=np.int64)
    first = bool(code["first"])
    values = np.where(np.arange(runs.size) % 2 == 0, first, not first)
    mask = np.repeat(values, runs)
    shape = tuple(int(side) for side in code["shape"])
    if mask.size != int(np.prod(shape)):
        raise ValueError(f"ROI mask runs cover {mask.size} pixels, shape {shape} needs {np.prod(shape)}")
    return mask.reshape(shape)


def check_readable(source: Path) -> None:
    """ModelFileError unless ``source`` is a regular file this process can open."""
    if source.is_dir():
        raise ModelFileError(f"{source}: is a folder, not a model file")
    if not source.exists():
        raise ModelFileError(f"{source}: model file not found")
    if not source.is_file():
        raise ModelFileError(f"{source}: not a regular file (a device, pipe or socket), not a model file")
    try:
        with open(source, "rb"):
            pass
    except PermissionError:
        raise ModelFileError(f"{source}: permission denied") from None
    except OSError as error:
        raise ModelFileError(f"{source}: cannot read the model file ({error.strerror or error})") from None
