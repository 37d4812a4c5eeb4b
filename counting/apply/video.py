"""Counting on video: files, webcams and RTSP/HTTP streams through OpenCV.

A reader thread decodes frames (skipping ``stride - 1`` frames with ``grab``, which does not
decode) while the main thread counts batches of frames, so decoding overlaps the forward pass.
Each frame's record is written and flushed as soon as its count exists, so an interrupted run
keeps everything computed so far. A stream that drops is reopened with exponential back-off.

Finite or live: a file is finite; a URL is finite when the opened capture reports a frame
count (an HTTP URL of a video file does, a camera stream does not). A finite source ends at its
end and is never reopened (reopening would read it again from frame 0); a finite source that
stops well before its frame count is damaged, which is reported with the frame number. Only
live sources reconnect, within one retry budget for the whole run that also covers the first
connection.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import queue
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from counting.apply.records import FRAME_COLUMNS, frame_columns, picture_record
from counting.apply.smoothing import CausalSmoother
from counting.apply.zone_drawing import draw_zones
from counting.apply.zones import Zone, check_localises, density_records, zone_weights
from counting.core import defaults
from counting.core.columns import class_column
from counting.core.errors import CountingError, StreamError
from counting.core.files import flush_standard_streams, open_descriptor, reason
from counting.core.inflight import computed_in_order
from counting.core.signals import sigterm_as_interrupt
from counting.heads.crowd.sparse_gate import BY_BOTH
from counting.heads.results import CountBatch

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

URL_PREFIXES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://")
OPEN_TIMEOUT_MS = 5000
READ_TIMEOUT_MS = 5000
# Container frame counts are estimates for some formats (duration x fps); a file counts as
# damaged only when it stops more than this many frames (or 1 %) before its stated count.
FRAME_COUNT_SLACK = 2
# With --ignore-errors, how many undecodable frames in a row are skipped before giving up.
MAX_CONSECUTIVE_BAD_FRAMES = 25
# The count label's smallest size (times the size at 480 px): Hershey digits about 7 px high, still
# legible. A picture narrower than the label even at this size has it cut at its right edge.
MIN_LABEL_SCALE = 0.375
# The annotated video's largest frame (Full HD): a frame over it is drawn scaled down. Drawn at its
# own size, a 7680x4320 frame's heat map took float copies of 400 MB each and the frames read
# ahead for drawing 100 MB each: 3.1 GB at the peak for a 10-frame clip (issue 49), 1.5 GB now.
MAX_ANNOTATED_PIXELS = 1920 * 1080


@dataclass(frozen=True)
class VideoSource:
    """What the user asked to read: a file, a webcam index or a network URL."""

    spec: str
    kind: str  # "file" | "webcam" | "url"
    live: bool | None = None  # None: decided when opened (see the module docstring)

    @classmethod
    def parse(cls, spec: str) -> VideoSource:
        text = str(spec).strip()
        if text.isdigit():
            return cls(text, "webcam")
        if text.lower().startswith(URL_PREFIXES):
            return cls(text, "url")
        if not Path(text).is_file():
            if Path(text).is_dir():
                raise StreamError(f"{text}: is a folder, not a video file")
            if Path(text).exists():
                raise StreamError(f"{text}: not a regular file (a device or pipe), not a video file")
            raise StreamError(f"{text}: video file not found")
        return cls(text, "file")

    @property
    def is_live(self) -> bool:
        """Live before opening: webcams and URLs, unless ``live`` says otherwise."""
        return self.live if self.live is not None else self.kind != "file"

    def open(self) -> cv2.VideoCapture:
        """Open the source once; StreamError naming it when OpenCV cannot."""
        _quiet_opencv()
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


def _quiet_opencv() -> None:
    # FFmpeg and OpenCV print their own warnings straight to the terminal; the user gets our
    # one-line error instead. Both settings are read when a capture is opened.
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)


@dataclass
class Frame:
    index: int  # 0-based position of the frame in the source
    image: np.ndarray | None  # BGR, as OpenCV decodes it, or what the reader's ``keep`` kept of it
    time_s: float
    prepared: Any = None  # the network input, made in the reader thread when a preparer is given
    size: tuple[int, int] = (0, 0)  # (height, width) of the decoded frame, whatever ``image`` holds


def annotated_size(frame_size: tuple[int, int]) -> tuple[int, int]:
    """``(width, height)`` the annotated video of ``frame_size`` (width, height) frames is drawn
    at: their own size up to :data:`MAX_ANNOTATED_PIXELS`, else scaled down to it (aspect kept,
    even sides for the codecs)."""
    width, height = frame_size
    if width <= 0 or height <= 0 or width * height <= MAX_ANNOTATED_PIXELS:
        return frame_size
    scale = math.sqrt(MAX_ANNOTATED_PIXELS / (width * height))
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


def picture_for_drawing(image: np.ndarray) -> np.ndarray:
    """The frame as the annotated video draws it: itself, or a copy at :func:`annotated_size`
    (made in the reader thread, so only the small copy waits in the queue)."""
    height, width = image.shape[:2]
    size = annotated_size((width, height))
    if size == (width, height):
        return image
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def no_picture(image: np.ndarray) -> None:
    """Keeps nothing of a frame: without an annotated video only its network input is needed."""
    return None


def _whole_picture(image: np.ndarray) -> np.ndarray:
    return image


def zones_on_picture(zones: Sequence[Zone], frame: tuple[int, int], picture: tuple[int, int]) -> Sequence[Zone]:
    """``zones`` drawn on a picture of ``picture`` (height, width) made from a ``frame`` (height,
    width) frame: zones in pixels scaled with it (relative zones fit any size)."""
    if frame == picture or not any(not zone.relative for zone in zones):
        return zones
    scale_x, scale_y = picture[1] / frame[1], picture[0] / frame[0]
    return [
        zone
        if zone.relative
        else Zone(zone.name, tuple((x * scale_x, y * scale_y) for x, y in zone.points), relative=False)
        for zone in zones
    ]


@dataclass(frozen=True)
class DecodeProblem:
    """A frame of a finite source that could not be decoded (a warning, not the end)."""

    frame: int
    message: str


_END = object()


class FrameReader:
    """Background reader yielding every ``stride``-th frame; reconnects a dropped live stream.

    At most ``max_retries`` reopen attempts are made in the whole run (the first connection of
    a URL included), with delays ``backoff * 2**k`` seconds for the k-th failure in a row; after
    that the stream counts as lost (StreamError). A finite source ends at its end; frames it
    cannot decode before that are reported as :class:`DecodeProblem` and end the reading,
    unless ``skip_bad_frames``, which skips them.
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
        skip_bad_frames: bool = False,
        on_problem: Callable[[DecodeProblem], None] | None = None,
        keep: Callable[[np.ndarray], np.ndarray | None] = _whole_picture,
    ) -> None:
        if stride < 1:
            raise StreamError(f"{source.spec}: --stride must be at least 1, got {stride}")
        self.source = source
        self.stride = stride
        self.max_frames = max_frames
        self.max_retries = max_retries
        self.backoff = backoff
        self.on_retry = on_retry
        self.on_problem = on_problem
        self.prepare = prepare
        self.skip_bad_frames = skip_bad_frames
        # What a frame keeps of its picture (Frame.image): frames wait in the queue and in batches
        # in flight, and an 8K frame is 100 MB (count_video keeps a bounded copy, or nothing).
        self.keep = keep
        self.retries_used = 0
        self._stop = threading.Event()
        self.capture = self._first_connection()
        count = self.capture.get(cv2.CAP_PROP_FRAME_COUNT)
        self.frame_count = int(count) if count and np.isfinite(count) and count > 0 else None
        if source.live is not None:
            self.live = source.live
        else:
            self.live = source.kind == "webcam" or (source.kind == "url" and self.frame_count is None)
        self.problems: list[DecodeProblem] = []
        fps = self.capture.get(cv2.CAP_PROP_FPS)
        self.fps = float(fps) if fps and np.isfinite(fps) and fps > 0 else 25.0
        self.frame_size = (
            int(self.capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(self.capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        )
        self._queue: queue.Queue = queue.Queue(maxsize=buffer)
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

    def _first_connection(self) -> cv2.VideoCapture:
        """Open the source; a URL gets the same retry budget as a dropped stream."""
        try:
            return self.source.open()
        except StreamError:
            if self.source.kind != "url" or self.source.live is False:
                raise
        capture = self._retry_open()
        if capture is None:
            raise StreamError(
                f"{self.source.spec}: cannot open the stream after {self.retries_used} reconnection attempts"
            )
        return capture

    def _retry_open(self) -> cv2.VideoCapture | None:
        """Reopen within what is left of the run's retry budget; None when it is spent."""
        failures = 0
        while self.retries_used < self.max_retries:
            delay = self.backoff * (2**failures)
            if self.on_retry is not None:
                self.on_retry(self.retries_used + 1, delay)
            if self._stop.wait(delay):
                return None
            self.retries_used += 1
            try:
                return self.source.open()
            except StreamError:
                failures += 1
        return None

    def _reconnect(self) -> bool:
        self.capture.release()
        capture = self._retry_open()
        if capture is None:
            return False
        self.capture = capture
        return True

    def _ended_early(self, position: int) -> bool:
        if self.frame_count is None:
            return False
        return self.frame_count - position > max(FRAME_COUNT_SLACK, self.frame_count // 100)

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
        first_bad: int | None = None  # start of the current run of undecodable frames
        stated = f" of {self.frame_count}" if self.frame_count else ""
        try:
            while not self._stop.is_set():
                if self.max_frames is not None and delivered >= self.max_frames:
                    break
                wanted = position % self.stride == 0
                grabbed = self.capture.grab()
                ok, image = grabbed, None
                if ok and wanted:
                    ok, image = self.capture.retrieve()
                if not ok:
                    if not self.live:
                        if not (grabbed or self._ended_early(position)):
                            break  # the real end of the file
                        # A frame the container promises but that cannot be decoded.
                        first_bad = position if first_bad is None else first_bad
                        if self.skip_bad_frames and position - first_bad < MAX_CONSECUTIVE_BAD_FRAMES:
                            position += 1
                            self.capture.set(cv2.CAP_PROP_POS_FRAMES, position)
                            continue
                        self._put(
                            DecodeProblem(
                                first_bad,
                                f"{self.source.spec}: cannot read past frame {first_bad}{stated} "
                                "(damaged or truncated file)",
                            )
                        )
                        first_bad = None
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
                    stamp = position / self.fps if not self.live else time.monotonic() - self._started
                    prepared = self.prepare(image) if self.prepare is not None else None
                    if not self._put(Frame(position, self.keep(image), stamp, prepared, image.shape[:2])):
                        return
                    delivered += 1
                if first_bad is not None:  # skipped frames, then a good one again
                    bad = f"frame {first_bad}" if position - first_bad == 1 else f"frames {first_bad}-{position - 1}"
                    self._put(DecodeProblem(first_bad, f"{self.source.spec}: {bad}{stated} cannot be decoded"))
                    first_bad = None
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
            if isinstance(item, DecodeProblem):
                self.problems.append(item)
                if self.on_problem is not None:
                    self.on_problem(item)
                continue
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
    """Per-frame records to CSV or JSON lines, one whole row per write.

    The format is the one asked for (``--csv`` / ``--jsonl``); without one it follows the name
    (``.csv``: CSV, anything else JSON lines), as for the per-stream files of ``--counts-dir``.

    Opened only once the source is open (a missing video must not empty an existing file).
    Each row is formatted first and written with one unbuffered write; if the disk fills up in
    the middle of it, the file is cut back to the end of the last whole row, so a reader never
    sees half a row.
    """

    def __init__(self, path: str | Path, fields: list[str], format: str | None = None) -> None:
        self.path = Path(path)
        self.fields = fields
        self.format = format or ("csv" if self.path.suffix.lower() == ".csv" else "jsonl")
        try:
            self._handle = self._open()
        except OSError as error:
            raise StreamError(f"{self.path}: cannot write ({reason(error)})") from None
        self.written = 0
        # Where the last whole row ends: a descriptor on a regular file (`--csv /dev/stdout > log`)
        # is written at its offset, after what the process already wrote there.
        self._good_size = self._handle.tell() if self._handle.seekable() else 0
        if self.format == "csv":
            self._write_line(self._csv_line(fields))

    def _open(self) -> Any:
        """The file, or a copy of the open descriptor it names (``/dev/stdout``, ``/dev/fd/N``,
        ``>(cmd)``): opening that path anew truncated ``log.txt`` in ``--csv /dev/stdout > log.txt``."""
        descriptor = open_descriptor(self.path)
        if descriptor is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return open(self.path, "wb", buffering=0)  # noqa: SIM115 - closed in close()
        flush_standard_streams()  # what was printed before comes first
        return os.fdopen(os.dup(descriptor), "wb", buffering=0)

    @staticmethod
    def _csv_line(cells: list[Any]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer).writerow(cells)
        return buffer.getvalue()

    def _write_line(self, line: str) -> None:
        data = line.encode("utf-8", "surrogateescape")
        try:
            view = memoryview(data)
            while view:
                view = view[self._handle.write(view) :]
        except OSError as error:
            self._cut_back()
            kept = f"; {self.written} rows kept" if self.written else ""
            raise StreamError(f"{self.path}: cannot write ({reason(error)}){kept}") from None
        self._good_size += len(data)

    def _cut_back(self) -> None:
        try:
            if self._handle.seekable():
                self._handle.truncate(self._good_size)
                self._handle.seek(self._good_size)
        except OSError:
            pass  # nothing more can be done on a device that refuses even that

    def write(self, record: dict) -> None:
        if self.format == "csv":
            line = self._csv_line([_csv_value(record.get(key)) for key in self.fields])
        else:
            line = json.dumps(record) + "\n"
        self._write_line(line)
        self.written += 1

    def close(self) -> None:
        self._handle.close()


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else value


# The marks a record's count may carry (its key, and the words drawn after the count).
UNRELIABLE_MARKS = (("unfamiliar", "unlike training"), ("disputed", "disputed"))


def overlay_label(record: dict, names: list[str] | None = None, raw: bool = False) -> str:
    """The text drawn on a frame, made from its record: a count beside its own interval only.

    With smoothing, the smoothed count and the smoothed count's interval (``smoothed_low``,
    ``smoothed_high``); without, the frame's own count and interval. The ends are rounded
    outwards, so the drawn interval holds the drawn count whenever the record's interval holds the
    record's count. Per-class models draw the total over the classes, without an interval (the
    classes' intervals do not make one for the total). What marks the count unreliable is
    :func:`overlay_note`, drawn under it. ``raw``: the frame's own count even when the record has
    a smoothed one, called "raw count" then (the zones drawn beside it are the frame's own counts,
    and a smoothed total beside them would not be their sum).
    """
    smoothed = class_column("smoothed", names[0]) if names else "smoothed"
    key = "smoothed" if smoothed in record and not raw else "count"
    word = "raw count" if smoothed in record and raw else key
    if names:
        return f"{word} {sum(float(record[class_column(key, name)]) for name in names):.1f}"
    low_key, high_key = ("smoothed_low", "smoothed_high") if key == "smoothed" else ("low", "high")
    text = f"{word} {float(record[key]):.1f}"
    if record.get(low_key) is not None and record.get(high_key) is not None:
        text += f" [{math.floor(record[low_key]):d}-{math.ceil(record[high_key]):d}]"
    return text


def video_heat_top(top: float, density: np.ndarray, model_top: float | None) -> float:
    """The heat map's top for a video's next frame: the densest frame's so far (each frame's
    :func:`~counting.heads.density.heatmap.picture_top`, floored, at most the model's top).

    It only grows, so once the video's densest frame has passed its frames share one scale; on
    the model's own top (1.4 people a cell for the crowd model, set by ShanghaiTech A) a Mall
    frame's peak of 0.5 was drawn at a third of it, a faint wash: no heat map to see.
    """
    from counting.heads.density.heatmap import picture_top

    return max(top, picture_top(density, model_top))


def overlay_note(record: dict) -> str | None:
    """The marks of a count its record says is unreliable, as count's table shows them ("unlike
    training": ``unfamiliar``; "disputed": a crowd model's sparse gate, counting.heads.crowd.sparse_gate),
    or None: drawn under the count, so a picture shared without its records keeps the warning."""
    marks = [mark for key, mark in UNRELIABLE_MARKS if record.get(key)]
    return ", ".join(marks) if marks else None


def annotate(image: np.ndarray, text: str, note: str | None = None) -> np.ndarray:
    """Draw the count in a dark box in the top-left corner, scaled to the frame height, or to the
    frame width where that is narrower (see :func:`label_scale`); ``note`` (:func:`overlay_note`)
    in red in a box under it, no larger than the count (a longer label would have shrunk the
    count's digits on a narrow frame)."""
    scale = label_scale(text, image.shape[1], image.shape[0])
    bottom = _draw_label(image, text, scale, 0, (0, 255, 255))
    if note:
        _draw_label(image, note, min(scale, label_scale(note, image.shape[1], image.shape[0])), bottom, (80, 80, 255))
    return image


def _draw_label(image: np.ndarray, text: str, scale: float, top: int, colour: tuple[int, int, int]) -> int:
    """One label's dark box with ``text`` from row ``top``; the row under the box."""
    (width, height), baseline, thickness, pad = _label_size(text, scale)
    bottom = top + height + baseline + 2 * pad
    cv2.rectangle(image, (0, top), (width + 2 * pad, bottom), (0, 0, 0), -1)
    cv2.putText(
        image,
        text,
        (pad, top + pad + height),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.8 * scale,
        colour,
        thickness,
        cv2.LINE_AA,
    )
    return bottom + 1


def label_scale(text: str, width: int, height: int) -> float:
    """The size of the count label on a ``width`` x ``height`` picture (1: a 480-px-high frame).

    It follows the height, so the label reads the same on any size of frame; on a tall, narrow
    picture (a phone video held upright, a column of photos) that label would be wider than the
    picture and cut off (``smoo`` of ``smoothed 26.8``), so it shrinks to the width, down to
    :data:`MIN_LABEL_SCALE`.
    """
    scale = max(0.5, height / 480.0)
    box = _label_width(text, scale)
    if box <= width:
        return scale
    scale = max(MIN_LABEL_SCALE, scale * width / box)  # the width is close to proportional to it
    # The stroke width is rounded to whole pixels, so the first guess can be a little too wide.
    while scale > MIN_LABEL_SCALE and _label_width(text, scale) > width:
        scale = max(MIN_LABEL_SCALE, scale * 0.95)
    return scale


def _label_width(text: str, scale: float) -> int:
    """The columns the label's box covers (the rectangle's corners are both drawn)."""
    (text_width, _), _, _, pad = _label_size(text, scale)
    return text_width + 2 * pad + 1


def _label_size(text: str, scale: float) -> tuple[tuple[int, int], int, int, int]:
    """``((text width, text height), baseline, stroke thickness, padding)`` of the label at ``scale``."""
    thickness = max(1, int(round(2 * scale)))
    size, baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 0.8 * scale, thickness)
    return size, baseline, thickness, int(8 * scale)


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
    # Frames with a familiarity score, and those of them below the model's threshold
    # (counting.heads.familiarity); both 0 for a model file without a familiarity section.
    scored_frames: int = 0
    unfamiliar_frames: int = 0
    # Frames a crowd model's sparse gate disputed (counting.heads.crowd.sparse_gate, "Disputed counts").
    disputed_frames: int = 0
    records: list[dict] = field(default_factory=list)
    problems: list[DecodeProblem] = field(default_factory=list)  # frames that could not be decoded
    # Whether the counts file and the annotated video were written: a run stopped before its
    # first frame leaves both as they were (the CLI then must not say it wrote them).
    records_written: bool = False
    video_written: bool = False

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
    model: CountingModel,
    source: str | VideoSource,
    stride: int = 1,
    smooth_window: int = 1,
    records_path: str | Path | None = None,
    records_format: str | None = None,
    output_video: str | Path | None = None,
    batch_size: int = defaults.VIDEO_BATCH_SIZE,
    max_frames: int | None = None,
    max_retries: int = 5,
    backoff: float = 0.5,
    on_record: Callable[[dict], None] | None = None,
    on_retry: Callable[[int, float], None] | None = None,
    keep_records: bool = False,
    skip_bad_frames: bool = False,
    on_problem: Callable[[DecodeProblem], None] | None = None,
    zones: Sequence[Zone] = (),
) -> VideoRun:
    """Count people in every ``stride``-th frame of ``source``.

    Records (frame, time_s, count[, low, high][, smoothed[, smoothed_low, smoothed_high]]) go to
    ``records_path`` as they are computed (``records_format`` "csv" or "jsonl"; None: by its name). ``smooth_window`` N > 1 adds the causal filter's count
    (``counting.apply.smoothing.CausalSmoother``, span N counted frames: frames <= t only) with its own
    interval, the model's calibrated interval around the smoothed count; the annotated video then
    draws that pair (``overlay_label``), never a smoothed count beside the frame's raw interval.
    Ctrl-C (or SIGTERM, when called from the main thread) stops cleanly: the run is returned with
    ``interrupted=True``, everything written so far stays on disk and the annotated video is
    closed so that it plays. A frame's row, its picture in the video and ``on_record`` happen
    together or not at all (an interrupt waits for them), so ``run.frames`` is the number of rows
    kept. The annotated video is written under a temporary name and renamed into place when
    closed, once it is known whole (an existing file is replaced only by a video that holds every
    frame written, at least one: OpenCV's writer says nothing when the disk fills up, see
    :func:`_unfinished`); otherwise OutputError, and ``run.records_written`` /
    ``run.video_written`` say what was written. Frames of a finite source that cannot be decoded
    end up in ``run.problems``; ``skip_bad_frames`` reads on past them.

    ``zones`` (counting.apply.zones, density-head models): each record gains the count in each
    zone (``zone_NAME``, ``zone_NAME_low``, ``zone_NAME_high``) and the annotated video draws the
    zones with their counts over the heat map, and the frame's own count beside them ("raw count",
    even with smoothing: the sum of the zones). The heat map's scale is :func:`video_heat_top`'s. A model that cannot localise, or a zone outside
    the frames, raises ZoneError before the first frame is counted.
    """
    if zones:
        check_localises(model)
    video = source if isinstance(source, VideoSource) else VideoSource.parse(source)
    columns = frame_columns(model, zones, smoothed=smooth_window > 1)
    outputs = _FrameOutputs(records_path, columns, records_format, output_video)
    run = VideoRun(source=video.spec, stride=stride)
    smoothing = _FrameSmoothing.of(model, smooth_window)
    frames = _FrameCounter(model, zones, run, outputs, keep_records, on_record, smoothing)
    started = time.perf_counter()
    stack = ExitStack()
    stack.enter_context(sigterm_as_interrupt())  # SIGTERM stops the run like Ctrl-C (counting.core.signals)
    failed = True  # until the run ends without an exception
    try:
        reading = _FrameReading(stride, max_frames, max_retries, backoff, skip_bad_frames, batch_size)
        reader = _open_reader(model, video, reading, output_video is not None, on_retry, on_problem)
        with reader:
            _count_frames(frames, reader, reading)
        failed = False
    finally:
        stack.close()
        run.seconds = time.perf_counter() - started
        outputs.close(run, failed)
    if run.frames == 0 and not run.interrupted:
        raise StreamError(f"{video.spec}: no frame could be decoded (not a video, or an empty one)")
    if run.frames and not model.class_names:
        run.mean_count = frames.total / run.frames
    return run


@dataclass(frozen=True)
class _FrameReading:
    """How count_video reads its source: which frames, how many, how it retries and batches them."""

    stride: int
    max_frames: int | None
    max_retries: int
    backoff: float
    skip_bad_frames: bool
    batch_size: int


def _open_reader(
    model: CountingModel,
    video: VideoSource,
    reading: _FrameReading,
    annotated: bool,
    on_retry: Callable[[int, float], None] | None,
    on_problem: Callable[[DecodeProblem], None] | None,
) -> FrameReader:
    """The source opened, its frames prepared for the model in the reader thread."""

    def prepare(image: np.ndarray) -> Any:
        # Runs in the reader thread: colour conversion, resize and normalisation overlap
        # the forward pass of the previous batch (OpenCV, PIL and torch release the GIL).
        return model.prepare_image(image, source=video.spec, bgr=True)

    return FrameReader(
        video,
        reading.stride,
        reading.max_frames,
        reading.max_retries,
        reading.backoff,
        on_retry=on_retry,
        prepare=prepare,
        skip_bad_frames=reading.skip_bad_frames,
        on_problem=on_problem,
        keep=picture_for_drawing if annotated else no_picture,
        # Prepared frames waiting: the two batches in flight can be read ahead, no more (a
        # 720-px frame is 8 MB as network input; 32 of them held 270 MB, issue 21 item 4).
        buffer=max(2 * reading.batch_size, 4),
    )


def _count_frames(frames: _FrameCounter, reader: FrameReader, reading: _FrameReading) -> None:
    """Count the open source's frames batch by batch until it ends (or Ctrl-C: ``run.interrupted``)."""
    model, zones, run = frames.model, frames.zones, frames.run
    run.source_fps = reader.fps
    run.problems = reader.problems
    frame_width, frame_height = reader.frame_size
    if zones and frame_width > 0 and frame_height > 0:  # a zone outside the frames fails
        zone_weights(zones, (frame_height, frame_width), model)  # now, before any output opens
    # Outputs are opened only now that the source is open and gives frames.
    frames.outputs.open_video(reader.fps / reading.stride, annotated_size(reader.frame_size))
    try:
        # A density-head model draws its map on the annotated video: one pass gives both.
        drawn = frames.outputs.writer is not None
        with_density = (drawn or bool(zones)) and model.density_head is not None
        painter = _FramePainter(model, zones) if drawn else None
        for batch, counted in _counted_batches(model, reader.batches(reading.batch_size), with_density):
            frames.take(batch, counted, painter)
    except KeyboardInterrupt:
        run.interrupted = True
    run.retries = reader.retries_used


@dataclass
class _FrameSmoothing:
    """Each frame's smoothed count (``smooth_window`` > 1) and its own interval (:func:`_smoothed_fields`)."""

    model: CountingModel
    smoother: CausalSmoother
    # A crowd model's smoothed count as it would be with each disputed frame at its other reading
    # (CountingModel.intervals' readings): the smoothed interval covers both (_smoothed_fields).
    other: CausalSmoother | None

    @classmethod
    def of(cls, model: CountingModel, window: int) -> _FrameSmoothing | None:
        if window <= 1:
            return None
        return cls(model, CausalSmoother(window), CausalSmoother(window) if model.sparse_gate is not None else None)

    def fields(self, counted: CountBatch, k: int) -> dict[str, float]:
        """The smoothed fields of frame ``k`` of the batch, the frames before it already seen."""
        count, readings = counted.counts[k], counted.readings
        route = None if counted.routes is None else counted.routes[k : k + 1]
        other = None
        if self.other is not None:
            disputed = readings is not None and np.isfinite(readings[k])
            other = self.other.update(readings[k] if disputed else count)
        return _smoothed_fields(self.model, self.model.class_names, self.smoother.update(count), route, other)


@dataclass
class _FrameCounter:
    """Each counted frame's record (counting.apply.records) and what is done with it: written with
    its picture, added to the run's tally, handed to ``on_record``."""

    model: CountingModel
    zones: Sequence[Zone]
    run: VideoRun
    outputs: _FrameOutputs
    keep_records: bool = False
    on_record: Callable[[dict], None] | None = None
    smoothing: _FrameSmoothing | None = None
    total: float = 0.0  # of the frames' counts (single-count models), for the run's mean

    def take(self, frames: list[Frame], counted: CountBatch, painter: _FramePainter | None) -> None:
        """One batch of frames and their counts, frame by frame in order."""
        in_zones = None
        if self.zones and counted.density is not None:
            in_zones = density_records(
                self.model,
                self.zones,
                frames[0].size,
                counted.density,
                counted.counts,
                routes=counted.routes,
                readings=counted.readings,
            )
        for k, frame in enumerate(frames):
            zone_record = None if in_zones is None else in_zones[k]["zones"]
            smoothed = None if self.smoothing is None else self.smoothing.fields(counted, k)
            leading = {"frame": frame.index, "time_s": round(frame.time_s, 3)}
            record = picture_record(self.model, counted, k, leading, zone_record, smoothed, FRAME_COLUMNS)
            picture = None if painter is None else painter.draw(frame, record, counted, k, zone_record)
            with _interrupts_held():  # the row, the picture and the line: all or none
                self.outputs.write(record, picture)
                self._tally(record)

    def _tally(self, record: dict[str, Any]) -> None:
        run = self.run
        run.frames += 1
        if not self.model.class_names:
            self.total += record["count"]
        run.disputed_frames += int(record.get("disputed", False))
        if record["familiarity"] is not None:
            run.scored_frames += 1
            run.unfamiliar_frames += int(record["unfamiliar"])
        if self.keep_records:
            run.records.append(record)
        if self.on_record is not None:
            self.on_record(record)


@dataclass
class _FramePainter:
    """The annotated video's picture of a frame: the density map's heat (scaled by
    :func:`video_heat_top`), the people a crowd model's detector counted, the zones with their
    counts, and the count's label (:func:`overlay_label`, :func:`overlay_note`)."""

    model: CountingModel
    zones: Sequence[Zone]
    heat_top: float = 0.0  # the heat map's top so far (video_heat_top)

    def draw(self, frame: Frame, record: dict[str, Any], counted: CountBatch, k: int, zone_record: Any) -> np.ndarray:
        picture = frame.image
        found = None if counted.people is None else counted.people[k]
        if counted.density is not None and (found is None or record["counted_by"] == BY_BOTH):
            # (A wide frame the detector counted in part: the head's heat where the head counted.)
            picture = self._heat(picture, counted.density[k])
        if found is not None:
            # Counted by the crowd model's detector: its people, not a heat map.
            from counting.apply.people_drawing import draw_people
            from counting.heads.crowd.sparse_gate import people_in_pixels

            picture = picture.copy()
            draw_people(picture, people_in_pixels(found, picture.shape[:2]))
        if zone_record is not None:
            drawn = zones_on_picture(self.zones, frame.size, picture.shape[:2])
            picture = draw_zones(picture, drawn, zone_record)
        # Zones are drawn with the frame's own counts: so is the frame's then.
        label = overlay_label(record, self.model.class_names, raw=zone_record is not None)
        return annotate(picture, label, overlay_note(record))

    def _heat(self, picture: np.ndarray, density: np.ndarray) -> np.ndarray:
        from counting.heads.density.heatmap import overlay_density

        model_top = self.model.density_head.settings.get("display_max")
        self.heat_top = video_heat_top(self.heat_top, density, model_top)
        return overlay_density(picture, density, self.heat_top)


class _FrameOutputs:
    """Where each frame goes: its row into the counts file (opened at the first row: a source that
    gives no frame keeps the file as it was), its picture into the annotated video (under a
    temporary name, put in place when whole: :func:`_finish_video`)."""

    def __init__(
        self, records_path: str | Path | None, columns: list[str], records_format: str | None, video: str | Path | None
    ) -> None:
        self.records_path, self.columns, self.records_format = records_path, columns, records_format
        self.video = video
        self.sink: RecordSink | None = None
        self.writer: cv2.VideoWriter | None = None
        self.video_temporary: Path | None = None
        self.video_frames = 0  # frames handed to the writer, to check the finished file against

    def open_video(self, fps: float, size: tuple[int, int]) -> None:
        """The annotated video's writer, when one was asked for."""
        if self.video is not None:
            self.video_temporary = _temporary_beside(Path(self.video))
            self.writer = open_video_writer(self.video_temporary, fps, size)

    def write(self, record: dict[str, Any], picture: np.ndarray | None) -> None:
        if self.records_path is not None:
            if self.sink is None:
                self.sink = RecordSink(self.records_path, self.columns, self.records_format)
            self.sink.write(record)
        if self.writer is not None:
            self.writer.write(picture)
            self.video_frames += 1

    def close(self, run: VideoRun, failed: bool) -> None:
        """Close both, and say in ``run`` what was written; ``failed``: an error is in flight."""
        if self.sink is not None:
            self.sink.close()
            run.records_written = True
        if self.writer is not None:
            self.writer.release()
        if self.video_temporary is not None:
            try:
                run.video_written = _finish_video(self.video_temporary, Path(self.video), self.video_frames)  # type: ignore[arg-type]
            except CountingError:
                if not failed:
                    raise
                # else the error in flight is the one said (the video most often failed with it)


def _smoothed_fields(
    model: CountingModel, names: list[str] | None, smoothed: Any, route: np.ndarray | None = None, other: Any = None
) -> dict[str, float]:
    """The smoothed count and, for a calibrated model, its own interval: the model's interval
    evaluated at the smoothed count (scripts/smoothing_study.py measures its coverage on Mall),
    on the route of the frame's own count (``route``: a one-item array, or None). ``other``: a
    crowd model's smoothed count with its disputed frames at their other reading; where it
    differs, the interval is the union with the one about it (a disputed frame weighs on the
    smoothed counts after it, less and less: so does the widening)."""
    values = {"smoothed": np.asarray(smoothed, dtype=float)}
    if route is None:
        low, high = model.intervals(values["smoothed"])
    else:  # one frame: its smoothed count as a one-item batch, then back to the frame's shape
        low, high = model.intervals(values["smoothed"][None], route)
        low, high = (None, None) if low is None else (low[0], high[0])
    if low is not None and other is not None and not np.allclose(other, smoothed):
        at = np.asarray(other, dtype=float)
        other_low, other_high = model.intervals(at if route is None else at[None], route)
        if route is not None:
            other_low, other_high = other_low[0], other_high[0]
        low, high = np.minimum(low, other_low), np.maximum(high, other_high)
    if low is not None:
        values["smoothed_low"], values["smoothed_high"] = np.asarray(low), np.asarray(high)
    if names:
        return {class_column(kind, n): float(v) for kind, array in values.items() for n, v in zip(names, array)}
    return {kind: float(array) for kind, array in values.items()}


def _counted_batches(model: CountingModel, batches: Iterator[list[Frame]], with_density: bool) -> Iterator[tuple]:
    """``(frames, CountBatch)`` per batch, in order (``CountingModel.count_batch``: counts,
    intervals, familiarity, the density maps with ``with_density``, a crowd model's people and
    disputed readings); on onnxruntime the next batch's forward pass runs while the caller writes
    this one's records (torch's intra-op threads already take every core)."""

    def compute(frames: list[Frame]) -> CountBatch:
        return model.count_batch([frame.prepared for frame in frames], with_density=with_density)

    depth = 2 if model.get_backbone().runtime == "onnxruntime" else 1
    yield from computed_in_order(batches, compute, depth)


def _temporary_beside(target: Path) -> Path:
    """A free name in ``target``'s folder with its suffix (OpenCV picks the container by it);
    for a device or FIFO target (``/dev/null``), one in the temporary folder instead."""
    import tempfile

    from counting.core.files import special_kind

    if special_kind(target) is not None:
        fd, name = tempfile.mkstemp(prefix="counting-video.", suffix=target.suffix or ".avi")
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:64]}.", suffix=target.suffix)
    os.close(fd)
    return Path(name)


