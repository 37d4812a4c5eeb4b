"""Descriptor extraction on a Dask cluster, equal bit for bit to the single-process run.

:func:`extract_features_distributed` takes the arguments of
:func:`counting.features.extract_features` plus a ``client``:

1. With a cache, workers hash their share of the images and read the rows the shared cache
   already holds (the *survey*); the rest form the same global to-do list a single process
   would have.
2. The to-do list is cut into the single process's batches
   (:func:`~counting.features.extract.batches_by_shape`: ``batch_size`` images, same input
   shape where the headers differ); runs of consecutive batches are the tasks. Each worker
   decodes, splits a batch by input shape and stacks it exactly as ``extract_features`` does,
   and runs the forward pass on the client's runtime with the client's thread count.
3. onnxruntime: nothing more is needed. Its feature maps do not depend on the thread count or
   on the batch's other images (measured on this project's CPU), and the NumPy fc head sees
   the same batch sizes as in a single process (its bits do depend on them: a batch of one
   differs from a larger batch by ~4e-6).
4. torch: the frozen trace and the eager network differ in the last bits, and a single process
   traces a shape once it has run ``trace_after`` times. When every task is back, the client
   replays that rule over the batches in global order and re-runs the few sub-batches whose
   worker chose the other mode (typically the first two batches of each worker).

Results are fetched as each task finishes, so a worker that dies loses only the task it was
running; the scheduler gives that task to another worker. Rows a worker already stored in a
shared cache also survive an interrupted client.
"""

from __future__ import annotations

import functools
import math
import os
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from counting.apply.distributed.cluster import ClusterError
from counting.apply.distributed.spec import BackboneSpec
from counting.apply.distributed.worker import (
    BackbonePlugin,
    ChunkJob,
    ChunkResult,
    ExtractionJob,
    Item,
    SubBatch,
    compute_chunk,
    survey_chunk,
)
from counting.core.errors import ImageError
from counting.core.terminal import on_terminal
from counting.features.backbones import Preprocessing
from counting.features.backbones.base import check_grid
from counting.features.cache import settings_key
from counting.features.extract import FeatureSet, batches_by_shape, configure_torch_threads, extraction_settings

__all__ = ["cluster_extractor", "extract_features_distributed"]

SURVEY_CHUNK = 256  # images per cache-lookup task: hashing is cheap, keep task overhead low
MAX_BATCHES_PER_TASK = 8  # a lost worker loses at most this much work
TASKS_PER_WORKER = 4  # enough tasks to balance uneven workers

# Per client-side backbone object: how often each input shape has run, as a single process
# with that object would count (a second extraction with the same backbone continues it).
_history: weakref.WeakKeyDictionary[Any, dict[tuple[int, ...], int]] = weakref.WeakKeyDictionary()
_registered: set[tuple[str, str]] = set()


def cluster_extractor(client: Any, **options: Any) -> Callable[..., FeatureSet]:
    """``extract_features`` with the same signature, running on ``client``'s cluster."""
    return functools.partial(extract_features_distributed, client=client, **options)


def extract_features_distributed(
    paths: Sequence[str | os.PathLike[str]],
    backbone: Any,
    prep: Preprocessing | None = None,
    grid: tuple[int, int] | None = None,
    cache: Any = None,
    batch_size: int = 16,
    progress: bool = True,
    on_error: str = "raise",
    *,
    pooled: bool = False,
    descriptor: Any = None,
    num_workers: int | None = None,
    console: Console | None = None,
    client: Any,
    batches_per_task: int | None = None,
    threads: int | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
) -> FeatureSet:
    """:func:`counting.features.extract_features` on a Dask cluster (see the module docstring).

    ``backbone`` is the client's loaded backbone; workers load their own copy from its
    :class:`BackboneSpec` (same runtime and threads; on onnxruntime, the client's export file).
    ``cache`` must live on a filesystem the workers share (its folder is passed to them).
    ``threads`` is the torch thread count of every forward pass on the torch runtime (default:
    the one a single process here would use; other values give different last bits on some
    batch sizes); onnxruntime uses the backbone's own. ``on_chunk(done, total)`` is called in the client as images complete.
    ``num_workers`` (decode threads) is accepted for compatibility and unused.
    """
    del num_workers
    pooled = _cluster_pooled(descriptor, pooled)
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    prep = _cluster_preprocessing(prep if prep is not None else Preprocessing())
    grid = check_grid(grid) if grid is not None else None
    path_list = [str(path) for path in paths]
    n_images = len(path_list)
    dim = backbone.pooled_dim if pooled else backbone.feature_dim
    row_shape = (dim,) if grid is None else (grid[0] * grid[1], dim)
    features = np.full((n_images, *row_shape), np.nan, dtype=np.float32)
    ok = np.zeros(n_images, dtype=bool)
    errors: dict[int, str] = {}

    spec = BackboneSpec.of(backbone)
    _install_plugin(client, spec)
    job = _extraction_job(spec, backbone, prep, grid, pooled, threads, row_shape, cache)
    items = [Item(k, path, os.path.abspath(path)) for k, path in enumerate(path_list)]
    console = console if console is not None else Console(stderr=True)
    show = progress and on_terminal(console) and n_images > 0
    with _Bar(console, show, backbone.name, n_images, on_chunk) as bar:
        n_cached = 0
        if cache is not None and n_images:
            items, n_cached = _survey(client, job, items, features, ok)
            bar.advance(n_cached)
        chunks, order = _todo_chunks(client, items, ok, path_list, prep, batch_size, batches_per_task)
        sub_batches = _run_chunks(client, job, chunks, features, ok, errors, bar, on_error, order)
        if on_error == "raise" and errors:
            # The image a single process would have stopped at: the first bad one in batch order.
            raise ImageError(errors[min(errors, key=order.__getitem__)])
        # Replay the single-process tracing rule in global order; re-run where a worker differed.
        redo = _mode_mismatches(sub_batches, _history.setdefault(backbone, {}), spec)
        if redo:
            by_index = {item.index: item for item in items}
            fixes = [
                ChunkJob((tuple(by_index[i] for i in sub.indices),), first_batch=sub.batch, mode=mode)
                for sub, mode in redo
            ]
            _run_chunks(client, job, fixes, features, ok, errors, None, on_error, order)
    n_computed = int(ok.sum()) - n_cached
    by_path = {path_list[index]: message for index, message in sorted(errors.items())}
    return FeatureSet(
        features=features, ok=ok, errors=by_path, paths=path_list, n_cached=n_cached, n_computed=n_computed
    )


