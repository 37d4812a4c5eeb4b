"""What runs on a Dask worker: the backbone plugin and the extraction tasks.

A task reproduces the single-process pipeline of :func:`counting.features.extract_features`
for its batches exactly: the same images per batch, the same split by input shape and
stacking, the same runtime and thread count.

On onnxruntime that is all it takes (the trunk's output does not depend on the thread count
or on the other images of a batch; the NumPy fc head does depend on the batch's size, which is
the same). On torch a forward pass runs either eagerly or through the frozen trace, and which
of the two a single-process run would have used depends on how often the shape was seen
before, globally; a worker only knows its own history, so it records the mode it used and the
client asks for a re-run where the global order says otherwise (see ``engine``).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from counting.apply.distributed.spec import BackboneSpec
from counting.core.errors import ImageError

__all__ = [
    "BackbonePlugin",
    "ChunkJob",
    "ChunkResult",
    "ExtractionJob",
    "SurveyResult",
    "compute_chunk",
    "survey_chunk",
]

Mode = Literal["eager", "trace"]
Shape = tuple[int, ...]
# Decoding runs ahead of the network in a few threads, as in the single-process pipeline.
DECODE_THREADS = 2


@dataclass(frozen=True)
class ExtractionJob:
    """Settings shared by every chunk of one extraction (all picklable)."""

    plugin_name: str
    input_size: int | None
    roi_bits: bytes | None  # np.packbits of the ROI mask: 1/8 of the bytes on the wire
    roi_shape: tuple[int, int] | None
    grid: tuple[int, int] | None
    pooled: bool
    threads: int
    row_shape: Shape
    cache_dir: str | None = None
    cache_key: str | None = None
    cache_settings: dict | None = None
    run_id: str = ""  # one extraction call: worker-side cache objects live as long as it

    @classmethod
    def build(
        cls,
        plugin_name: str,
        prep: Any,
        grid: tuple[int, int] | None,
        pooled: bool,
        threads: int,
        row_shape: Shape,
        cache_dir: str | None,
        cache_key: str | None,
        cache_settings: dict | None,
        run_id: str = "",
    ) -> ExtractionJob:
        mask = prep.roi_mask
        return cls(
            plugin_name=plugin_name,
            input_size=prep.input_size,
            roi_bits=None if mask is None else np.packbits(mask).tobytes(),
            roi_shape=None if mask is None else tuple(mask.shape),
            grid=grid,
            pooled=pooled,
            threads=threads,
            row_shape=row_shape,
            cache_dir=cache_dir,
            cache_key=cache_key,
            cache_settings=cache_settings,
            run_id=run_id,
        )

    def roi_mask(self) -> np.ndarray | None:
        if self.roi_bits is None or self.roi_shape is None:
            return None
        count = self.roi_shape[0] * self.roi_shape[1]
        bits = np.unpackbits(np.frombuffer(self.roi_bits, dtype=np.uint8), count=count)
        return bits.reshape(self.roi_shape).astype(bool)


@dataclass(frozen=True)
class Item:
    index: int  # position in the client's path list
    path: str  # what the user gave (used in messages)
    location: str  # absolute path opened on the worker
    content_hash: str | None = None


@dataclass(frozen=True)
class ChunkJob:
    """Consecutive batches of the global to-do list; ``mode`` forces eager/trace (re-runs)."""

    batches: tuple[tuple[Item, ...], ...]
    first_batch: int
    mode: Mode | None = None


@dataclass
class SubBatch:
    batch: int  # global batch number
    indices: list[int]
    shape: Shape
    mode: Mode


@dataclass
class ChunkResult:
    indices: np.ndarray
    rows: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)
    sub_batches: list[SubBatch] = field(default_factory=list)
    worker: str = ""


@dataclass
class SurveyResult:
    hashes: list[str | None]
    cached_positions: list[int]
    cached_rows: np.ndarray


class WorkerState:
    """The backbone (loaded once per worker process) and what the tasks keep between calls."""

    def __init__(self, spec: BackboneSpec, address: str) -> None:
        from counting.features.backbones import Backbone

        self.spec = spec
        self.address = address
        backbone = spec.load(where=address)
        self.backbone = backbone
        self.eager = self.traced = backbone
        if spec.replays_trace:
            # Two views of the same modules: one always eager, one traced from the first call.
            # The trace of a shape computes the same bits however often it ran before.
            common = (backbone.name, backbone.trunk, backbone.head, backbone.normalisation, backbone.weights_sha256)
            self.eager = Backbone(*common, weights_path=backbone.weights_path, use_trace=False)
            self.traced = Backbone(*common, weights_path=backbone.weights_path, trace_after=0)
        self.seen: dict[Shape, int] = defaultdict(int)
        self.caches: dict[tuple[str, str], Any] = {}
        self.preps: dict[tuple, Any] = {}
        self.lock = threading.Lock()

    def cache(self, directory: str, run_id: str) -> Any:
        """One FeatureCache per extraction run: it lists the folder once, and a listing from an
        earlier run would miss what other workers stored since."""
        from counting.features import FeatureCache

        key = (directory, run_id)
        with self.lock:
            if key not in self.caches:
                self.caches = {old: cache for old, cache in self.caches.items() if old[1] == run_id}
                self.caches[key] = FeatureCache(directory)
            return self.caches[key]

    def preprocessing(self, job: ExtractionJob) -> Any:
        from counting.features.backbones import Preprocessing

        key = (job.input_size, job.roi_bits, job.roi_shape)
        with self.lock:
            if key not in self.preps:
                self.preps[key] = Preprocessing(input_size=job.input_size, roi_mask=job.roi_mask())
            return self.preps[key]

    def guess_mode(self, shape: Shape) -> Mode:
        """What a single-process run with this worker's history would do."""
        if not self.spec.replays_trace:
            return "eager"
        runs = self.seen[shape]
        self.seen[shape] = min(runs + 1, self.spec.trace_after)
        return "eager" if runs < self.spec.trace_after else "trace"

    def forward(self, batch: Any, mode: Mode, grid: tuple[int, int] | None, pooled: bool) -> np.ndarray:
        runner = self.eager if mode == "eager" or not self.spec.replays_trace else self.traced
        if grid is None:
            return runner.forward_pooled(batch) if pooled else runner.forward(batch)
        return runner.forward_grid_pooled(batch, grid) if pooled else runner.forward_grid(batch, grid)


