"""Camera workers of `counting serve`: one thread per camera reads its source, counts the latest
frame at the configured rate, and hands the result to the history, the metrics and the API.

A source is opened with counting.apply.video's VideoSource (files, webcams, URLs, with its bounded
timeouts). Live sources (webcams, streams) are drained by a reader thread so that the frame
counted is always the newest one (a slow model skips frames instead of falling behind); a video
file is played at its own frame rate against the wall clock and starts again at its end, so it
behaves like a camera. A camera that fails is reopened under its reconnect policy and never stops
the others; its state is starting, running, reconnecting, failed or stopped, with the last error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from counting.apply.serve.config import CameraConfig
from counting.apply.serve.counter import FrameCounter
from counting.apply.video import READ_TIMEOUT_MS, VideoSource, video_heat_top
from counting.core.errors import CountingError, StreamError

# A file frame further behind the wall clock than this is skipped by seeking, not by grabbing.
_SEEK_AFTER_FRAMES = 50


class _FileFrames:
    """A video file played in real time and looped: ``read`` gives the frame due now."""

    def __init__(self, source: VideoSource) -> None:
        self.source = source
        self.capture = source.open()
        fps = self.capture.get(cv2.CAP_PROP_FPS)
        self.fps = float(fps) if fps and np.isfinite(fps) and fps > 0 else 25.0
        self.position = 0  # frames grabbed since the file (re)started
        self.started = time.monotonic()

    def read(self) -> tuple[np.ndarray, float]:
        due = int((time.monotonic() - self.started) * self.fps)
        if due - self.position > _SEEK_AFTER_FRAMES:
            self.capture.set(cv2.CAP_PROP_POS_FRAMES, due)
            self.position = due
        while self.position < due:  # grab decodes nothing we do not count
            if not self.capture.grab():
                break
            self.position += 1
        ok, image = self.capture.read()
        self.position += 1
        if not ok:  # the end: start the file again
            self.capture.release()
            self.capture = self.source.open()
            self.position, self.started = 0, time.monotonic()
            ok, image = self.capture.read()
            self.position = 1
            if not ok:
                raise StreamError(f"{self.source.spec}: no frame could be decoded (not a video, or an empty one)")
        return image, time.time()

    def close(self) -> None:
        self.capture.release()


class _LiveFrames:
    """A live source drained by a reader thread that keeps only the newest frame, so a slow model
    skips frames instead of falling behind. The thread owns the capture (OpenCV captures are not
    thread-safe); FFmpeg decodes in ``grab`` anyway, so reading every frame costs little more."""

    def __init__(self, source: VideoSource) -> None:
        self.source = source
        self.capture = source.open()
        self._new = threading.Condition()
        self._frame: np.ndarray | None = None
        self._read_at = 0.0
        self._sequence = 0  # frames read so far
        self._taken = 0  # the sequence number of the last frame handed out
        self._failed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_all, name=f"read {source.spec}", daemon=True)
        self._thread.start()

    def _read_all(self) -> None:
        try:
            while not self._stop.is_set():
                ok, image = self.capture.read()
                with self._new:
                    if ok:
                        self._frame, self._read_at = image, time.time()
                        self._sequence += 1
                    else:
                        self._failed = True
                    self._new.notify_all()
                if not ok:
                    return
        finally:
            self.capture.release()  # here, by the one thread that uses it, even after a late read

    def read(self) -> tuple[np.ndarray, float]:
        deadline = time.monotonic() + READ_TIMEOUT_MS / 1000
        with self._new:
            while self._sequence == self._taken and not self._failed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StreamError(f"{self.source.spec}: no frame for {READ_TIMEOUT_MS / 1000:g} s")
                self._new.wait(left)
            if self._sequence == self._taken:  # failed, and nothing new before it
                raise StreamError(f"{self.source.spec}: the stream ended or dropped")
            self._taken = self._sequence
            return self._frame, self._read_at  # type: ignore[return-value]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=READ_TIMEOUT_MS / 1000 + 1)


def open_frames(spec: str) -> _FileFrames | _LiveFrames:
    source = VideoSource.parse(spec)
    return _FileFrames(source) if source.kind == "file" else _LiveFrames(source)


@dataclass
class LatestFrame:
    """The last counted frame of a camera: what the dashboard's picture is drawn from."""

    sequence: int
    time: float
    bgr: np.ndarray
    record: dict[str, Any]
    density: np.ndarray | None


