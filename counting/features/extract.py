"""Batched descriptor extraction: decode in worker threads while the network runs, cache results.

PIL releases the GIL while decoding and resizing, so a small thread pool preparing the next
batch overlaps with the network's forward pass on the current one.

Images of different sizes (a folder of photos) are batched by their network input shape,
read from the file headers before decoding: the images are put in shape order, so photos of
the same size share forward passes however they are interleaved; results keep input order.
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from counting.core.errors import ImageError
from counting.core.terminal import on_terminal
from counting.data.imaging import image_size, load_pixels
from counting.features.backbones import Backbone, Preprocessing
from counting.features.backbones.base import check_grid, stack_prepared
from counting.features.backbones.runtime import available_cpus, default_threads
from counting.features.cache import FeatureCache, settings_key
from counting.features.descriptors import Descriptor, DescriptorError, as_descriptor

__all__ = [
    "FeatureSet",
    "available_cpus",
    "configure_torch_threads",
    "extract_descriptor_sets",
    "extract_features",
    "extraction_settings",
    "prepare_path",
    "chunk_slices",
    "whole_batches",
]

OnError = Literal["raise", "skip"]


@dataclass
class FeatureSet:
    """Descriptors for a list of images, in input order.

    ``features`` is ``(n, D)`` (or ``(n, rows*cols, D)`` with a grid) float32 with NaN rows for
    images that failed; ``ok`` marks the good rows; ``errors`` maps each failed path to its
    one-line message. ``n_cached`` / ``n_computed`` say where the good rows came from.
    """

    features: np.ndarray
    ok: np.ndarray
    errors: dict[str, str]
    paths: list[str] = field(default_factory=list)
    n_cached: int = 0
    n_computed: int = 0


def configure_torch_threads(threads: int | None = None) -> int:
    """Use every available core (or ``--threads``) for torch's forward pass.

    An explicit ``OMP_NUM_THREADS`` wins; otherwise torch's own default (physical cores of
    the whole host) can oversubscribe a container limited to fewer cores.
    """
    if threads is None:
        if os.environ.get("OMP_NUM_THREADS"):
            return torch.get_num_threads()
        threads = default_threads()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def extraction_settings(
    backbone: Backbone,
    prep: Preprocessing,
    grid: tuple[int, int] | None,
    pooled: bool,
    descriptor: Descriptor | None = None,
) -> dict[str, Any]:
    """Everything that determines a descriptor besides the image: the cache key's content.

    Class scores and pooled features keep the keys they always had; feature-map sums add their
    spec and the perspective map's hash.
    """
    output: Any = "pooled" if pooled else "scores"
    if descriptor is not None and descriptor.uses_maps:
        output = descriptor.fingerprint()
    return {
        "backbone": backbone.name,
        "weights_sha256": backbone.weights_sha256,
        "preprocessing": prep.fingerprint(),
        "grid": list(grid) if grid is not None else None,
        "output": output,
        # Runtimes agree to 1e-4, not bit for bit: descriptors of each are kept apart.
        "runtime": backbone.runtime,
    }


def extract_features(
    paths: Sequence[str | os.PathLike[str]],
    backbone: Backbone,
    prep: Preprocessing | None = None,
    grid: tuple[int, int] | None = None,
    cache: FeatureCache | None = None,
    batch_size: int = 16,
    progress: bool = True,
    on_error: OnError = "raise",
    *,
    pooled: bool = False,
    descriptor: Descriptor | str | None = None,
    num_workers: int | None = None,
    console: Console | None = None,
) -> FeatureSet:
    """Descriptors of ``paths`` with ``backbone``: class scores, or pooled features if ``pooled``,
    or any :mod:`counting.features.descriptors` kind given as ``descriptor`` (a Descriptor or spec string).

    With ``grid=(rows, cols)`` each image gets one descriptor per cell from a single pass.
    ``cache`` skips images already extracted with the same settings and stores new ones after
    every batch. ``on_error="raise"`` stops at the first unreadable image with an
    :class:`ImageError` naming it; ``"skip"`` records it in ``errors`` and goes on. The
    progress bar shows when ``progress`` is true and ``console`` (default: stderr) is a
    terminal; pass ``Console(force_terminal=True)`` to force it.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    prep = prep if prep is not None else Preprocessing()
    path_list = [str(path) for path in paths]
    n_images = len(path_list)
    described = as_descriptor(descriptor, pooled)
    pooled = described.pooled
    if described.uses_maps and grid is not None:
        raise DescriptorError(f"descriptor {described.text!r}: per-cell sums come from its levels=..., not a --grid")
    dim = described.dim(backbone)
    maps = described if described.uses_maps else None
    if grid is not None:
        grid = check_grid(grid)
    row_shape = (dim,) if grid is None else (grid[0] * grid[1], dim)
    features = np.full((n_images, *row_shape), np.nan, dtype=np.float32)
    ok = np.zeros(n_images, dtype=bool)
    errors: dict[str, str] = {}

    key = None
    hashes: list[str | None] = [None] * n_images
    n_cached = 0
    if cache is not None and n_images:
        settings = extraction_settings(backbone, prep, grid, pooled, maps)
        key = settings_key(settings)
        hashes = [cache.content_hash(path) for path in path_list]
        stored = cache.get_many(key, [h for h in hashes if h is not None], row_shape)
        for index, content_hash in enumerate(hashes):
            if content_hash is not None and content_hash in stored:
                features[index] = stored[content_hash]
                ok[index] = True
        n_cached = int(ok.sum())
        if n_cached < n_images:
            cache.describe(key, settings)
        cache.flush()

    todo = [index for index in range(n_images) if not ok[index]]
    console = console if console is not None else Console(stderr=True)
    show_progress = progress and on_terminal(console) and n_images > 0
    n_computed = 0
    if todo and backbone.runtime == "torch":
        configure_torch_threads(backbone.threads)
    with _progress_bar(console, show_progress) as bar:
        task = bar.add_task(backbone.name, total=n_images, completed=n_cached) if bar else None
        for batch_indices, tensors, failures in _prepared_batches(
            todo, path_list, backbone, prep, batch_size, num_workers, on_error
        ):
            for index, message in failures:
                errors[path_list[index]] = message
            for indices, batch in group_by_shape(batch_indices, tensors, backbone.runtime):
                if maps is not None:
                    rows = maps.compute(backbone, batch, prep.roi_mask)
                else:
                    rows = _run(backbone, batch, grid, pooled)
                features[indices] = rows
                ok[indices] = True
                n_computed += len(indices)
                if cache is not None and key is not None:
                    for index, row in zip(indices, rows):
                        if hashes[index] is not None:
                            cache.put(key, hashes[index], row)
            if bar is not None and task is not None:
                bar.advance(task, len(batch_indices) + len(failures))
    return FeatureSet(
        features=features, ok=ok, errors=errors, paths=path_list, n_cached=n_cached, n_computed=n_computed
    )


