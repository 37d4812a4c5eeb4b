"""Trained model files as rows of the comparison: scored on the same test images as every method.

Some counters cannot be fitted inside `compare` in reasonable time (the conv density head takes
minutes per head at 720); `counting train` makes them, and `compare --model FILE` counts the
comparison's test images with the file, beside the methods fitted on the descriptors. A model
that was trained on any of those test images is refused: its row would be scored in sample.
Per-class comparisons (voc) take models of the dataset's classes (e.g. ``models/voc20.npz``),
scored with the VOC metrics as the methods' rows; a model counting other things is refused.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import CountingError
from counting.evaluate.comparison.data import ComparisonData
from counting.evaluate.comparison.methods import MethodResult, score
from counting.evaluate.overlap import UnknownTraining, pictures_in_training

__all__ = ["add_model_rows", "check_counts", "check_models", "load_models", "model_features", "run_model"]


def model_features(model: Any) -> str:
    """What a model counts from, in a few words (the comparison's ``features`` column)."""
    size = f"@{model.input_size or 'native'}"
    head = model.density_head
    if head is not None:
        members = len(getattr(head, "members", [None]))
        kind = getattr(head, "kind", "density")
        ensemble = f" x{members}" if members > 1 else ""
        grid = head.grid
        cells = "" if grid is None else f", {grid[0]}x{grid[1]} sums"
        return f"{kind} density head{ensemble} ({'+'.join(head.layers)}){cells} {size}"
    if model.class_density_head is not None:
        return f"per-class density head ({'+'.join(model.class_density_head.layers)}) {size}"
    descriptor = "class scores" if model.descriptor is None else model.descriptor.text
    grid = "" if model.grid is None else f", {model.layout} {model.grid[0]}x{model.grid[1]}"
    return f"{descriptor}{grid} {size}"


def load_models(paths: list[Path], dataset: str | None = None) -> list[tuple[Path, Any]]:
    """Read every ``--model`` file before any work (a bad one is a one-line error naming it).

    ``dataset`` (the comparison's): a model counting other things than it is refused here too,
    where that can be told before the dataset is read (voc: the 20 VOC classes; mall, ucsd,
    shanghaitech: one count; folder: known once its counts CSV is read, see :func:`check_models`).
    """
    from counting.model.counting_model import load_model

    expected = _expected_classes(dataset)
    seen: dict[Path, Path] = {}
    models = []
    for path in map(Path, paths):
        key = path.resolve()
        if key in seen:
            raise CountingError(f"{path}: given twice to --model (also as {seen[key]})")
        seen[key] = path
        model = load_model(path)  # a bad file raises ModelFileError: one line naming it
        if expected is not _UNKNOWN:
            check_counts(path, model, expected)
        models.append((path, model))
    return models


# A folder dataset counts one thing or several (its counts CSV's columns): known once it is read.
_UNKNOWN: Any = object()


def _expected_classes(dataset: str | None) -> Any:
    """The class names a model must count for ``dataset`` (None: one count), or ``_UNKNOWN``."""
    if dataset == "voc":
        from counting.data.datasets.voc import VOC_CLASSES

        return list(VOC_CLASSES)
    if dataset == "folder":
        return _UNKNOWN
    return None


def check_models(models: list[tuple[Path, Any]], data: ComparisonData) -> None:
    """CountingError unless every model counts what the comparison's dataset counts (call it
    once the data is read, before any method runs)."""
    for path, model in models:
        check_counts(path, model, data.class_names)


def check_counts(path: Path, model: Any, class_names: list[str] | None) -> None:
    """CountingError unless ``model`` counts one number per image (``class_names`` None) or
    exactly ``class_names``, in that order (its columns are scored against them)."""
    counted = list(model.class_names) if model.class_names else None
    if class_names is None:
        if counted:
            raise CountingError(f"{path}: counts {len(counted)} classes; this comparison counts one")
        return
    expected = list(class_names)
    if counted is None:
        raise CountingError(f"{path}: counts one number per image; this comparison counts {len(expected)} classes")
    if counted != expected:
        missing = [name for name in expected if name not in counted]
        extra = [name for name in counted if name not in expected]
        if missing or extra:
            parts = [
                f"lacks {', '.join(missing[:3])}" if missing else "",
                f"has {', '.join(extra[:3])}" if extra else "",
            ]
            detail = "; ".join(part for part in parts if part)
        else:
            detail = "the same names in another order"
        raise CountingError(f"{path}: counts {len(counted)} classes, not this comparison's {len(expected)} ({detail})")


def run_model(
    data: ComparisonData,
    path: str | Path,
    cache: Any = None,
    window: int = 0,
    root: Path | None = None,
    progress: bool = False,
    model: Any = None,
) -> MethodResult:
    """Count the test images of ``data`` with the model file at ``path`` and score it (``model``:
    the file already read): MAE / MSE / RMSE, or the VOC metrics when ``data`` has per-class
    counts. A model counting other things than ``data`` is a CountingError; failures after that
    give a failed row, not an error."""
    from counting.model.counting_model import load_model

    path = Path(path)
    result = MethodResult(method="model", label=f"model {path.name}", features="", n_test=len(data.test_counts))
    if model is None:
        model = load_model(path)  # a bad file raises ModelFileError: one line naming it
    result.features = model_features(model)
    n_train = (model.dataset or {}).get("n_train") if isinstance(model.dataset, dict) else None
    result.n_train = n_train if isinstance(n_train, int) and not isinstance(n_train, bool) else 0
    check_counts(path, model, data.class_names)
    try:
        overlap = sum(pictures_in_training(model, data.dataset, data.test_paths, root))
    except UnknownTraining as unknown:
        result.status = "failed"
        result.note = f"cannot tell which images it was trained on: {unknown}"
        return result
    if overlap:
        result.status = "failed"
        result.note = (
            f"trained on {overlap} of the {len(data.test_paths)} test images (split {model.dataset['split']!r})"
        )
        return result
    started = time.perf_counter()
    try:
        counted = model.count_paths(data.test_paths, cache=cache, progress=progress)
    except CountingError as error:
        result.status = "failed"
        result.note = str(error).splitlines()[0] if str(error) else type(error).__name__
        return result
    result.predict_seconds = time.perf_counter() - started
    ok = np.asarray(counted.ok, dtype=bool)
    if not ok.all():
        first = next(iter(counted.errors.items()), ("?", "unreadable"))
        result.status = "failed"
        result.note = f"{int((~ok).sum())} test images not counted, e.g. {first[0]}: {first[1]}"
        return result
    per_class = data.class_names is not None
    predictions = np.asarray(counted.counts, dtype=float)
    predictions = predictions.reshape(len(data.test_paths), -1) if per_class else predictions.ravel()
    finite = np.isfinite(predictions).reshape(len(predictions), -1).all(axis=1)
    if not finite.all():
        first = data.test_paths[int(np.flatnonzero(~finite)[0])]
        result.status = "failed"
        result.note = f"{int((~finite).sum())} test images counted NaN or infinite, e.g. {first}"
        return result
    if per_class:
        from counting.core.metrics import voc_metrics

        # As the per-class methods' rows: clipped at 0 (the VOC metrics then round).
        result.predictions = np.clip(predictions, 0.0, None)
        result.metrics = voc_metrics(data.test_counts, result.predictions, data.class_names)
        return result
    result.predictions = predictions
    result.metrics = score(data.test_counts, result.predictions, data.test_indices, window)
    return result


def add_model_rows(
    data: ComparisonData,
    models: list[tuple[Path, Any]],
    results: list[MethodResult],
    cache: Any = None,
    window: int = 0,
    root: Path | None = None,
    progress: bool = False,
    on_start: Any = None,
    on_result: Any = None,
) -> None:
    """A row per model appended to ``results``; a label or (method, features) pair that an
    earlier row has gets the file's path, as rows and predictions are keyed by them."""
    for path, loaded in models:
        if on_start is not None:
            on_start(path)
        result = run_model(data, path, cache=cache, window=window, root=root, progress=progress, model=loaded)
        if any(other.label == result.label for other in results):
            result.label = f"model {path}"
        if any((other.method, other.features) == (result.method, result.features) for other in results):
            result.features = f"{result.features} ({path})"
        if on_result is not None:
            on_result(result)
        results.append(result)
