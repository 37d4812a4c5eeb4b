"""Counting on video: files, webcams and RTSP/HTTP streams through OpenCV.

A reader thread decodes frames (skipping ``stride - 1`` frames with ``grab``, which does not
decode) while the main thread counts batches of frames, so decoding overlaps the forward pass.
Each frame's record is written and flushed as soon as its count exists, so an interrupted run
keeps everything computed so far. A stream that drops is reopened with exponential back-off.
"""

from __future__ import annotations

import csv
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from counting import defaults
from counting.errors import CountingError, StreamError
from counting.smoothing import StreamingSmoother

URL_PREFIXES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://")
OPEN_TIMEOUT_MS = 5000
READ_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class VideoSource:
    """What the user asked to read: a file, a webcam index or a network URL."""

    spec: str
    kind: str  # "file" | "webcam" | "url"

    @classmethod
    def parse(cls, spec: str) -> VideoSource:
        text = str(spec).strip()
        if text.isdigit():
            return cls(text, "webcam")
        if text.lower().startswith(URL_PREFIXES):
            return cls(text, "url")
        if not Path(text).is_file():
            raise StreamError(f"{text}: video file not found")
        return cls(text, "file")

    @property
    def is_live(self) -> bool:
        return self.kind != "file"

    def open(self) -> cv2.VideoCapture:
        """Open the source once; StreamError naming it when OpenCV cannot."""
        # FFmpeg and OpenCV print their own warnings straight to the terminal; the user gets our
        # one-line StreamError instead. Both settings are read when a capture is opened.
        os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
        if self.kind == "webcam":
            capture = cv2.VideoCapture(int(self.spec))
        elif self.kind == "url":
            # Bounded timeouts: an unreachable host must fail in seconds, not hang.
            capture = cv2.VideoCapture(
                self.spec,
                cv2.CAP_FFMPEG,
                [
                    cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
                    OPEN_TIMEOUT_MS,
                    cv2.CAP_PROP_READ_TIMEOUT_MSEC,
                    READ_TIMEOUT_MS,
                ],
            )
        else:
            capture = cv2.VideoCapture(self.spec)
        if not capture.isOpened():
            capture.release()
            what = {
                "file": "cannot be decoded as a video",
                "webcam": "no such camera",
                "url": "cannot open the stream (unreachable or not a video stream)",
            }[self.kind]
            raise StreamError(f"{self.spec}: {what}")
        return capture


@dataclass
class Frame:
    index: int  # 0-based position of the frame in the source
    image: np.ndarray  # BGR, as OpenCV decodes it
    time_s: float
    prepared: Any = None  # the network input, made in the reader thread when a preparer is given


_END = object()