@dataclass
class CameraStatus:
    name: str
    source: str
    model: str
    fps: float
    zones: list[str]
    state: str = "starting"
    last_error: str | None = None
    since: float = field(default_factory=time.time)  # when the state last changed
    frames: int = 0
    reconnects: int = 0
    lag_s: float | None = None
    latest: dict[str, Any] | None = None  # {"time", "count", "low", "high", "zones"}

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "model": self.model,
            "fps": self.fps,
            "zones": self.zones,
            "state": self.state,
            "last_error": self.last_error,
            "since": self.since,
            "frames": self.frames,
            "reconnects": self.reconnects,
            "lag_s": self.lag_s,
            "latest": self.latest,
        }


# Called with (camera name, counted-at time, record, lag seconds) for every counted frame.
OnCounted = Callable[[str, float, dict[str, Any], float], None]


class CameraWorker:
    """One camera's thread: open, count at ``fps``, reopen on failure under the reconnect policy."""

    def __init__(
        self,
        config: CameraConfig,
        counter: FrameCounter,
        model_name: str,
        on_counted: OnCounted,
        on_state: Callable[[str, str], None],
        on_reconnect: Callable[[str], None],
    ) -> None:
        self.config = config
        self.counter = counter
        self.status = CameraStatus(
            name=config.name,
            source=_shown_source(config.source),
            model=model_name,
            fps=config.fps,
            zones=[zone.name for zone in counter.zones],
        )
        self.latest: LatestFrame | None = None
        # The heat map's top: the densest frame's so far, as video --annotated draws it (video_heat_top).
        self.heat_top = 0.0
        self._on_counted = on_counted
        self._on_state = on_state
        self._on_reconnect = on_reconnect
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"camera {config.name}", daemon=True)

    def start(self) -> None:
        self._set_state("starting")
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end (it may be waiting on its source); :meth:`stop` waits for it."""
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)
        self._set_state("stopped")

    def _set_state(self, state: str, error: str | None = None) -> None:
        if error is not None:
            self.status.last_error = error
        if state != self.status.state:
            self.status.state = state
            self.status.since = time.time()
        self._on_state(self.config.name, state)

    def _run(self) -> None:
        failures = 0
        policy = self.config.reconnect
        while not self._stop.is_set():
            frames = None
            try:
                frames = open_frames(self.config.source)
                self._count_loop(frames)
            except (CountingError, cv2.error, OSError, ValueError) as error:
                message = str(error).splitlines()[0] if str(error) else type(error).__name__
                if self._counted_since_open:  # it ran again: a new run of failures starts
                    failures = 0
                failures += 1
                self.status.reconnects += 1
                self._on_reconnect(self.config.name)
                if policy.gives_up(failures):
                    self._set_state("failed", f"{message} (gave up after {failures} failures in a row)")
                    return
                self._set_state("reconnecting", message)
                self._stop.wait(policy.delay(failures))
            finally:
                if frames is not None:
                    frames.close()

    _counted_since_open = False

    def _count_loop(self, frames: Any) -> None:
        self._counted_since_open = False
        interval = 1.0 / self.config.fps
        tick = time.monotonic()
        while not self._stop.is_set():
            bgr, read_at = frames.read()
            rgb = np.ascontiguousarray(bgr[:, :, ::-1])
            record, density = self.counter.count(rgb)
            if density is not None:
                self.heat_top = video_heat_top(self.heat_top, density, self.counter.model_top)
            now = time.time()
            lag = max(0.0, now - read_at)
            self.status.frames += 1
            self.status.lag_s = lag
            self.status.latest = {"time": now} | record
            self.latest = LatestFrame(self.status.frames, now, bgr, record, density)
            if not self._counted_since_open:
                self._counted_since_open = True
                self._set_state("running")
            self._on_counted(self.config.name, now, record, lag)
            tick += interval
            wait = tick - time.monotonic()
            if wait < -interval:  # fell behind (slow model): count the next frame now, do not catch up
                tick = time.monotonic()
            elif wait > 0:
                self._stop.wait(wait)


def _shown_source(source: str) -> str:
    """The source as the API shows it: a URL without its user name and password."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in source:
        return source
    parts = urlsplit(source)
    if parts.username is None and parts.password is None:
        return source
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