def extract_descriptor_sets(
    paths: Sequence[str | os.PathLike[str]],
    backbone: Backbone,
    prep: Preprocessing,
    descriptors: Sequence[Descriptor],
    cache: FeatureCache | None = None,
    batch_size: int = 16,
    progress: bool = True,
    num_workers: int | None = None,
    console: Console | None = None,
) -> list[FeatureSet]:
    """Several feature-map descriptors of the same images from ONE trunk pass per image.

    The studies compare many layer choices, weightings and pyramids: each is sliced from the
    same forward pass (the union of their maps) and cached under its own key, so a later
    :func:`extract_features` with one of them reads it from the cache. Unreadable images stop
    with their ImageError.
    """
    path_list = [str(path) for path in paths]
    n_images = len(path_list)
    if any(not descriptor.uses_maps for descriptor in descriptors):
        raise DescriptorError("extract_descriptor_sets takes feature-map descriptors (sum:..., mean:...) only")
    names = tuple(dict.fromkeys(name for descriptor in descriptors for name in descriptor.spec.layers))
    sets = [
        FeatureSet(
            features=np.full((n_images, d.dim(backbone)), np.nan, np.float32),
            ok=np.zeros(n_images, bool),
            errors={},
            paths=path_list,
        )
        for d in descriptors
    ]
    keys: list[str | None] = [None] * len(descriptors)
    hashes: list[str | None] = [None] * n_images
    if cache is not None and n_images:
        hashes = [cache.content_hash(path) for path in path_list]
        for k, descriptor in enumerate(descriptors):
            settings = extraction_settings(backbone, prep, None, False, descriptor)
            keys[k] = key = settings_key(settings)
            stored = cache.get_many(key, [h for h in hashes if h is not None], sets[k].features.shape[1:])
            for index, content_hash in enumerate(hashes):
                if content_hash is not None and content_hash in stored:
                    sets[k].features[index] = stored[content_hash]
                    sets[k].ok[index] = True
            sets[k].n_cached = int(sets[k].ok.sum())
            cache.describe(key, settings)
        cache.flush()
    todo = [index for index in range(n_images) if not all(s.ok[index] for s in sets)]
    console = console if console is not None else Console(stderr=True)
    show_progress = progress and on_terminal(console) and n_images > 0
    if todo and backbone.runtime == "torch":
        configure_torch_threads(backbone.threads)
    with _progress_bar(console, show_progress) as bar:
        task = bar.add_task(backbone.name, total=n_images, completed=n_images - len(todo)) if bar else None
        for batch_indices, tensors, _ in _prepared_batches(
            todo, path_list, backbone, prep, batch_size, num_workers, "raise"
        ):
            for indices, batch in group_by_shape(batch_indices, tensors, backbone.runtime):
                maps = backbone.feature_maps(batch, names)
                for k, descriptor in enumerate(descriptors):
                    rows = descriptor.from_maps(maps, prep.roi_mask)
                    sets[k].features[indices] = rows
                    sets[k].ok[indices] = True
                    sets[k].n_computed += len(indices)
                    key = keys[k]
                    if cache is not None and key is not None:
                        for index, row in zip(indices, rows):
                            if hashes[index] is not None:
                                cache.put(key, hashes[index], row)
            if bar is not None and task is not None:
                bar.advance(task, len(batch_indices))
    return sets


