"""``count --cluster``: the one counter run on a Dask cluster, a part of the pictures per task.

Every model kind scales out the same way: each task counts its pictures with the very function
a single process uses (:func:`counting.apply.chunks.count_in_chunks`, or
:func:`counting.apply.zones.count_paths_in_zones` with zones), on a copy of the model the client
loaded (its bytes are sent once to every worker, so a remote worker needs no copy of the file,
and a file changed on disk half-way cannot mix two models). The parts come back in the
pictures' order and join into one result: the same records in the same order as without a
cluster. Only the pictures themselves (and ``--weights``, ``--cache-dir``) must be readable at
the same paths on the workers, as for :mod:`counting.apply.distributed.engine`'s extraction.

A part is a whole number of the single process's batches and density chunks, so each picture
goes through the network in the same company as in a single process (the NumPy heads' last
bits depend on a batch's size).
"""

from __future__ import annotations

import atexit
import hashlib
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from counting.apply.distributed.cluster import ClusterError

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

__all__ = ["CountTask", "count_on_cluster", "count_part", "counted_parts", "part_size"]

TASKS_PER_WORKER = 4  # enough tasks to balance uneven workers and pictures
# A multiple of every chunk the single-process counter cuts its pictures into
# (CountingModel's DENSITY_CHUNK of 8 pictures, batches of up to 8): a part never splits one.
PART_MULTIPLE = 8


@dataclass(frozen=True)
class CountTask:
    """What every part of one ``count --cluster`` shares (all picklable)."""

    model_digest: str  # SHA-256 of the model file's bytes: one loaded copy per worker and model
    runtime: str
    threads: int | None
    # The client's BLAS and torch intra-op threads: the heads' products' last bits depend on them.
    blas_threads: int | None
    torch_threads: int
    batch_size: int
    cache_dir: str | None = None
    weights: str | None = None
    zones: tuple[Any, ...] = ()


# ------------------------------------------------------------------------------- on the workers
_loaded: dict[str, Any] = {}  # model digest -> the model, in each worker process


def _model_on_worker(model_bytes: bytes, digest: str) -> Any:
    """The model of ``digest``, loaded once per worker process from its bytes."""
    if digest not in _loaded:
        from counting.model.counting_model import CountingModel

        folder = tempfile.mkdtemp(prefix="counting-model-")
        atexit.register(shutil.rmtree, folder, True)  # the copy lives as long as the worker
        path = Path(folder) / "model.npz"
        path.write_bytes(model_bytes)
        _loaded.clear()  # one model at a time: a worker serving several runs keeps the latest
        _loaded[digest] = CountingModel.load(path)
    return _loaded[digest]


def count_part(model_bytes: bytes, task: CountTask, paths: list[str]) -> tuple[Any, dict | None]:
    """Count ``paths`` on a worker exactly as a single process does: ``(CountResult, zone
    records or None)``."""
    import torch
    from threadpoolctl import threadpool_limits

    # Dask starts its workers with one thread (OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1): the
    # client's numbers instead, or a count differs from the single process's in its 7th digit.
    torch.set_num_threads(task.torch_threads)
    with threadpool_limits(limits=task.blas_threads, user_api="blas"):
        return _count_part(model_bytes, task, paths)


def _count_part(model_bytes: bytes, task: CountTask, paths: list[str]) -> tuple[Any, dict | None]:
    from counting.apply.chunks import count_in_chunks
    from counting.features.backbones.runtime import configure_runtime

    model = _model_on_worker(model_bytes, task.model_digest)
    configure_runtime(task.runtime, task.threads)
    cache = None
    if task.cache_dir is not None:
        from counting.features.cache import FeatureCache

        cache = FeatureCache(task.cache_dir)
    options = {"cache": cache, "weights": task.weights, "batch_size": task.batch_size, "progress": False}
    if task.zones:
        from counting.apply.zones import count_paths_in_zones

        return count_paths_in_zones(model, paths, task.zones, **options)
    return count_in_chunks(model, paths, **options), None


