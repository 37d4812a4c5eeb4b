"""Run every counting method on the same features and split, timing fit and predict.

Feature methods (ridge, exact GP, sparse GP, the paper's AGP variants) share one set of
descriptors; AGP also runs on grid tiles (per-tile counts from the head dots, a frame counted as
the sum of its tiles) beside its whole-frame row. The HOG detector works on the images. Every
row is measured here, on this machine; published figures are set beside them from
``counting.published``.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from counting import defaults
from counting.errors import CountingError
from counting.peers import FEATURE_PEERS, IMAGE_PEERS, CalibratedHOGCounter, HOGPeopleCounter, make_peer, peer_label
from counting.peers.errors import PeerUnavailable
from counting.tiles import parse_grid, tile_count_matrix

# Every dataset's default split: Mall frames 1-800 are all we have here (the standard test part,
# 801-2000, is not), ShanghaiTech B train is split at random with a fixed seed.
DEFAULT_SPLITS: dict[str, str] = {"mall": "train=1-600,test=601-800", "shanghaitech": "random:0.25:0"}
DEFAULT_METHODS: tuple[str, ...] = (
    "ridge", "gp", "sparse-gp", "center-gp", "agp-univariate", "agp-diagonal", "hog", "hog-calibrated",
)
# Methods that also run on grid tiles (the tiled rows of the table).
DEFAULT_TILED_METHODS: tuple[str, ...] = ("ridge", "gp", "agp-univariate")
# Exact GPs cost O(rows³): one row per tile is out of reach, so they run on the pyramid layout
# (one row per frame) only.
FRAME_ROW_ONLY: tuple[str, ...] = ("gp",)

Grid = tuple[int, int]


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


@dataclass
class MethodResult:
    """One row of the comparison table."""

    method: str
    label: str
    features: str
    status: str = "ok"  # ok | unavailable | failed
    note: str = ""
    metrics: dict = field(default_factory=dict)  # mae, mse, rmse (+ smoothed_* for sequences)
    fit_seconds: float | None = None
    predict_seconds: float | None = None
    n_train: int = 0
    n_test: int = 0
    predictions: np.ndarray | None = None

    def row(self) -> dict:
        """Flat JSON/CSV-ready record (no per-frame predictions)."""
        record = {
            "method": self.method,
            "label": self.label,
            "features": self.features,
            "status": self.status,
            "note": self.note,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "fit_seconds": _round(self.fit_seconds),
            "predict_seconds": _round(self.predict_seconds),
        }
        for name in ("mae", "mse", "rmse", "smoothed_mae", "smoothed_mse", "smoothed_rmse"):
            record[name] = _round(self.metrics.get(name))
        return record


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


# -- descriptors --------------------------------------------------------------------------


def extract_views(
    paths: Sequence[str | Path],
    backbone: Any,
    prep: Any,
    grids: Sequence[Grid | None],
    cache: Any = None,
    batch_size: int = 8,
) -> dict[Grid | None, np.ndarray]:
    """Whole-frame and per-grid descriptors from ONE trunk pass per image.

    ``extract_features`` runs the trunk once per grid; here each image's final feature map is
    pooled for every requested grid at once and the rows are stored in the shared cache under
    the keys ``extract_features`` uses, so later calls of either are free.
    """
    import torch
    import torch.nn.functional as F

    from counting.features import extract_features
    from counting.features.cache import settings_key
    from counting.features.extract import extraction_settings
    from counting.imaging import load_image

    path_list = [str(path) for path in paths]
    grids = list(dict.fromkeys(grids))
    if cache is None:
        return {
            grid: extract_features(path_list, backbone, prep, grid=grid, progress=False).features for grid in grids
        }
    keys = {grid: settings_key(extraction_settings(backbone, prep, grid, False)) for grid in grids}
    hashes = [cache.content_hash(path) for path in path_list]
    missing: set[int] = set()
    for grid in grids:
        shape = (backbone.feature_dim,) if grid is None else (grid[0] * grid[1], backbone.feature_dim)
        stored = cache.get_many(keys[grid], [content for content in hashes if content is not None], shape)
        missing |= {index for index, content in enumerate(hashes) if content not in stored}
    todo = sorted(missing)
    for grid in grids:
        cache.describe(keys[grid], extraction_settings(backbone, prep, grid, False))
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        batch = torch.stack([backbone.prepare(load_image(path_list[i]), prep, source=path_list[i]) for i in chunk])
        feature_map = backbone.feature_map(batch)
        with torch.inference_mode():
            for grid in grids:
                if grid is None:
                    rows = backbone.head(feature_map.mean(dim=(2, 3)))
                else:
                    cells = F.adaptive_avg_pool2d(feature_map, grid)
                    cells = cells.permute(0, 2, 3, 1).reshape(len(chunk), grid[0] * grid[1], -1)
                    rows = backbone.head(cells)
                for index, row in zip(chunk, rows.numpy().astype(np.float32)):
                    cache.put(keys[grid], hashes[index], row)
        cache.flush()
    return {
        grid: extract_features(path_list, backbone, prep, grid=grid, cache=cache, progress=False).features
        for grid in grids
    }


def image_size_of(path: str | Path) -> tuple[int, int]:
    """(H, W) from the image header."""
    from PIL import Image

    with Image.open(path) as image:
        width, height = image.size
    return height, width


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
) -> ComparisonData:
    """Load a dataset split and its (cached) whole-frame and tile descriptors."""
    from counting.backbones import Preprocessing, get_backbone
    from counting.datasets import load_dataset

    split = split or default_split(dataset)
    loaded = load_dataset(dataset, root, split=split)
    train, test = loaded.subset("train"), loaded.subset("test")
    if limit_train is not None:
        train.samples = train.samples[:limit_train]
    if not train.samples or not test.samples:
        raise CountingError(f"{root}: split {split!r} leaves {len(train)} train and {len(test)} test images")
    grid = parse_grid(grid)
    roi_mask = loaded.roi_mask if use_roi else None
    network = get_backbone(backbone)
    prep = Preprocessing(input_size=input_size, roi_mask=roi_mask)
    started = time.perf_counter()
    views = extract_views(train.paths + test.paths, network, prep, [None, grid], cache)
    extraction_seconds = time.perf_counter() - started
    n_train = len(train)
    whole = views[None]
    data = ComparisonData(
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
        is_sequence=dataset in defaults.SEQUENCE_DATASETS,
        settings={
            "backbone": backbone,
            "input_size": input_size,
            "roi": roi_mask is not None,
            "grid": None if grid is None else list(grid),
            "extraction_seconds": round(extraction_seconds, 2),
        },
    )
    if grid is not None:
        if any(sample.dots is None for sample in train.samples):
            raise CountingError(f"{root}: {dataset} has no head dots, so it cannot be tiled")
        sizes = [image_size_of(path) for path in train.paths]
        data.grid = grid
        data.train_tile_features = views[grid][:n_train]
        data.test_tile_features = views[grid][n_train:]
        data.train_tile_counts = tile_count_matrix([s.dots for s in train.samples], sizes, grid, roi_mask)
    return data


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
        dataset=data.dataset, split=f"{data.split} / validation: {n_held} of {n} train images held out",
        train_paths=part(data.train_paths, fit), test_paths=part(data.train_paths, held),
        train_counts=data.train_counts[fit], test_counts=data.train_counts[held],
        train_features=data.train_features[fit], test_features=data.train_features[held],
        test_indices=np.arange(n)[held] + 1, roi_mask=data.roi_mask, grid=data.grid,
        train_tile_features=part(data.train_tile_features, fit), test_tile_features=part(data.train_tile_features, held),
        train_tile_counts=part(data.train_tile_counts, fit), is_sequence=data.is_sequence,
        settings=dict(data.settings),
    )


# -- running the methods ------------------------------------------------------------------


def score(y_true: np.ndarray, y_pred: np.ndarray, indices: np.ndarray | None = None, window: int = 0) -> dict:
    """MAE / MSE / RMSE, plus the same after centred temporal smoothing when ``window`` > 1."""
    from counting.evaluation import smooth_sequence

    errors = np.asarray(y_pred, float) - np.asarray(y_true, float)
    figures = {"mae": float(np.mean(np.abs(errors))), "mse": float(np.mean(errors**2))}
    figures["rmse"] = float(np.sqrt(figures["mse"]))
    if window > 1 and indices is not None:
        smoothed = smooth_sequence(np.asarray(y_pred, float), indices, window) - np.asarray(y_true, float)
        figures["smoothed_mae"] = float(np.mean(np.abs(smoothed)))
        figures["smoothed_mse"] = float(np.mean(smoothed**2))
        figures["smoothed_rmse"] = float(np.sqrt(figures["smoothed_mse"]))
    return figures


def _timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = action()
    return value, time.perf_counter() - started


def _feature_rows(data: ComparisonData, variant: str) -> tuple[np.ndarray, np.ndarray, Callable[[Any], np.ndarray]]:
    """Training rows, targets and a frame-count predictor for one feature layout.

    ``frame``: one whole-frame descriptor per frame. ``tiles``: one row per tile with its
    dot count, a frame counted as the sum of its tiles. ``tiles+frame``: the tile rows plus each
    whole frame as the average tile (target count / cells; the fc layer is linear, so the
    whole-frame descriptor is the mean of the cell descriptors). ``pyramid``: one row per frame,
    the whole-frame descriptor concatenated with every cell's, so each cell gets its own weights
    (people at the back of the scene look different from those in front).
    """
    if variant == "frame":
        return data.train_features, data.train_counts, lambda model: model.predict(data.test_features)
    tiles, test_tiles = data.train_tile_features, data.test_tile_features
    n_cells, dim = tiles.shape[1], tiles.shape[2]
    if variant == "pyramid":
        def stack(whole: np.ndarray, cells: np.ndarray) -> np.ndarray:
            return np.concatenate([whole, cells.reshape(len(cells), -1)], axis=1)

        X_test = stack(data.test_features, test_tiles)
        return stack(data.train_features, tiles), data.train_counts, lambda model: model.predict(X_test)
    X, y = tiles.reshape(-1, dim), data.train_tile_counts.reshape(-1)
    if variant == "tiles+frame":
        X = np.concatenate([X, data.train_features])
        y = np.concatenate([y, data.train_counts / n_cells])
    n_test = len(test_tiles)

    def predict(model: Any) -> np.ndarray:
        return model.predict(test_tiles.reshape(-1, dim)).reshape(n_test, n_cells).sum(axis=1)

    return X, y, predict


LAYOUTS = ("frame", "tiles", "tiles+frame", "pyramid")


def run_feature_method(
    data: ComparisonData, name: str, variant: str = "frame", n_centers: int = defaults.N_CENTERS,
    seed: int = defaults.SEED, window: int = 0,
) -> MethodResult:
    """Fit and score one feature method on one layout (see ``_feature_rows``)."""
    grid_text = "" if data.grid is None else f"{data.grid[0]}x{data.grid[1]}"
    layout = {"frame": "whole frame", "tiles": f"tiles {grid_text}", "tiles+frame": f"tiles {grid_text} + frame",
              "pyramid": f"frame + {grid_text} cells concatenated"}[variant]
    result = MethodResult(method=name, label=peer_label(name), features=layout, n_test=len(data.test_counts))
    X, y, predict = _feature_rows(data, variant)
    result.n_train = int(len(X))
    try:
        model = make_peer(name, n_centers=n_centers, seed=seed, n_features=X.shape[1], n_rows=len(X))
        _, result.fit_seconds = _timed(lambda: model.fit(X, y))
        predictions, result.predict_seconds = _timed(lambda: predict(model))
    except PeerUnavailable as reason:
        result.status, result.note = "unavailable", str(reason)
        return result
    except (ValueError, np.linalg.LinAlgError, RuntimeError) as error:
        result.status, result.note = "failed", f"{type(error).__name__}: {str(error).splitlines()[0]}"
        return result
    result.predictions = np.asarray(predictions, dtype=float).ravel()
    result.metrics = score(data.test_counts, result.predictions, data.test_indices, window)
    return result


def run_image_method(
    data: ComparisonData, name: str, window: int = 0, max_train_images: int | None = 150
) -> MethodResult:
    """The HOG detector, plain or linearly calibrated on (a spread of) the training images."""
    result = MethodResult(method=name, label=IMAGE_PEERS[name], features="images", n_test=len(data.test_counts))
    try:
        if name == "hog":
            model = HOGPeopleCounter(roi_mask=data.roi_mask)
            result.fit_seconds, result.n_train = 0.0, 0
        else:
            model = CalibratedHOGCounter(roi_mask=data.roi_mask, max_train_images=max_train_images)
            _, result.fit_seconds = _timed(lambda: model.fit(data.train_paths, data.train_counts))
            result.n_train = model.n_train_
        predictions, result.predict_seconds = _timed(lambda: model.predict(data.test_paths))
    except PeerUnavailable as reason:
        result.status, result.note = "unavailable", str(reason)
        return result
    result.predictions = predictions
    result.metrics = score(data.test_counts, predictions, data.test_indices, window)
    return result


def check_methods(methods: Sequence[str], tiled_methods: Sequence[str] = ()) -> None:
    """Fail early, naming the first unknown method."""
    unknown = [name for name in [*methods, *tiled_methods] if name not in FEATURE_PEERS and name not in IMAGE_PEERS]
    if unknown:
        known = ", ".join([*FEATURE_PEERS, *IMAGE_PEERS])
        raise CountingError(f"--methods: unknown method {unknown[0]!r} (known: {known})")
    image_tiled = [name for name in tiled_methods if name in IMAGE_PEERS]
    if image_tiled:
        raise CountingError(f"--tiled-methods: {image_tiled[0]!r} works on images, not on tile descriptors")


def run_comparison(
    data: ComparisonData,
    methods: Sequence[str] = DEFAULT_METHODS,
    tiled_methods: Sequence[str] = DEFAULT_TILED_METHODS,
    n_centers: int = defaults.N_CENTERS,
    seed: int = defaults.SEED,
    smoothing_window: int | None = None,
    max_hog_train_images: int | None = 150,
    on_result: Callable[[MethodResult], None] | None = None,
) -> list[MethodResult]:
    """Every requested method on ``data``; tiled rows follow when the data has a grid."""
    check_methods(methods, tiled_methods)
    window = (defaults.SMOOTHING_WINDOW if smoothing_window is None else smoothing_window) if data.is_sequence else 0
    jobs: list[Callable[[], MethodResult]] = []
    for name in methods:
        if name in IMAGE_PEERS:
            jobs.append(lambda name=name: run_image_method(data, name, window, max_hog_train_images))
        else:
            jobs.append(lambda name=name: run_feature_method(data, name, "frame", n_centers, seed, window))
    if data.grid is not None:
        for name in tiled_methods:
            if name in FEATURE_PEERS:
                variants = ("pyramid",) if name in FRAME_ROW_ONLY else ("tiles", "tiles+frame", "pyramid")
                for variant in variants:
                    jobs.append(
                        lambda name=name, variant=variant: run_feature_method(data, name, variant, n_centers, seed, window)
                    )
    results = []
    for job in jobs:
        result = job()
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


# -- published figures and files ---------------------------------------------------------


def published_rows(dataset: str) -> list[dict]:
    """Published figures for the dataset, one row per method: ``{method, mae, mse, rmse, source}``."""
    from counting.published import load_published

    by_method: dict[str, dict] = {}
    for entry in load_published(dataset):
        row = by_method.setdefault(entry["method"], {"method": entry["method"], "source": entry["source"],
                                                     "definition": entry["definition"]})
        row[entry["metric"].lower()] = float(entry["value"])
    for row in by_method.values():
        if "mse" in row and "rmse" not in row:
            row["rmse"] = round(float(np.sqrt(row["mse"])), 2)
        if "rmse" in row and "mse" not in row:
            row["mse"] = round(row["rmse"] ** 2, 1)
    return list(by_method.values())


CSV_COLUMNS = (
    "source", "method", "label", "features", "status", "mae", "mse", "rmse", "smoothed_mae", "smoothed_mse",
    "smoothed_rmse", "fit_seconds", "predict_seconds", "n_train", "n_test", "note",
)


def table_records(results: Sequence[MethodResult], published: Sequence[dict]) -> list[dict]:
    """Our rows then the published ones, in one column layout."""
    records = [{"source": "measured here", **result.row()} for result in results]
    for row in published:
        records.append({
            "source": row["source"], "method": row["method"], "label": f"{row['method']} (published)",
            "features": "published", "status": "published", "mae": row.get("mae"), "mse": row.get("mse"),
            "rmse": row.get("rmse"), "note": row.get("definition", ""),
        })
    return [{column: record.get(column) for column in CSV_COLUMNS} for record in records]


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(records: Sequence[dict], sequence: bool) -> str:
    columns = ["label", "features", "mae", "mse", "rmse"]
    if sequence:
        columns += ["smoothed_mae", "smoothed_rmse"]
    columns += ["fit_seconds", "predict_seconds", "source"]
    titles = {"label": "method", "mae": "MAE", "mse": "MSE", "rmse": "RMSE", "smoothed_mae": "MAE (smoothed)",
              "smoothed_rmse": "RMSE (smoothed)", "fit_seconds": "fit s", "predict_seconds": "predict s"}
    lines = ["| " + " | ".join(titles.get(c, c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for record in records:
        cells = [_cell(record[c]) for c in columns]
        if record["status"] not in ("ok", "published"):
            cells[2] = f"{record['status']}: {record['note']}"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_comparison(
    data: ComparisonData, results: Sequence[MethodResult], out_dir: str | Path, stem: str | None = None
) -> dict[str, Path]:
    """Write ``<stem>.csv``, ``.json`` and ``.md`` into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or f"compare-{data.dataset}"
    published = published_rows(data.dataset)
    records = table_records(results, published)
    paths = {"csv": out / f"{stem}.csv", "json": out / f"{stem}.json", "md": out / f"{stem}.md"}
    from counting.files import atomic_write, atomic_write_text

    with atomic_write(paths["csv"], newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    summary = {
        "dataset": data.dataset,
        "split": data.split,
        "n_train": len(data.train_counts),
        "n_test": len(data.test_counts),
        "settings": data.settings,
        "rows": records,
        "predictions": {
            f"{result.method}|{result.features}": [round(float(v), 3) for v in result.predictions]
            for result in results if result.predictions is not None
        },
        "y_true": [float(v) for v in data.test_counts],
    }
    atomic_write_text(paths["json"], json.dumps(summary, indent=2) + "\n")
    header = (
        f"# {data.dataset}: methods compared on split `{data.split}`\n\n"
        f"{len(data.train_counts)} train / {len(data.test_counts)} test images; descriptors: "
        f"{data.settings.get('backbone')} at input size {data.settings.get('input_size') or 'native'}, "
        f"ROI {'on' if data.settings.get('roi') else 'off'}. Fit and predict times are measured here "
        "(regressor only for feature methods; detection included for HOG). Published figures use "
        "their papers' protocols (see the CSV's note column), not this split.\n\n"
    )
    atomic_write_text(paths["md"], header + markdown_table(records, data.is_sequence) + "\n")
    return paths