def _run(
    backbone: Backbone, batch: torch.Tensor | list[np.ndarray], grid: tuple[int, int] | None, pooled: bool
) -> np.ndarray:
    if grid is None:
        return backbone.forward_pooled(batch) if pooled else backbone.forward(batch)
    return backbone.forward_grid_pooled(batch, grid) if pooled else backbone.forward_grid(batch, grid)


def prepare_path(path: str, backbone: Backbone, prep: Preprocessing, warn: bool = True) -> torch.Tensor | ImageError:
    """One image file as the pipeline prepares it (the decode route that gives PIL's pixels
    fastest for this size), or the ImageError that names the file's problem. ``warn`` False:
    no tiny-picture warning (a picture the pipeline prepares a second time)."""
    try:
        pixels, bgr = load_pixels(path, array_if=prep.reduces_in_opencv, sideways=True)
        return backbone.prepare(pixels, prep, source=path, bgr=bgr, warn=warn)
    except ImageError as error:
        return error


def _prepared_batches(
    todo: list[int],
    paths: list[str],
    backbone: Backbone,
    prep: Preprocessing,
    batch_size: int,
    num_workers: int | None,
    on_error: OnError,
):
    """Yield ``(good indices, tensors, [(failed index, message)])`` per batch, in order.

    The next batch is already being decoded while the caller runs the current one.
    """
    if not todo:
        return
    chunks = batches_by_shape(todo, paths, prep, batch_size)
    # Decoding costs ~10 % (torch) to ~20 % (onnxruntime) of the forward pass. onnxruntime runs
    # a batch as independent per-thread parts (no barrier per layer), so one decode thread per
    # core fills the gaps best: on 2 cores end to end went from 74 % to 83 % of the bare forward
    # (1 -> 2 threads; 3 gave 81 %).
    workers = num_workers or max(1, min(4, available_cpus()))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decode")
    pending: deque[list[tuple[int, Future]]] = deque()

    def submit(chunk: list[int]) -> list[tuple[int, Future]]:
        return [(index, pool.submit(prepare_path, paths[index], backbone, prep)) for index in chunk]

    try:
        next_chunk = 0
        # One batch ahead: enough to hide decoding, and bounded memory at native resolution.
        while next_chunk < min(2, len(chunks)):
            pending.append(submit(chunks[next_chunk]))
            next_chunk += 1
        while pending:
            items = pending.popleft()
            if next_chunk < len(chunks):
                pending.append(submit(chunks[next_chunk]))
                next_chunk += 1
            good: list[int] = []
            tensors: list[torch.Tensor] = []
            failures: list[tuple[int, str]] = []
            for index, future in items:
                result = future.result()
                if isinstance(result, ImageError):
                    if on_error == "raise":
                        raise result
                    failures.append((index, str(result)))
                else:
                    good.append(index)
                    tensors.append(result)
            yield good, tensors, failures
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def batches_by_shape(todo: list[int], paths: list[str], prep: Preprocessing, batch_size: int) -> list[list[int]]:
    """Batches of indices, same network input shape within a batch where the headers allow.

    Reading a header costs ~0.1 ms against ~10 ms of forward pass per image; with one shape
    (video frames, most datasets) the order is left as it is.
    """
    if len(todo) > 1:
        shapes = [_input_shape(paths[index], prep) for index in todo]
        if len(set(shapes)) > 1:
            # Unreadable headers sort first: a bad file is reported before any work is done.
            order = sorted(range(len(todo)), key=lambda i: shapes[i] or (0, 0))
            chunks: list[list[int]] = []
            for position in order:
                if chunks and len(chunks[-1]) < batch_size and shapes[chunks[-1][-1]] == shapes[position]:
                    chunks[-1].append(position)
                else:
                    chunks.append([position])
            return [[todo[position] for position in chunk] for chunk in chunks]
    return [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]


