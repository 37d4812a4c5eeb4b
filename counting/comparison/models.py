"""Trained model files as rows of the comparison: scored on the same test images as every method.

Some counters cannot be fitted inside `compare` in reasonable time (the conv density head takes
minutes per head at 720); `counting train` makes them, and `compare --model FILE` counts the
comparison's test images with the file, beside the methods fitted on the descriptors. A model
that was trained on any of those test images is refused: its row would be scored in sample.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from counting.comparison.data import ComparisonData
from counting.comparison.methods import MethodResult, score
from counting.errors import CountingError

__all__ = ["model_features", "run_model"]


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


def _train_overlap(model: Any, data: ComparisonData, root: Path | None) -> int:
    """How many of the comparison's test images the model was trained on (0 when it was trained
    on another dataset, or on a root that is not here)."""
    recorded = model.dataset or {}
    if recorded.get("name") != data.dataset or not recorded.get("split"):
        return 0
    from counting.datasets import load_dataset

    trained_root = Path(recorded.get("root") or "")
    if root is not None and not trained_root.is_dir():
        trained_root = root  # a model trained elsewhere on the same dataset: its split, read here
    if not trained_root.is_dir():
        return 0
    trained = load_dataset(data.dataset, trained_root, split=recorded["split"]).subset("train")
    names = {Path(path).resolve() for path in trained.paths}
    return sum(Path(path).resolve() in names for path in data.test_paths)


def run_model(
    data: ComparisonData,
    path: str | Path,
    cache: Any = None,
    window: int = 0,
    root: Path | None = None,
    progress: bool = False,
) -> MethodResult:
    """Count the test images of ``data`` with the model file at ``path`` and score it."""
    from counting.model import load_model

    path = Path(path)
    result = MethodResult(method="model", label=f"model {path.name}", features="", n_test=len(data.test_counts))
    model = load_model(path)  # a bad file raises ModelFileError: one line naming it
    result.features = model_features(model)
    result.n_train = int((model.dataset or {}).get("n_train") or 0)
    if model.class_names:
        raise CountingError(f"{path}: counts {len(model.class_names)} classes; this comparison counts one")
    overlap = _train_overlap(model, data, root)
    if overlap:
        result.status = "failed"
        result.note = (
            f"trained on {overlap} of the {len(data.test_paths)} test images (split {model.dataset['split']!r})"
        )
        return result
    started = time.perf_counter()
    counted = model.count_paths(data.test_paths, cache=cache, progress=progress)
    result.predict_seconds = time.perf_counter() - started
    ok = np.asarray(counted.ok, dtype=bool)
    if not ok.all():
        first = next(iter(counted.errors.items()), ("?", "unreadable"))
        result.status = "failed"
        result.note = f"{int((~ok).sum())} test images not counted, e.g. {first[0]}: {first[1]}"
        return result
    result.predictions = np.asarray(counted.counts, dtype=float).ravel()
    result.metrics = score(data.test_counts, result.predictions, data.test_indices, window)
    return result