try:
    from distributed import WorkerPlugin
except ImportError:  # pragma: no cover - dask is a core dependency
    WorkerPlugin = object  # type: ignore[misc,assignment]


class BackbonePlugin(WorkerPlugin):  # type: ignore[misc]
    """Loads the backbone when a worker starts (or joins later, e.g. after a restart)."""

    def __init__(self, spec: BackboneSpec) -> None:
        self.spec = spec
        self.state: WorkerState | None = None
        self.error: str | None = None

    def setup(self, worker: Any) -> None:
        try:
            self.state = WorkerState(self.spec, str(worker.address))
        except Exception as error:  # noqa: BLE001 - reported to the client as one line by each task
            self.error = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__

    def teardown(self, worker: Any) -> None:
        self.state = None


def _state(plugin_name: str) -> WorkerState:
    from distributed import get_worker

    from counting.apply.distributed.cluster import ClusterError

    worker = get_worker()
    plugin = worker.plugins.get(plugin_name)
    if plugin is None:
        raise ClusterError(f"{worker.address}: the backbone plugin is not installed on this worker")
    if plugin.state is None:
        raise ClusterError(plugin.error or f"{worker.address}: the backbone could not be loaded")
    return plugin.state


def survey_chunk(job: ExtractionJob, items: list[Item]) -> SurveyResult:
    """Content hashes of ``items`` and the rows the shared cache already holds for them."""
    state = _state(job.plugin_name)
    assert job.cache_dir is not None and job.cache_key is not None
    cache = state.cache(job.cache_dir, job.run_id)
    hashes = [cache.content_hash(item.location) for item in items]
    stored = cache.get_many(job.cache_key, [h for h in hashes if h is not None], job.row_shape)
    positions = [k for k, h in enumerate(hashes) if h is not None and h in stored]
    rows = np.stack([stored[hashes[k]] for k in positions]) if positions else np.zeros((0, *job.row_shape), np.float32)
    if len(positions) < len(items) and job.cache_settings is not None:
        cache.describe(job.cache_key, job.cache_settings)
    cache.flush()
    return SurveyResult(hashes=hashes, cached_positions=positions, cached_rows=rows.astype(np.float32, copy=False))