def _input_shape(path: str, prep: Preprocessing) -> tuple[int, int] | None:
    try:
        height, width = image_size(path)
    except ImageError:  # the decoder reports the problem when the image is prepared
        return None
    return prep.target_size(width, height)


def batch_shape(batch: torch.Tensor | list[np.ndarray]) -> tuple[int, ...]:
    """``(B, 3, H, W)`` of a batch from :func:`group_by_shape` (a tensor, or a list of images)."""
    if isinstance(batch, list):
        return (len(batch), *batch[0].shape)
    return tuple(batch.shape)


def group_by_shape(indices: list[int], tensors: list[torch.Tensor], runtime: str = "torch"):
    """Images of different sizes cannot share a batch: run one sub-batch per shape.

    onnxruntime gets the planar images as a list: each part of a split batch stacks its own
    images into NCHW in its thread (and torch's thread pool stays out of the onnxruntime path).
    """
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for position, tensor in enumerate(tensors):
        groups[tuple(tensor.shape)].append(position)
    for positions in groups.values():
        members = [tensors[p] for p in positions]
        if runtime == "onnxruntime":
            batch: torch.Tensor | list[np.ndarray] = [member.numpy() for member in members]
        else:
            batch = stack_prepared(members)
        yield [indices[p] for p in positions], batch


class _ImagesPerSecondColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- img/s" if speed is None else f"{speed:.1f} img/s", style="progress.data.speed")


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


def _progress_bar(console: Console, show: bool) -> Progress | _NoProgress:
    """The extraction's progress bar on ``console`` (a context manager), or a stand-in that
    yields None when not ``show``."""
    if not show:
        return _NoProgress()
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _ImagesPerSecondColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def whole_batches(chunk: int, batch: int) -> int:
    """``chunk`` rounded down to a multiple of ``batch`` (at least one batch): a run of same-size
    images then forms the batches one call would make."""
    batch = max(1, batch)
    return max(batch, chunk // batch * batch)


def chunk_slices(
    n: int, size: int | Callable[[], int], progress: bool, console: Console | None = None
) -> Iterator[slice]:
    """Slices of ``n`` items, ``size`` at a time, under one progress bar on stderr (when
    ``progress`` and it is a terminal) that advances as each chunk is done: a chunk's own bars
    would restart at zero. Used by the chunked counting runs (counting.apply.chunks and the
    density-head models' counting). ``size`` may be a function, asked before each slice (a
    chunk sized by the time the previous one took)."""
    console = console if console is not None else Console(stderr=True)
    with _progress_bar(console, progress and on_terminal(console)) as bar:
        task = bar.add_task("counting", total=n) if bar else None
        start = 0
        while start < n:
            stop = min(n, start + max(1, size() if callable(size) else size))
            yield slice(start, stop)
            if bar is not None and task is not None:
                bar.advance(task, stop - start)
            start = stop
