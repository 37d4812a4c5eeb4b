"""One-file model format: a NumPy ``.npz`` of arrays plus one JSON string entry, never pickle.

This module only reads and writes files; what goes into them is the estimator's state
(``AGPRegressor.get_state`` / ``AGPRegressor.from_state``), so it never touches an estimator.

Arrays: ``centers`` (input units), ``centers_standardised``, ``center_targets`` (residual),
``alpha``, ``x_mean``, ``x_scale``, ``y_mean``, ``mean_coef``, ``validation_indices`` and one
``param__NAME`` per kernel parameter.  The ``metadata`` entry is a JSON document:

    {"format": "agp-model", "format_version": 3, "kernel": "univariate",
     "hyper_parameters": {...AGPRegressor.get_params() that JSON can hold...},
     "n_features_in": 1000, "n_outputs": 1, "y_ndim": 1,
     "standardisation": {"x": "per-dimension mean/std of the non-validation rows", "y": "mean function ..."},
     "lengthscale": ..., "noise": ..., "mean_penalty": ..., "best_epoch": ..., "history": {...},
     "user_metadata": {...the dict given to save()...}}

Version 2 added the mean function (``mean_coef``, ``mean_penalty``, hyper-parameter ``mean``).
Version 3 renamed the hyper-parameter ``n_validation`` to ``validation_fraction``, added
``mean="zero"`` and ``warmup_steps``, and made ``kernel="multivariate"`` the full kernel (it was
``diagonal``).  Version 4 added the tree mean (``mean="trees"``, arrays ``mean_tree_NAME``);
a model without trees is still written as version 3.  Versions 1 to 3 still load
(``AGPRegressor.from_state`` maps them); older readers refuse newer files by their version
number instead of misreading them.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

FORMAT_NAME = "agp-model"
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
PARAM_PREFIX = "param__"


# What reading a damaged .npy/.npz raises: NumPy parses each member's header with ast and tokenize,
# so a tampered header raises their SyntaxError or TokenError, not a ValueError.
NPY_READ_ERRORS = (ValueError, OSError, zipfile.BadZipFile, EOFError, SyntaxError, TokenError)


def npy_problem(error: BaseException) -> str:
    """One line for an error of :data:`NPY_READ_ERRORS` (never Python internals such as ``<ast.Call ...>``)."""
    text = str(error).splitlines()[0] if str(error) else ""
    unreadable = "<ast." in text or text.startswith("Cannot parse header")  # NumPy quotes the raw bytes
    if isinstance(error, (SyntaxError, TokenError)) or unreadable or not text:
        return "an array header is damaged"
    return text


def _json_default(value: Any) -> Any:
    # NumPy scalars are common in metric dicts; they come back as the equal Python number.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _dumps(document: dict) -> str:
    try:
        return json.dumps(document, default=_json_default)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"metadata must be JSON-serialisable (dicts, lists, numbers, strings, None): {error}"
        ) from None


def _check_user_metadata(metadata: Any) -> dict:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        # agp reports every bad input as ValueError (scikit-learn convention), types included.
        raise ValueError(f"metadata must be a dict, got {type(metadata).__name__}")  # noqa: TRY004

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    # json would silently turn the key into a string: no exact round trip.
                    raise ValueError(f"metadata keys must be strings, found {key!r} at {where}")  # noqa: TRY004
                walk(item, f"{where}.{key}")
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")

    walk(metadata, "metadata")
    return metadata


def write_model_file(
    path: str | Path,
    arrays: dict[str, np.ndarray],
    document: dict[str, Any],
    metadata: dict | None = None,
    format_version: int = FORMAT_VERSION,
) -> None:
    """Write a model state (``AGPRegressor.get_state()``) plus the caller's metadata to ``path``,
    as ``format_version`` (the estimator asks for the oldest version that holds the model).

    The file is written under a temporary name in the same folder and renamed, so an existing
    model is never left half-written.
    """
    user_metadata = _check_user_metadata(metadata)
    if format_version not in READABLE_VERSIONS:
        raise ValueError(f"cannot write {FORMAT_NAME} format version {format_version!r}")
    full = {"format": FORMAT_NAME, "format_version": format_version, **document, "user_metadata": user_metadata}
    target = Path(path)
    entries: dict[str, Any] = {"metadata": np.array(_dumps(full)), **arrays}
    if target.exists() and not target.is_file() and not target.is_dir():
        # A device or pipe (/dev/null, a FIFO) is written straight into: renaming onto it would
        # replace the node itself with a regular file.
        with open(target, "wb") as stream:
            np.savez_compressed(stream, **entries)
        return
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as stream:  # a handle keeps the exact name (np.savez would add .npz)
            np.savez_compressed(stream, **entries)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _fail(path: str | Path, problem: str) -> ValueError:
    return ValueError(f"{path}: {problem}")


def read_model_file(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any], int]:
    """The arrays, the JSON document and the format version of a model file.

    Raises ``ValueError("{path}: {problem}")`` for a missing file, a file that is not an npz, an
    npz without metadata, another format or an unsupported version.
    """
    if not Path(path).is_file():
        raise _fail(path, "no such file")
    # np.load would try to unpickle anything that is neither .npy nor .npz; check the container
    # first so a text or image file gets a plain answer.
    if not zipfile.is_zipfile(path):
        raise _fail(path, f"not an {FORMAT_NAME} file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except NPY_READ_ERRORS as error:
        raise _fail(
            path, f"not an {FORMAT_NAME} file (cannot read it as .npz without pickle: {npy_problem(error)})"
        ) from None
    if "metadata" not in arrays:
        raise _fail(path, f"not an {FORMAT_NAME} file (no metadata entry)")
    try:
        document = json.loads(str(arrays.pop("metadata")))
    except json.JSONDecodeError as error:
        raise _fail(path, f"metadata is not valid JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        found = document.get("format") if isinstance(document, dict) else None
        raise _fail(path, f"not an {FORMAT_NAME} file (format {found!r})")
    version = document.get("format_version")
    if version not in READABLE_VERSIONS:
        raise _fail(
            path,
            f"{FORMAT_NAME} format version {version!r} is not supported "
            f"(this agp reads versions {', '.join(map(str, READABLE_VERSIONS))})",
        )
    return arrays, document, int(version)