def _finish_video(temporary: Path, target: Path, frames: int) -> bool:
    """Put the annotated video in place if it holds its ``frames`` frames; True when it was.

    The temporary file is removed in any case. OutputError (one line naming ``target``) when the
    video is not whole or cannot be put in place; a file at ``target`` is then left as it was.
    """
    from counting.core.files import OutputError, atomic_write, new_file_mode, special_kind

    try:
        if frames == 0 or not temporary.exists():
            return False
        special = special_kind(target) is not None
        kept = ""  # a device or pipe has no previous content to keep
        if not special:
            kept = "; the previous file is unchanged" if os.path.lexists(target) else "; no file was created"
        problem = _unfinished(temporary, frames)
        if problem is not None:
            raise OutputError(f"{target}: cannot write ({problem}){kept}")
        if special:
            # Copied into, never renamed onto: the node stays a device. atomic_write says a failure
            # as `count --json /dev/full` does.
            with open(temporary, "rb") as source, atomic_write(target, "wb") as sink:
                shutil.copyfileobj(source, sink)
            return True
        try:
            os.chmod(temporary, new_file_mode(target))  # mkstemp's 0600 would hide the video from others
            os.replace(temporary, target)
        except OSError as error:
            raise OutputError(f"{target}: cannot write ({reason(error)}){kept}") from None
        return True
    finally:
        temporary.unlink(missing_ok=True)


