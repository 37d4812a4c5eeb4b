"""A dataset split with its descriptors (whole frame and grid tiles), and the train hold-out."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from counting.core import defaults
from counting.core.errors import CountingError
from counting.features.layouts import extract_views
from counting.features.tiles import Grid, dot_tile_counts, parse_grid

# Every dataset's default split: Mall frames 1-800 are all we have here (the standard test part,
# 801-2000, is not), ShanghaiTech B train is split at random with a fixed seed.
DEFAULT_SPLITS: dict[str, str] = {
    "mall": "train=1-600,test=601-800",
    "shanghaitech": "random:0.25:0",
    # coco-voc20 is trainval only (no test list): a seeded random quarter is the test part.
    "voc": "random:0.25:0",
}


def default_split(dataset: str) -> str:
    return DEFAULT_SPLITS.get(dataset, "standard")


@dataclass
class ComparisonData:
    """One dataset split with its descriptors: what every method is run on."""

    dataset: str
    split: str
    train_paths: list[Path]
    test_paths: list[Path]
    train_counts: np.ndarray
    test_counts: np.ndarray
    train_features: np.ndarray  # (n, D) whole-frame descriptors
    test_features: np.ndarray
    test_indices: np.ndarray  # frame numbers, for sequence smoothing
    roi_mask: np.ndarray | None = None
    grid: Grid | None = None
    train_tile_features: np.ndarray | None = None  # (n, cells, D)
    test_tile_features: np.ndarray | None = None
    train_tile_counts: np.ndarray | None = None  # (n, cells)
    is_sequence: bool = False
    settings: dict = field(default_factory=dict)
    # Extra whole-frame descriptors (counting.features.descriptors spec -> (train, test) features).
    descriptor_features: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    class_names: list[str] | None = None  # per-class counts (voc)


def load_comparison_data(
    dataset: str,
    root: str | Path,
    split: str | None = None,
    backbone: str = defaults.BACKBONE,
    input_size: int | None = defaults.INPUT_SIZE,
    grid: Grid | str | int | None = None,
    use_roi: bool = True,
    cache: Any = None,
    limit_train: int | None = None,
    descriptors: Sequence[str] = (),
    progress: bool = False,
) -> ComparisonData:
    """Load a dataset split and its (cached) whole-frame and tile descriptors (a progress bar per
    extraction with ``progress``: an uncached ShanghaiTech run extracts for minutes).

    ``descriptors``: further descriptor specs (``counting.features.descriptors``, e.g.
    ``sum:block10,perspective``) whose whole-frame features the methods also run on."""
    from counting.data.datasets import load_dataset
    from counting.features.backbones import Preprocessing, get_backbone

    split = split or default_split(dataset)
    loaded = load_dataset(dataset, root, split=split)
    train, test = loaded.subset("train"), loaded.subset("test")
    if limit_train is not None:
        train.samples = train.samples[:limit_train]
    if not train.samples or not test.samples:
        raise CountingError(f"{root}: split {split!r} leaves {len(train)} train and {len(test)} test images")
    grid = parse_grid(grid)
    roi_mask = loaded.roi_mask if use_roi else None
    tile_counts = None if grid is None else dot_tile_counts(train.samples, grid, roi_mask, dataset)
    network = get_backbone(backbone)
    prep = Preprocessing(input_size=input_size, roi_mask=roi_mask)
    started = time.perf_counter()
    whole, cells = extract_views(
        train.paths + test.paths,
        network,
        prep,
        "frame" if grid is None else "tiles+frame",
        grid,
        cache,
        progress=progress,
    )
    n_train = len(train)
    extra: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for spec in descriptors:
        from counting.features import extract_features
        from counting.features.descriptors import OWN_BACKBONE, Descriptor

        descriptor = Descriptor.build(spec, loaded.perspective_map, source=str(loaded.root))
        if descriptor.text == "scores":
            continue  # the whole-frame rows already are class scores
        own = OWN_BACKBONE.get(descriptor.spec.kind)  # the detector: its own network
        rows = extract_features(
            train.paths + test.paths,
            get_backbone(own) if own else network,
            prep,
            cache=cache,
            progress=progress,
            descriptor=descriptor,
        ).features
        extra[descriptor.text] = (rows[:n_train], rows[n_train:])
    extraction_seconds = time.perf_counter() - started
    assert whole is not None  # every layout here uses the whole frame
    return ComparisonData(
        dataset=dataset,
        split=split,
        train_paths=list(train.paths),
        test_paths=list(test.paths),
        train_counts=np.asarray(train.counts, dtype=float),
        test_counts=np.asarray(test.counts, dtype=float),
        train_features=whole[:n_train],
        test_features=whole[n_train:],
        test_indices=np.asarray(test.indices),
        roi_mask=roi_mask,
        grid=grid,
        train_tile_features=None if cells is None else cells[:n_train],
        test_tile_features=None if cells is None else cells[n_train:],
        train_tile_counts=tile_counts,
        is_sequence=dataset in defaults.SEQUENCE_DATASETS,
        class_names=None if loaded.class_names is None else list(loaded.class_names),
        settings={
            "backbone": backbone,
            "input_size": input_size,
            "roi": roi_mask is not None,
            "grid": None if grid is None else list(grid),
            "extraction_seconds": round(extraction_seconds, 2),
        },
        descriptor_features=extra,
    )


def holdout(data: ComparisonData, fraction: float = 0.25, seed: int = 0) -> ComparisonData:
    """The train part split again into fit and validation parts, for choosing settings.

    Sequences hold out their last frames (neighbouring frames are near copies, so a random
    hold-out would be scored almost in-sample); image sets a seeded random subset. The test
    part of ``data`` is not touched.
    """
    n = len(data.train_counts)
    n_held = max(1, int(round(fraction * n)))
    if data.is_sequence:
        held = np.arange(n - n_held, n)
    else:
        held = np.sort(np.random.default_rng(seed).choice(n, size=n_held, replace=False))
    fit = np.setdiff1d(np.arange(n), held)

    def part(values: Any, rows: np.ndarray) -> Any:
        if values is None:
            return None
        if isinstance(values, list):
            return [values[row] for row in rows] if values else []
        return values[rows]

    return ComparisonData(
        dataset=data.dataset,
        split=f"{data.split} / validation: {n_held} of {n} train images held out",
        train_paths=part(data.train_paths, fit),
        test_paths=part(data.train_paths, held),
        train_counts=data.train_counts[fit],
        test_counts=data.train_counts[held],
        train_features=data.train_features[fit],
        test_features=data.train_features[held],
        test_indices=np.arange(n)[held] + 1,
        roi_mask=data.roi_mask,
        grid=data.grid,
        train_tile_features=part(data.train_tile_features, fit),
        test_tile_features=part(data.train_tile_features, held),
        train_tile_counts=part(data.train_tile_counts, fit),
        is_sequence=data.is_sequence,
        settings=dict(data.settings),
        class_names=data.class_names,
    )
