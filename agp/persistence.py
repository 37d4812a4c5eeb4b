"""One-file model format: a NumPy ``.npz`` of arrays plus one JSON string entry, never pickle.

Arrays: ``centers`` (input units), ``centers_standardised``, ``center_targets`` (residual),
``alpha``, ``x_mean``, ``x_scale``, ``y_mean``, ``mean_coef``, ``validation_indices`` and one
``param__NAME`` per kernel parameter.  The ``metadata`` entry is a JSON document:

    {"format": "agp-model", "format_version": 2, "kernel": "univariate",
     "hyper_parameters": {...AGPRegressor.get_params() that JSON can hold...},
     "n_features_in": 1000, "n_outputs": 1, "y_ndim": 1,
     "standardisation": {"x": "per-dimension mean/std of the non-validation rows", "y": "mean function ..."},
     "lengthscale": ..., "noise": ..., "mean_penalty": ..., "best_epoch": ..., "history": {...},
     "user_metadata": {...the dict given to save()...}}

Version 2 added the mean function (``mean_coef``, ``mean_penalty``, hyper-parameter ``mean``).
Version 1 files still load, as the constant-mean models they are; readers of
version 1 refuse version 2 files by their version number instead of dropping the linear mean.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from agp.estimator import AGPRegressor

FORMAT_NAME = "agp-model"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
_PARAM_PREFIX = "param__"
# Hyper-parameters that are arrays or callables live elsewhere (arrays) or are not saved.
_ARRAY_HYPER_PARAMETERS = ("centers", "center_targets")
_UNSAVED_HYPER_PARAMETERS = ("callback",)


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


def save_model(model: AGPRegressor, path: str | Path, metadata: dict | None = None) -> None:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model, "alpha_")
    user_metadata = _check_user_metadata(metadata)
    hyper = {
        key: value
        for key, value in model.get_params(deep=False).items()
        if key not in _ARRAY_HYPER_PARAMETERS + _UNSAVED_HYPER_PARAMETERS
    }
    hyper["noise_grid"] = [float(v) for v in hyper["noise_grid"]]
    if not isinstance(hyper["random_state"], (int, np.integer)):
        hyper["random_state"] = None  # a RandomState object has no faithful JSON form
    if hyper["lengthscale_grid"] is not None:
        hyper["lengthscale_grid"] = [float(v) for v in hyper["lengthscale_grid"]]
    document = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "kernel": model._kernel_kind(),
        "hyper_parameters": hyper,
        "n_features_in": int(model.n_features_in_),
        "n_outputs": int(model.alpha_.shape[1]),
        "y_ndim": int(model._y_ndim),
        "standardisation": {
            "x": "per-dimension mean and std of the non-validation rows (arrays x_mean, x_scale)",
            "y": (
                "mean function subtracted: y_mean + standardised x @ mean_coef (mean_coef = 0 for the "
                "constant mean; a GCV ridge on the non-validation rows for the linear mean)"
            ),
        },
        "lengthscale": float(model.lengthscale_),
        "noise": float(model.noise_),
        "mean_penalty": model.mean_penalty_,
        "best_epoch": int(model.best_epoch_),
        "history": {key: [float(v) for v in values] for key, values in model.history_.items()},
        "user_metadata": user_metadata,
    }
    arrays = {
        "centers": model.centers_,
        "centers_standardised": model._centers_standardised,
        "center_targets": model._center_targets_centred,
        "alpha": model.alpha_,
        "x_mean": model.x_mean_,
        "x_scale": model.x_scale_,
        "y_mean": model.y_mean_,
        "mean_coef": model.mean_coef_,
        "validation_indices": model.validation_indices_,
        **{_PARAM_PREFIX + name: value for name, value in model.kernel_params_.items()},
    }
    with open(path, "wb") as handle:  # a handle keeps the exact name (np.savez would add .npz)
        np.savez_compressed(handle, metadata=np.array(_dumps(document)), **arrays)


def _fail(path: str | Path, problem: str) -> ValueError:
    return ValueError(f"{path}: {problem}")


def load_model(path: str | Path) -> AGPRegressor:
    from agp.estimator import AGPRegressor

    if not Path(path).is_file():
        raise _fail(path, "no such file")
    # np.load would try to unpickle anything that is neither .npy nor .npz; check the container
    # first so a text or image file gets a plain answer.
    if not zipfile.is_zipfile(path):
        raise _fail(path, f"not an {FORMAT_NAME} file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as error:
        raise _fail(path, f"not an {FORMAT_NAME} file (cannot read it as .npz without pickle: {error})") from None
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
    required = {"centers", "centers_standardised", "center_targets", "alpha", "x_mean", "x_scale", "y_mean"}
    if version >= 2:
        required.add("mean_coef")
    missing = required - set(arrays)
    if missing:
        raise _fail(path, f"incomplete {FORMAT_NAME} file (missing {', '.join(sorted(missing))})")

    hyper = dict(document["hyper_parameters"])
    # Version 1 predates the mean function: those models used the constant mean.
    hyper.setdefault("mean", "constant")
    hyper["noise_grid"] = tuple(hyper["noise_grid"])
    if hyper.get("lengthscale_grid") is not None:
        hyper["lengthscale_grid"] = tuple(hyper["lengthscale_grid"])
    model = AGPRegressor(**hyper)
    model.n_features_in_ = int(document["n_features_in"])
    model._y_ndim = int(document["y_ndim"])
    model.centers_ = arrays["centers"]
    model._centers_standardised = arrays["centers_standardised"]
    model._center_targets_centred = arrays["center_targets"]
    model.alpha_ = arrays["alpha"]
    model.x_mean_ = arrays["x_mean"]
    model.x_scale_ = arrays["x_scale"]
    model.y_mean_ = arrays["y_mean"]
    model.mean_coef_ = arrays.get("mean_coef", np.zeros((model.n_features_in_, model.alpha_.shape[1])))
    model.mean_penalty_ = document.get("mean_penalty")
    model.center_targets_ = model._center_targets_centred + model._mean_at(model._centers_standardised)
    model.validation_indices_ = arrays.get("validation_indices", np.zeros(0, dtype=int))
    model.kernel_params_ = {
        name[len(_PARAM_PREFIX) :]: value for name, value in arrays.items() if name.startswith(_PARAM_PREFIX)
    }
    model.lengthscale_ = float(document["lengthscale"])
    model.noise_ = float(document["noise"])
    model.best_epoch_ = int(document["best_epoch"])
    model.history_ = {key: list(values) for key, values in document["history"].items()}
    model.metadata_ = document["user_metadata"]
    return model
