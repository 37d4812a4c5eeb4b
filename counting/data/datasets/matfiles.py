"""Reading the MATLAB files the counting datasets ship, with one-line errors naming the file.

``scipy.io.loadmat`` (without ``squeeze_me``) keeps MATLAB's shapes: a cell is an object array,
a struct a structured array, and every scalar or 1x1 container is wrapped in a 1x1 array. The
helpers below unwrap that nesting so the readers can say ``frame{i}.loc`` in one call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.io

from counting.core.errors import DatasetError


def load_mat(path: Path, variables: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """Load ``variables`` (and ``optional`` ones where present) from a MATLAB v5/v7 file.

    A missing file, a file that is not a .mat file, or a missing required variable raises
    DatasetError naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    try:
        contents = scipy.io.loadmat(str(path), variable_names=[*variables, *optional])
    except NotImplementedError as error:  # scipy's answer to v7.3 (HDF5) files
        raise DatasetError(
            f"{path}: MATLAB v7.3 (HDF5) files are not supported; re-save it with save(..., '-v7')"
        ) from error
    except Exception as error:  # scipy raises ValueError, MatReadError, OSError, ... on junk
        raise DatasetError(f"{path}: not a readable MATLAB .mat file ({_first_line(error)})") from error
    missing = [name for name in variables if name not in contents]
    if missing:
        raise DatasetError(f"{path}: variable '{missing[0]}' not found in this .mat file")
    return {name: contents[name] for name in (*variables, *optional) if name in contents}


def unwrap(value: Any) -> Any:
    """Strip MATLAB's 1x1 cell / struct wrapping down to the array or struct record inside."""
    while (
        isinstance(value, np.ndarray) and value.size == 1 and (value.dtype == object or value.dtype.names is not None)
    ):
        value = value.reshape(-1)[0]
    return value


def cell_items(value: Any, path: Path, what: str) -> list[Any]:
    """The elements of a MATLAB cell array (or struct array) in MATLAB's linear order."""
    value = unwrap(value) if _is_wrapped_cell(value) else value
    if not isinstance(value, np.ndarray) or (value.dtype != object and value.dtype.names is None):
        raise DatasetError(f"{path}: {what} is not a MATLAB cell array")
    return list(value.reshape(-1, order="F"))


def field(value: Any, name: str, path: Path, what: str) -> Any:
    """``value.name`` of a MATLAB struct, unwrapped."""
    record = unwrap(value)
    names = getattr(getattr(record, "dtype", None), "names", None)
    if not names or name not in names:
        raise DatasetError(f"{path}: {what} has no field '{name}'")
    return unwrap(record[name])


def points(value: Any, path: Path, what: str) -> np.ndarray:
    """A (k, 2) float array of x, y coordinates from a MATLAB (k, >=2) matrix (empty -> (0, 2))."""
    array = np.asarray(unwrap(value))
    if array.size == 0:
        return np.zeros((0, 2))
    if array.dtype == object or array.ndim != 2 or array.shape[1] < 2:
        raise DatasetError(f"{path}: {what} is not a (k, 2) matrix of x, y points")
    # UCSD's loc has a third column; only x, y are positions in the image.
    return np.ascontiguousarray(array[:, :2], dtype=float)


def numbers(value: Any, path: Path, what: str) -> np.ndarray:
    """A flat float vector from a MATLAB numeric array of any orientation."""
    array = np.asarray(unwrap(value))
    if array.dtype == object or array.dtype.names is not None or not np.issubdtype(array.dtype, np.number):
        raise DatasetError(f"{path}: {what} is not a numeric array")
    return array.astype(float).reshape(-1, order="F")


def _is_wrapped_cell(value: Any) -> bool:
    # A 1x1 cell holding another cell array, as ``image_info{1}`` in ShanghaiTech.
    return (
        isinstance(value, np.ndarray)
        and value.dtype == object
        and value.size == 1
        and isinstance(value.reshape(-1)[0], np.ndarray)
        and value.reshape(-1)[0].dtype == object
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