def _prepare(state: WorkerState, item: Item, prep: Any) -> Any:
    from counting.features.extract import prepare_path

    prepared = prepare_path(item.location, state.backbone, prep)
    if not isinstance(prepared, ImageError):
        return prepared
    message = str(prepared)
    if item.location != item.path and message.startswith(item.location):
        message = item.path + message[len(item.location) :]
    return ImageError(message)


def compute_chunk(job: ExtractionJob, chunk: ChunkJob) -> ChunkResult:
    """Descriptors for the chunk's batches, stored in the shared cache as they are computed."""
    from distributed import get_worker

    from counting.features.extract import batch_shape, configure_torch_threads, group_by_shape

    state = _state(job.plugin_name)
    if state.backbone.runtime == "torch":
        # The thread count changes the bits of some batch sizes: use the client's.
        configure_torch_threads(job.threads)
    prep = state.preprocessing(job)
    cache = state.cache(job.cache_dir, job.run_id) if job.cache_dir is not None and job.cache_key is not None else None
    result_indices: list[int] = []
    result_rows: list[np.ndarray] = []
    errors: dict[int, str] = {}
    sub_batches: list[SubBatch] = []
    with ThreadPoolExecutor(max_workers=DECODE_THREADS, thread_name_prefix="decode") as pool:
        pending = [pool.submit(lambda b=b: [_prepare(state, item, prep) for item in b]) for b in chunk.batches[:1]]
        for number, items in enumerate(chunk.batches):
            prepared = pending.pop(0).result()
            if number + 1 < len(chunk.batches):
                following = chunk.batches[number + 1]
                pending.append(pool.submit(lambda b=following: [_prepare(state, item, prep) for item in b]))
            good: list[int] = []
            for position, tensor in enumerate(prepared):
                if isinstance(tensor, ImageError):
                    errors[items[position].index] = str(tensor)
                else:
                    good.append(position)
            # The single process's split by shape and stacking, so every sub-batch is the same.
            tensors = [prepared[p] for p in good]
            for positions, batch in group_by_shape(good, tensors, state.backbone.runtime):
                shape = batch_shape(batch)
                mode = chunk.mode or state.guess_mode(shape)
                rows = state.forward(batch, mode, job.grid, job.pooled)
                indices = [items[p].index for p in positions]
                sub_batches.append(SubBatch(chunk.first_batch + number, indices, shape, mode))
                result_indices.extend(indices)
                result_rows.append(rows)
                if cache is not None:
                    for p, row in zip(positions, rows):
                        if items[p].content_hash is not None:
                            _store(cache, job.cache_key, items[p].content_hash, row, replace=chunk.mode is not None)
    rows_array = np.concatenate(result_rows) if result_rows else np.zeros((0, *job.row_shape), np.float32)
    return ChunkResult(
        indices=np.asarray(result_indices, dtype=np.int64),
        rows=rows_array.astype(np.float32, copy=False),
        errors=errors,
        sub_batches=sub_batches,
        worker=str(get_worker().address),
    )


def _store(cache: Any, key: str, content_hash: str, row: np.ndarray, replace: bool) -> None:
    """Cache one row; a re-run (``replace``) also removes entries another worker wrote for it."""
    cache.put(key, content_hash, row)
    if not replace:
        return
    from counting.features.cache import array_checksum

    keep = f"{content_hash}-{array_checksum(np.ascontiguousarray(row, dtype=np.float32))}.npy"
    for stale in Path(cache.folder(key)).glob(f"{content_hash}-*.npy"):
        if stale.name != keep:
            stale.unlink(missing_ok=True)