def _todo_chunks(
    client: Any,
    items: list[Item],
    ok: np.ndarray,
    path_list: list[str],
    prep: Preprocessing,
    batch_size: int,
    batches_per_task: int | None,
) -> tuple[list[ChunkJob], dict[int, int]]:
    """The tasks: the images not yet ``ok`` cut into the single process's batches (its order,
    one input shape each), runs of consecutive batches per task; and each image's position in
    that order (the first bad image is the one a single process would have stopped at)."""
    by_index = {item.index: item for item in items}
    todo = [item.index for item in items if not ok[item.index]]
    batches = [tuple(by_index[i] for i in batch) for batch in batches_by_shape(todo, path_list, prep, batch_size)]
    order = {item.index: position for position, item in enumerate(item for batch in batches for item in batch)}
    per_task = batches_per_task or _batches_per_task(client, len(batches))
    chunks = [
        ChunkJob(tuple(batches[start : start + per_task]), first_batch=start)
        for start in range(0, len(batches), per_task)
    ]
    return chunks, order


def _cluster_pooled(descriptor: Any, pooled: bool) -> bool:
    """Whether the rows are the pooled trunk features: the workers run the classic outputs only
    (class scores or pooled features), so a descriptor of feature-map sums is refused."""
    if descriptor is None:
        return pooled
    from counting.features.descriptors import DescriptorError, as_descriptor

    described = as_descriptor(descriptor, pooled)
    if described.uses_maps:
        # Workers run the classic outputs only; feature-map sums run in one process for now.
        raise DescriptorError(f"descriptor {described.text!r}: not available with --cluster yet (run without it)")
    return described.pooled


def _cluster_preprocessing(prep: Preprocessing) -> Preprocessing:
    """``prep``, refused when it holds what the workers cannot rebuild: they make their own
    Preprocessing from its input size and ROI alone."""
    if prep.flip:
        # Workers rebuild the preprocessing from its input size and ROI: they would not mirror.
        raise ClusterError("flip-averaged descriptors (--flip-average) are not computed on a cluster; drop --cluster")
    rebuilt = Preprocessing(input_size=prep.input_size, roi_mask=prep.roi_mask)
    if prep != rebuilt:
        # Nor anything else the workers' Preprocessing would lack (a grayscale copy, say).
        extra = ", ".join(sorted(set(prep.fingerprint()) - set(rebuilt.fingerprint())))
        raise ClusterError(f"the cluster's workers rebuild only the input size and ROI, not {extra}; drop --cluster")
    return prep


def _extraction_job(
    spec: BackboneSpec,
    backbone: Any,
    prep: Preprocessing,
    grid: tuple[int, int] | None,
    pooled: bool,
    threads: int | None,
    row_shape: tuple[int, ...],
    cache: Any,
) -> ExtractionJob:
    """What every task of this extraction shares: the backbone's plugin, the preprocessing, the
    rows' shape, the thread count and the shared cache's folder and key."""
    settings = extraction_settings(backbone, prep, grid, pooled) if cache is not None else None
    return ExtractionJob.build(
        spec.plugin_name,
        prep,
        grid,
        pooled,
        _torch_threads(backbone, threads),
        row_shape,
        cache_dir=None if cache is None else os.path.abspath(cache.directory),
        cache_key=None if settings is None else settings_key(settings),
        cache_settings=settings,
        run_id=uuid.uuid4().hex,
    )