class FrameReader:
    """Background reader yielding every ``stride``-th frame; reconnects a dropped live stream.

    ``max_retries`` reopen attempts are made with delays ``backoff * 2**k`` seconds; after that
    the stream counts as lost (StreamError). A file simply ends.
    """

    def __init__(
        self,
        source: VideoSource,
        stride: int = 1,
        max_frames: int | None = None,
        max_retries: int = 5,
        backoff: float = 0.5,
        buffer: int = 32,
        on_retry: Callable[[int, float], None] | None = None,
        prepare: Callable[[np.ndarray], Any] | None = None,
    ) -> None:
        if stride < 1:
            raise StreamError(f"{source.spec}: --stride must be at least 1, got {stride}")
        self.source = source
        self.stride = stride
        self.max_frames = max_frames
        self.max_retries = max_retries
        self.backoff = backoff
        self.on_retry = on_retry
        self.prepare = prepare
        self.capture = source.open()
        fps = self.capture.get(cv2.CAP_PROP_FPS)
        self.fps = float(fps) if fps and np.isfinite(fps) and fps > 0 else 25.0
        self.frame_size = (
            int(self.capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(self.capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        )
        self.retries_used = 0
        self._queue: queue.Queue = queue.Queue(maxsize=buffer)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="frame-reader", daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> FrameReader:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        # Unblock a reader waiting on a full queue.
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)
        self.capture.release()

    def _reconnect(self) -> bool:
        self.capture.release()
        for attempt in range(self.max_retries):
            delay = self.backoff * (2**attempt)
            if self.on_retry is not None:
                self.on_retry(attempt + 1, delay)
            if self._stop.wait(delay):
                return False
            self.retries_used += 1
            try:
                self.capture = self.source.open()
                return True
            except StreamError:
                continue
        return False

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        position, delivered = 0, 0
        try:
            while not self._stop.is_set():
                if self.max_frames is not None and delivered >= self.max_frames:
                    break
                wanted = position % self.stride == 0
                ok = self.capture.grab()
                image = None
                if ok and wanted:
                    ok, image = self.capture.retrieve()
                if not ok:
                    if not self.source.is_live:
                        break
                    if not self._reconnect():
                        self._put(
                            StreamError(
                                f"{self.source.spec}: stream lost and {self.max_retries} reconnection attempts failed"
                            )
                        )
                        return
                    continue
                if wanted:
                    stamp = (
                        position / self.fps if not self.source.is_live else time.monotonic() - self._started
                    )
                    prepared = self.prepare(image) if self.prepare is not None else None
                    if not self._put(Frame(position, image, stamp, prepared)):
                        return
                    delivered += 1
                position += 1
        except CountingError as error:  # e.g. a frame that does not fit the model's ROI mask
            self._put(error)
            return
        except Exception as error:  # noqa: BLE001 - hand any decoder failure to the main thread
            self._put(StreamError(f"{self.source.spec}: {error}"))
            return
        self._put(_END)

    def batches(self, batch_size: int) -> Iterator[list[Frame]]:
        """Full batches of ``batch_size`` frames (the last may be shorter).

        Fixed-size batches keep the backbone on one traced input shape; a partial batch would
        trigger a new trace, which costs far more than waiting for a few frames.
        """
        batch: list[Frame] = []
        while True:
            item = self._queue.get()
            if item is _END:
                break
            if isinstance(item, CountingError):
                if batch:
                    yield batch
                raise item
            batch.append(item)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch


class RecordSink:
    """Per-frame records to CSV or JSON lines (by suffix), flushed after every record."""

    def __init__(self, path: str | Path, fields: list[str]) -> None:
        self.path = Path(path)
        self.fields = fields
        self.format = "csv" if self.path.suffix.lower() == ".csv" else "jsonl"
        try:
            self._handle = open(self.path, "w", newline="", encoding="utf-8")
        except OSError as error:
            raise StreamError(f"{self.path}: cannot write ({error.strerror or error})") from None
        self._writer = None
        if self.format == "csv":
            self._writer = csv.DictWriter(self._handle, fieldnames=fields)
            self._writer.writeheader()
            self._handle.flush()
        self.written = 0

    def write(self, record: dict) -> None:
        if self._writer is not None:
            self._writer.writerow({key: _csv_value(record.get(key)) for key in self.fields})
        else:
            self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()
        self.written += 1

    def close(self) -> None:
        self._handle.close()


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else value


def annotate(image: np.ndarray, text: str) -> np.ndarray:
    """Draw the count in a dark box in the top-left corner (scaled to the frame height)."""
    scale = max(0.5, image.shape[0] / 480.0)
    thickness = max(1, int(round(2 * scale)))
    (width, height), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 0.8 * scale, thickness)
    pad = int(8 * scale)
    cv2.rectangle(image, (0, 0), (width + 2 * pad, height + baseline + 2 * pad), (0, 0, 0), -1)
    cv2.putText(
        image,
        text,
        (pad, pad + height),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.8 * scale,
        (0, 255, 255),
        thickness,
        cv2.LINE_AA,
    )
    return image


def open_video_writer(path: str | Path, fps: float, frame_size: tuple[int, int]) -> cv2.VideoWriter:
    """A writer for the annotated video; codec by suffix (.avi: MJPG, otherwise mp4v)."""
    target = Path(path)
    fourcc = cv2.VideoWriter_fourcc(*("MJPG" if target.suffix.lower() == ".avi" else "mp4v"))
    writer = cv2.VideoWriter(str(target), fourcc, fps, frame_size)
    if not writer.isOpened():
        raise StreamError(f"{target}: cannot write a video here (try a .avi or .mp4 name)")
    return writer