# ------------------------------------------------------------------------------- on the client
def part_size(n_pictures: int, n_workers: int, batch_size: int) -> int:
    """How many pictures each task counts (the last one takes the rest): about
    ``TASKS_PER_WORKER`` tasks a worker, each a whole number of batches and density chunks, and
    at most the single process's own chunk (memory on a worker as in one process)."""
    from counting.apply.chunks import COUNT_CHUNK

    unit = math.lcm(PART_MULTIPLE, max(1, batch_size))
    wanted = math.ceil(n_pictures / max(1, n_workers * TASKS_PER_WORKER))
    return min(max(unit, math.ceil(wanted / unit) * unit), max(unit, COUNT_CHUNK // unit * unit))


def _blas_threads() -> int | None:
    from threadpoolctl import threadpool_info

    counts = [pool["num_threads"] for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return max(counts) if counts else None


def _model_bytes(model: CountingModel) -> bytes:
    path = model.path  # None for a model made in this process and not saved
    if path is None:
        raise ClusterError(f"{model.name}: --cluster sends the model file to the workers; save the model first")
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ClusterError(f"{path}: cannot read the model file to send it ({error.strerror or error})") from None


def counted_parts(
    client: Any,
    model: CountingModel,
    paths: Sequence[str],
    *,
    zones: Sequence[Any] = (),
    cache: Any = None,
    weights: str | Path | None = None,
    batch_size: int = 1,
    progress: bool = False,
) -> Iterator[tuple[Any, dict | None]]:
    """Each part's ``(CountResult, zone records or None)``, in the pictures' order, as soon as it
    and every part before it are back (the parts run at once on the cluster's workers), under
    the single process's progress bar."""
    import torch

    from counting.features.backbones.runtime import default_runtime, default_threads
    from counting.features.extract import chunk_slices

    data = _model_bytes(model)
    task = CountTask(
        model_digest=hashlib.sha256(data).hexdigest(),
        runtime=default_runtime(),
        threads=default_threads(),  # the client's: a pass's last bits depend on its threads
        blas_threads=_blas_threads(),
        torch_threads=torch.get_num_threads(),
        batch_size=int(batch_size),
        cache_dir=None if cache is None else str(cache.directory),
        weights=None if weights is None else str(weights),
        zones=tuple(zones),
    )
    shared = client.scatter(data, broadcast=True, hash=False)
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    size = part_size(len(paths), workers, int(batch_size))
    futures = [
        client.submit(count_part, shared, task, [str(path) for path in paths[start : start + size]], pure=False)
        for start in range(0, len(paths), size)
    ]
    try:
        for number, _ in enumerate(chunk_slices(len(paths), size, progress)):
            yield _result_of(futures[number])
    finally:
        client.cancel([future for future in futures if not future.done()])


def _result_of(future: Any) -> tuple[Any, dict | None]:
    """A part's result; a worker's failure as one line (a picture's own error is in the result)."""
    from counting.core.errors import CountingError

    try:
        return future.result()
    except CountingError:
        raise  # already one line naming the file (a model the worker cannot load, a zone ...)
    except Exception as error:  # noqa: BLE001 - a lost worker, a task Dask gave up on
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ClusterError(f"a worker could not count its part of the pictures ({detail})") from None


def count_on_cluster(
    client: Any,
    model: CountingModel,
    paths: Sequence[str],
    *,
    zones: Sequence[Any] = (),
    on_part: Callable[[Any, dict | None], None] | None = None,
    **options: Any,
) -> tuple[Any, dict | None]:
    """``(CountResult, zone records or None)`` of every picture, counted on ``client``'s cluster:
    what :func:`counting.apply.chunks.count_in_chunks` (or ``count_paths_in_zones``) gives in one
    process. ``on_part(result, zone_records)`` sees each part as it joins (progress, rows kept on
    an interrupt). ``options``: ``cache``, ``weights``, ``batch_size``."""
    if not paths:
        raise ClusterError("no pictures to count on the cluster")
    results, records = [], {}
    for result, part_records in counted_parts(client, model, paths, zones=zones, **options):
        results.append(result)
        if part_records is not None:
            records.update(part_records)
        if on_part is not None:
            on_part(result, part_records)
    from counting.apply.chunks import join_results

    return join_results(results), (records if zones else None)