def _torch_threads(backbone: Any, threads: int | None) -> int:
    """The torch thread count a single process here would use (what ``extract_features`` sets)."""
    if threads is not None:
        return threads
    if backbone.runtime == "torch":
        return configure_torch_threads(backbone.threads)
    return int(backbone.threads or 1)  # unused by onnxruntime workers


def _install_plugin(client: Any, spec: BackboneSpec) -> None:
    """Load the backbone on every worker, once per client (workers joining later get it too)."""
    marker = (str(client.id), spec.plugin_name)
    if marker in _registered:
        return
    client.register_plugin(BackbonePlugin(spec), name=spec.plugin_name)
    _registered.add(marker)


def _batches_per_task(client: Any, n_batches: int) -> int:
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    return max(1, min(MAX_BATCHES_PER_TASK, math.ceil(n_batches / (TASKS_PER_WORKER * workers))))


def _survey(
    client: Any, job: ExtractionJob, items: list[Item], features: np.ndarray, ok: np.ndarray
) -> tuple[list[Item], int]:
    """Ask the workers for content hashes and cached rows; return items carrying their hash."""
    from distributed import as_completed

    pieces = {
        client.submit(survey_chunk, job, items[start : start + SURVEY_CHUNK], pure=False): start
        for start in range(0, len(items), SURVEY_CHUNK)
    }
    hashed = list(items)
    for future in as_completed(list(pieces)):
        start = pieces.pop(future)
        result = _result(future)
        for offset, content_hash in enumerate(result.hashes):
            item = items[start + offset]
            hashed[start + offset] = Item(item.index, item.path, item.location, content_hash)
        for position, row in zip(result.cached_positions, result.cached_rows):
            features[start + position] = row
            ok[start + position] = True
    return hashed, int(ok.sum())


def _run_chunks(
    client: Any,
    job: ExtractionJob,
    chunks: list[ChunkJob],
    features: np.ndarray,
    ok: np.ndarray,
    errors: dict[int, str],
    bar: _Bar | None,
    on_error: str,
    order: dict[int, int],
) -> list[SubBatch]:
    """Submit the chunks, store each result as it arrives (then drop it from the cluster)."""
    from distributed import as_completed

    pending = {client.submit(compute_chunk, job, chunk, pure=False): chunk for chunk in chunks}
    sub_batches: list[SubBatch] = []
    for future in as_completed(list(pending)):
        chunk = pending.pop(future)
        if future.cancelled():
            continue
        result: ChunkResult = _result(future)
        if len(result.indices):
            features[result.indices] = result.rows
            ok[result.indices] = True
        errors.update(result.errors)
        sub_batches.extend(result.sub_batches)
        if bar is not None:
            bar.advance(sum(len(batch) for batch in chunk.batches))
        if on_error == "raise" and result.errors:
            # Chunks after the first bad image are not needed: the run stops there.
            first_error = min(order[index] for index in errors)
            for other, later in list(pending.items()):
                if order[later.batches[0][0].index] > first_error:
                    other.cancel()
    return sub_batches


def _mode_mismatches(
    sub_batches: list[SubBatch], history: dict[tuple[int, ...], int], spec: BackboneSpec
) -> list[tuple[SubBatch, str]]:
    """Sub-batches whose worker ran the other mode than a single process would have."""
    redo: list[tuple[SubBatch, str]] = []
    # Within a batch the worker lists sub-batches in the single process's order already.
    for sub in sorted(sub_batches, key=lambda s: s.batch):
        if not spec.replays_trace:
            expected = "eager"
        else:
            runs = history.get(sub.shape, 0)
            expected = "eager" if runs < spec.trace_after else "trace"
            history[sub.shape] = min(runs + 1, spec.trace_after)
        if sub.mode != expected:
            redo.append((sub, expected))
    return redo


def _result(future: Any) -> Any:
    from distributed.scheduler import KilledWorker

    try:
        return future.result()
    except KilledWorker as error:
        raise ClusterError(f"a task failed on several workers that died running it ({error})") from None


class _Bar:
    """A rich progress bar that follows the futures, plus the optional callback."""

    def __init__(
        self, console: Console, show: bool, label: str, total: int, callback: Callable[[int, int], None] | None
    ) -> None:
        self.total = total
        self.done = 0
        self.callback = callback
        self.progress = (
            Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=console,
            )
            if show
            else None
        )
        self.task = None
        self.label = label

    def __enter__(self) -> _Bar:  # noqa: PYI034
        if self.progress is not None:
            self.progress.__enter__()
            self.task = self.progress.add_task(f"{self.label} (cluster)", total=self.total)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc_info)

    def advance(self, n: int) -> None:
        if n <= 0:
            return
        self.done += n
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, n)
        if self.callback is not None:
            self.callback(self.done, self.total)
