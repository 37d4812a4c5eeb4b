"""Many video streams at once: one Dask task per stream, each writing its own counts file.

A worker keeps the counting model (and so its backbone) loaded between streams. A stream that
fails (file missing, camera unreachable after its retries) ends with a one-line message in its
outcome and does not stop the others.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from counting.core.errors import CountingError, StreamError

__all__ = ["StreamOutcome", "count_streams", "counts_file_names", "read_sources"]

_models: dict[tuple[str, int], Any] = {}
_models_lock = threading.Lock()


@dataclass
class StreamOutcome:
    """What one stream's task did: frames counted, where the rows went, or why it failed."""

    source: str
    counts_path: str
    frames: int = 0
    seconds: float = 0.0
    mean_count: float | None = None
    interrupted: bool = False
    error: str | None = None
    worker: str = ""
    # Frames with a familiarity score, those of them unfamiliar, and frames whose count a crowd
    # model's gate disputed (VideoRun's; the CLI says them per stream).
    scored_frames: int = 0
    unfamiliar_frames: int = 0
    disputed_frames: int = 0


def read_sources(path: str | Path) -> list[str]:
    """Video files, webcam indices or stream URLs, one per line (``#`` comments, blank lines skipped)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise StreamError(
            f"{path}: cannot read the sources file ({getattr(error, 'strerror', None) or error})"
        ) from None
    sources = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    _refuse_nul_bytes(path, lines)
    if not sources:
        raise StreamError(f"{path}: no sources listed (one video file, webcam index or URL per line)")
    return sources


def _refuse_nul_bytes(path: Path, lines: list[str]) -> None:
    """A NUL byte names no file, camera or URL (the OS refuses it in a path): a one-line error
    naming the line, not the ValueError a path check raises on it later."""
    for number, line in enumerate(lines, start=1):
        if "\0" in line and not line.strip().startswith("#"):
            raise StreamError(f"{path}, line {number}: holds a NUL byte; a source is a video file, webcam index or URL")


def counts_file_names(sources: list[str], suffix: str = ".csv") -> list[str]:
    """One distinct, readable file name per source: ``01-entrance.csv``, ``02-rtsp-cam2.csv``."""
    width = max(2, len(str(len(sources))))
    names = []
    for number, source in enumerate(sources, start=1):
        stem = Path(source).stem if "://" not in source else source.split("://", 1)[1]
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:60] or "stream"
        names.append(f"{number:0{width}d}-{slug}{suffix}")
    return names


def count_streams(
    client: Any,
    sources: list[str],
    counts_dir: str | Path,
    model_path: str | Path | None = None,
    *,
    suffix: str = ".csv",
    on_done: Callable[[StreamOutcome], None] | None = None,
    runtime: str | None = None,
    threads: int | None = None,
    **video_options: Any,
) -> list[StreamOutcome]:
    """Count every source on the cluster; rows of source ``k`` go to its own file in ``counts_dir``.

    ``model_path`` (default: the shipped model) and ``counts_dir`` must be reachable from every
    worker. ``video_options`` are passed to :func:`counting.apply.video.count_video` (stride,
    smooth_window, max_frames, max_retries, batch_size). ``runtime`` / ``threads`` (default: the
    ones configured here) run each worker's backbone; without ``threads`` a worker uses its own
    default (Dask starts workers with ``OMP_NUM_THREADS=1``: one core per stream). Outcomes come
    back in source order.
    """
    from distributed import as_completed

    folder = Path(counts_dir).expanduser().absolute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StreamError(f"{folder}: cannot create the counts folder ({error.strerror or error})") from None
    model = None if model_path is None else str(Path(model_path).expanduser().absolute())
    targets = [str(folder / name) for name in counts_file_names(sources, suffix)]
    from counting.features.backbones.runtime import configured_threads, default_runtime

    runtime = runtime if runtime is not None else default_runtime()
    threads = threads if threads is not None else configured_threads()
    futures = {
        client.submit(count_stream, model, source, target, video_options, runtime, threads, pure=False): k
        for k, (source, target) in enumerate(zip(sources, targets))
    }
    outcomes: list[StreamOutcome | None] = [None] * len(sources)
    for future in as_completed(list(futures)):
        k = futures.pop(future)
        try:
            outcome = future.result()
        except Exception as error:  # noqa: BLE001 - e.g. KilledWorker: report it for this stream only
            outcome = StreamOutcome(sources[k], targets[k], error=f"{sources[k]}: {_one_line(error)}")
        outcomes[k] = outcome
        if on_done is not None:
            on_done(outcome)
    return [outcome for outcome in outcomes if outcome is not None]


def count_stream(
    model_path: str | None,
    source: str,
    counts_path: str,
    options: dict,
    runtime: str | None = None,
    threads: int | None = None,
) -> StreamOutcome:
    """Worker task: count one stream into ``counts_path`` with this worker's copy of the model."""
    from distributed import get_worker

    from counting.apply.video import count_video
    from counting.features.backbones.runtime import configure_runtime

    configure_runtime(runtime, threads)  # this worker process runs streams only for this client

    try:
        worker = str(get_worker().address)
    except ValueError:  # run outside a worker (tests, debugging)
        worker = ""
    outcome = StreamOutcome(source, counts_path, worker=worker)
    try:
        model = _load_model(model_path)
        run = count_video(model, source, records_path=counts_path, **options)
    except CountingError as error:
        outcome.error = _one_line(error)
        return outcome
    outcome.frames = run.frames
    outcome.seconds = run.seconds
    outcome.mean_count = run.mean_count
    outcome.interrupted = run.interrupted
    outcome.scored_frames = run.scored_frames
    outcome.unfamiliar_frames = run.unfamiliar_frames
    outcome.disputed_frames = run.disputed_frames
    return outcome


def _load_model(model_path: str | None) -> Any:
    """One model object (and backbone) per worker process and model file version."""
    from counting.model.counting_model import default_model_path, load_model

    path = Path(model_path) if model_path is not None else default_model_path()
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        key = (str(path), -1)  # load_model reports the missing file
    with _models_lock:
        model = _models.get(key)
    if model is None:
        model = load_model(path)
        model.get_backbone()
        with _models_lock:
            _models[key] = model
    return model


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