@dataclass
class VideoRun:
    """What a video run did."""

    source: str
    frames: int = 0
    seconds: float = 0.0
    source_fps: float = 0.0
    stride: int = 1
    retries: int = 0
    interrupted: bool = False
    mean_count: float | None = None
    records: list[dict] = field(default_factory=list)

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def realtime_ratio(self) -> float:
        """Source seconds processed per wall-clock second (>= 1: keeps up with the source)."""
        if self.seconds <= 0 or self.source_fps <= 0:
            return 0.0
        return self.frames * self.stride / self.source_fps / self.seconds


def count_video(
    model: Any,
    source: str | VideoSource,
    stride: int = 1,
    smooth_window: int = 1,
    records_path: str | Path | None = None,
    output_video: str | Path | None = None,
    batch_size: int = defaults.VIDEO_BATCH_SIZE,
    max_frames: int | None = None,
    max_retries: int = 5,
    backoff: float = 0.5,
    on_record: Callable[[dict], None] | None = None,
    on_retry: Callable[[int, float], None] | None = None,
    keep_records: bool = False,
) -> VideoRun:
    """Count people in every ``stride``-th frame of ``source``.

    Records (frame, time_s, count[, low, high][, smoothed]) go to ``records_path`` as they are
    computed. Ctrl-C stops cleanly: the run is returned with ``interrupted=True`` and everything
    written so far stays on disk.
    """
    video = source if isinstance(source, VideoSource) else VideoSource.parse(source)
    names = model.class_names
    count_fields = [f"count_{name}" for name in names] if names else ["count"]
    fields = ["frame", "time_s"] + count_fields
    if model.interval is not None and not names:
        fields += ["low", "high"]
    if smooth_window > 1:
        fields += [f"smoothed_{name}" for name in names] if names else ["smoothed"]
    smoother = StreamingSmoother(smooth_window) if smooth_window > 1 else None
    sink = RecordSink(records_path, fields) if records_path is not None else None
    writer = None
    run = VideoRun(source=video.spec, stride=stride)
    total = 0.0
    started = time.perf_counter()
    try:

        def prepare(image: np.ndarray) -> Any:
            # Runs in the reader thread: colour conversion, resize and normalisation overlap
            # the forward pass of the previous batch (OpenCV, PIL and torch release the GIL).
            return model.prepare_image(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), source=video.spec)

        with FrameReader(
            video, stride, max_frames, max_retries, backoff, on_retry=on_retry, prepare=prepare
        ) as reader:
            run.source_fps = reader.fps
            if output_video is not None:
                writer = open_video_writer(output_video, reader.fps / stride, reader.frame_size)
            try:
                for batch in reader.batches(batch_size):
                    counts = model.count_prepared([frame.prepared for frame in batch])
                    lows, highs = model.intervals(counts)
                    for k, frame in enumerate(batch):
                        record: dict[str, Any] = {"frame": frame.index, "time_s": round(frame.time_s, 3)}
                        count = counts[k]
                        if names:
                            record.update({f"count_{n}": float(v) for n, v in zip(names, count)})
                        else:
                            record["count"] = float(count)
                            total += float(count)
                        if lows is not None and not names:
                            record["low"], record["high"] = float(lows[k]), float(highs[k])
                        label = f"count {float(np.sum(count)):.1f}"
                        if smoother is not None:
                            smoothed = smoother.update(count)
                            if names:
                                record.update({f"smoothed_{n}": float(v) for n, v in zip(names, smoothed)})
                            else:
                                record["smoothed"] = float(smoothed)
                                label = f"count {smoothed:.1f}"
                        if "low" in record:
                            label += f" [{record['low']:.0f}-{record['high']:.0f}]"
                        if sink is not None:
                            sink.write(record)
                        if writer is not None:
                            writer.write(annotate(frame.image, label))
                        run.frames += 1
                        if keep_records:
                            run.records.append(record)
                        if on_record is not None:
                            on_record(record)
            except KeyboardInterrupt:
                run.interrupted = True
            run.retries = reader.retries_used
    finally:
        run.seconds = time.perf_counter() - started
        if sink is not None:
            sink.close()
        if writer is not None:
            writer.release()
    if run.frames and not names:
        run.mean_count = total / run.frames
    return run
