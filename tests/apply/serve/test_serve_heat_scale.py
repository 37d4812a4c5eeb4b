"""The dashboard draws a camera's heat map on the densest frame's scale so far, as video
--annotated does: on the crowd model's own top (1.4 people a cell, set by ShanghaiTech A) a Mall
camera's peak of ~0.5 was a faint wash."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from counting.apply.serve.cameras import CameraWorker
from counting.apply.serve.config import CameraConfig
from counting.apply.serve.counter import FrameCounter, annotated_jpeg


class _Frames:
    """Three frames, then the camera is stopped (the worker's loop reads until then)."""

    def __init__(self, worker: list[CameraWorker], count: int = 3) -> None:
        self.worker, self.left = worker, count

    def read(self) -> tuple[np.ndarray, float]:
        if self.left == 0:
            self.worker[0]._stop.set()
        self.left -= 1
        return np.zeros((48, 64, 3), np.uint8), 0.0


class _Counter:
    """A density model's counter whose maps peak at 0.2, 0.5 and 0.3 people a cell."""

    model_top = 1.4
    zones: list = []

    def __init__(self) -> None:
        self.peaks = iter([0.2, 0.5, 0.3, 0.3])

    def count(self, rgb: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
        density = np.zeros((6, 8), np.float32)
        density[2, 3] = next(self.peaks)
        return {"count": float(density.sum())}, density


def test_a_cameras_heat_top_is_its_densest_frame_so_far() -> None:
    config = CameraConfig(name="cam", source="unused.avi", model=None, fps=1000.0)
    holder: list[CameraWorker] = []
    worker = CameraWorker(config, _Counter(), "model", lambda *a: None, lambda *a: None, lambda *a: None)  # type: ignore[arg-type]
    holder.append(worker)
    worker._count_loop(_Frames(holder))
    assert 0.45 <= worker.heat_top <= 0.55  # the 0.5 frame's peak (picture_top), not the model's 1.4


def test_the_shown_frame_is_hotter_on_the_cameras_scale(mall_root: Path) -> None:
    """The same frame and map: on the camera's top its heat map reaches red, on the model's it did not."""
    import cv2

    from counting.model.counting_model import load_model

    model = load_model()
    counter = FrameCounter(model, threading.Lock())
    bgr = cv2.imread(str(sorted((mall_root / "frames").glob("*.jpg"))[0]))
    record, density = counter.count(np.ascontiguousarray(bgr[:, :, ::-1]))
    from counting.apply.video import video_heat_top

    camera_top = video_heat_top(0.0, density, counter.model_top)
    assert counter.model_top is not None and camera_top < counter.model_top / 2

    def heat(top: float) -> float:
        """Below the corner's label: the largest change the heat map made to a pixel."""
        jpeg = annotated_jpeg(bgr, record, [], density, top)
        shown = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR).astype(int)
        return float(np.abs(shown[120:] - bgr[120:].astype(int)).max())

    assert heat(camera_top) > 2 * heat(counter.model_top)  # measured 61 against 22 grey levels
