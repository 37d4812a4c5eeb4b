"""The familiarity stage: fit a model's familiarity score on its training pictures.

Used by :func:`counting.train.pipeline.train_model` (from the rows it already has, or the
head's maps read back from the cache) and by ``counting familiarize`` to add the score to an
existing model file: only the ``familiarity`` section is added, every array and field that
makes a count stays as it was, so the model's counts do not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import TrainingError
from counting.features.layouts import model_features
from counting.heads.familiarity import FLAG_RATE, Familiarity, fit_familiarity

__all__ = ["add_familiarity", "familiarity_from_rows"]


def _fit(
    model: Any,
    probes: np.ndarray,
    order: np.ndarray,
    flag_rate: float,
    settings: dict[str, Any],
    groups: np.ndarray | None = None,
) -> Familiarity:
    kind = "map-statistics" if model.density_head is not None else "descriptor"
    try:
        return fit_familiarity(probes, probe=kind, order=order, groups=groups, flag_rate=flag_rate, settings=settings)
    except ValueError as error:
        raise TrainingError(f"{model.name}: {error}") from None


def familiarity_from_rows(
    model: Any,
    rows: Any,
    layout: str,
    *,
    cache: Any = None,
    batch_size: int = defaults.BATCH_SIZE,
    dataset: str = "",
    log: Callable[[str], None] | None = None,
) -> None:
    """Training's familiarity stage: ``model.familiarity`` from the train pictures' probes (the
    regressor's rows of a descriptor model, no picture read again; a density-head model's maps,
    from the cache when training filled it). Too few pictures leave it unknown, with a log line."""
    samples = list(rows.samples)
    if model.density_head is None:
        probes = model_features(layout, rows.frame, rows.cells)
        probes = np.reshape(probes, (len(probes), -1))
    else:
        probes, ok, _ = model.probe_paths([sample.path for sample in samples], cache=cache, batch_size=batch_size)
        probes[~ok] = np.nan
    try:
        model.familiarity = _fit(model, probes, rows.indices, FLAG_RATE, {"trained_on": dataset, "from": "training"})
    except TrainingError as error:
        if log is not None:
            log(f"no familiarity score ({error})")
        return
    if log is not None:
        log(f"familiarity fitted on {model.familiarity.settings['n_pictures']} train pictures (out-of-fold calibrated)")


def add_familiarity(
    model: Any,
    paths: Sequence[str],
    *,
    order: Sequence[int] | None = None,
    groups: Sequence[str] | None = None,
    cache: Any = None,
    batch_size: int = defaults.BATCH_SIZE,
    progress: bool = False,
    flag_rate: float = FLAG_RATE,
    trained_on: str = "",
) -> Familiarity:
    """Fit ``model.familiarity`` on the model's training pictures ``paths`` (in frame ``order``
    for the contiguous calibration folds; ``groups``: each picture's dataset, for a model trained
    on several) and set it; the counts are untouched. Pictures that fail to load are left out;
    TrainingError when too few remain."""
    probes, ok, errors = model.probe_paths(list(paths), cache=cache, batch_size=batch_size, progress=progress)
    probes[~ok] = np.nan
    if not ok.any():
        first = next(iter(errors.values()), "no picture could be read")
        raise TrainingError(f"{model.name}: no training picture could be read ({first})")
    order_array = np.arange(len(paths)) if order is None else np.asarray(order)
    model.familiarity = _fit(
        model,
        probes,
        order_array,
        flag_rate,
        {"trained_on": trained_on, "from": "familiarize"},
        None if groups is None else np.asarray(groups),
    )
    return model.familiarity