def _unfinished(path: Path, frames: int) -> str | None:
    """Why the video OpenCV wrote at ``path`` may not hold all its ``frames`` frames; None when it does.

    OpenCV's writer ignores failed writes: on a full disk or past ``ulimit -f`` it goes on and
    leaves a file cut short (the AVI's frame count never patched in, an MP4 without its index,
    or only its last bytes missing), which plays as fewer frames or not at all. Two checks, both
    cheap: the file can still grow by a block (a full disk or the file-size limit refuse it, with
    the reason), and its header states the frames written.
    """
    try:
        descriptor = os.open(path, os.O_RDWR)
        try:
            os.fsync(descriptor)  # a disk that filled up may only say so when the data is flushed
            info = os.fstat(descriptor)
            try:
                probe, offset = memoryview(bytes(max(info.st_blksize, 4096))), info.st_size
                while probe:
                    written = os.pwrite(descriptor, probe, offset)
                    if written == 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    probe, offset = probe[written:], offset + written
            finally:
                os.ftruncate(descriptor, info.st_size)
        finally:
            os.close(descriptor)
    except OSError as error:
        return reason(error)
    _quiet_opencv()
    capture = cv2.VideoCapture(str(path))  # the backend that reads the sources reads this too
    try:
        count = capture.get(cv2.CAP_PROP_FRAME_COUNT) if capture.isOpened() else 0
    finally:
        capture.release()
    stated = int(count) if count and np.isfinite(count) and count > 0 else 0
    if frames - stated > max(FRAME_COUNT_SLACK, frames // 100):
        return f"the video writer stopped early: the file holds {stated} of {frames} frames"
    return None


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the end of the block, then act as they would have.

    A frame's row, its picture and its line are written in one such block: an interrupt that
    landed between them left a row in the file that the run's frame count did not include
    ("interrupted: 0 frames" beside a file holding 1 row). Signal handlers can only be set in
    the main thread; elsewhere (the streams of ``--sources``) the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        held.append(signum)

    previous: dict[int, Any] = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, hold)
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            handler = previous[held[0]]
            if callable(handler):
                handler(held[0], None)  # Python's: KeyboardInterrupt, or Terminated for SIGTERM
            elif handler != signal.SIG_IGN:
                signal.raise_signal(held[0])  # the default action, as if it had not waited
