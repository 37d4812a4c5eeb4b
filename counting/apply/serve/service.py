"""The running service: the models (each file loaded once, shared by the cameras that name it),
the camera workers, the history and the metrics. The HTTP app (app.py) only reads from it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from counting.apply.api import Counts
from counting.apply.records import picture_record
from counting.apply.serve.cameras import CameraWorker
from counting.apply.serve.config import ServeConfig
from counting.apply.serve.counter import FrameCounter, annotated_jpeg, camera_zones
from counting.apply.serve.history import FRAME_ZONE, History, Row
from counting.apply.serve.metrics import ServeMetrics
from counting.apply.zones import density_records
from counting.core.errors import CountingError
from counting.model.counting_model import default_model_path, load_model


class _SharedModel:
    def __init__(self, path: Path) -> None:
        self.model = load_model(path)
        self.model.load_networks()  # now: the first frame must not pay for loading them
        self.lock = threading.Lock()


class Service:
    """Everything `counting serve` runs, started by :meth:`start` and stopped by :meth:`stop`.

    Building it checks the whole configuration (models load, zones parse and fit the models):
    a CountingError here is a start-up error, before any port is bound.
    """

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.metrics = ServeMetrics()
        self.started = time.time()
        self._models: dict[Path, _SharedModel] = {}
        self._models_lock = threading.Lock()
        self.workers: dict[str, CameraWorker] = {}
        for k, camera in enumerate(config.cameras):
            shared = self._shared(camera.model)
            where = f"{config.path}: camera[{k}].zones"
            try:
                zones = camera_zones(camera.zones_file, camera.zones_inline, where)
                counter = FrameCounter(shared.model, shared.lock, zones)
            except CountingError as error:
                text = str(error)
                raise type(error)(text if text.startswith(str(config.path)) else f"{where}: {text}") from None
            self.workers[camera.name] = CameraWorker(
                camera,
                counter,
                shared.model.name,
                on_counted=self._counted,
                on_state=self.metrics.set_state,
                on_reconnect=lambda name: self.metrics.reconnects.labels(name).inc(),
            )
        retention = config.retention_hours * 3600.0
        self.history = History(config.database, retention_seconds=retention)
        self._jpeg_cache: dict[str, tuple[int, bytes]] = {}

    def _shared(self, path: Path | None) -> _SharedModel:
        resolved = (path or default_model_path()).resolve()
        with self._models_lock:
            if resolved not in self._models:
                self._models[resolved] = _SharedModel(resolved)
            return self._models[resolved]

    @property
    def upload_model(self) -> _SharedModel:
        """The model of POST /api/count without a camera: loaded at the first such upload (a
        service nobody posts to does not hold it), the cameras' copy when it is the same file."""
        return self._shared(self.config.model)

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        for worker in self.workers.values():
            worker.start()

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.request_stop()  # all at once: each may be waiting on its source
        for worker in self.workers.values():
            worker.stop()
        self.history.close()

    def _counted(self, camera: str, when: float, record: dict[str, Any], lag: float) -> None:
        # The frame's marks go on its zones' rows too: a zone's count is its share of the frame's.
        marks = {"unfamiliar": record.get("unfamiliar"), "disputed": bool(record.get("disputed", False))}
        entries = [(FRAME_ZONE, record), *record.get("zones", {}).items()]  # the whole frame first
        rows = [
            Row(
                when,
                camera,
                zone,
                entry["count"],
                entry.get("low"),
                entry.get("high"),
                entry.get("familiarity"),
                **marks,
            )
            for zone, entry in entries
        ]
        self.history.add(rows)
        metrics = self.metrics
        metrics.frames.labels(camera).inc()
        metrics.lag.labels(camera).set(lag)
        for row in rows:
            metrics.count.labels(camera, row.zone).set(row.count)
            if row.low is not None and row.high is not None:
                metrics.low.labels(camera, row.zone).set(row.low)
                metrics.high.labels(camera, row.zone).set(row.high)
        metrics.history_rows.set(self.history.rows_written)

    # ------------------------------------------------------------------ what the API reads
    def cameras(self) -> list[dict[str, Any]]:
        return [worker.status.as_dict() for worker in self.workers.values()]

    def frame_jpeg(self, camera: str) -> bytes | None:
        """The camera's latest counted frame, annotated (cached until the next frame)."""
        worker = self.workers[camera]
        latest = worker.latest
        if latest is None:
            return None
        cached = self._jpeg_cache.get(camera)
        if cached is not None and cached[0] == latest.sequence:
            return cached[1]
        # On the densest frame's scale so far, as video --annotated: on the model's own top (1.4 people
        # a cell for the crowd model) a Mall camera's heat map was a faint wash.
        top = worker.heat_top or worker.counter.model_top
        jpeg = annotated_jpeg(latest.bgr, latest.record, worker.counter.zones, latest.density, top)
        self._jpeg_cache[camera] = (latest.sequence, jpeg)
        return jpeg

    def count_upload(self, rgb: np.ndarray, camera: str | None = None) -> dict[str, Any]:
        """What ``counting count --json`` writes for one picture (``image`` is ``"upload"``), from
        the one record builder (counting.apply.records); with ``camera``, counted by that
        camera's model, with its zones."""
        if camera is None:
            model, lock, zones = self.upload_model.model, self.upload_model.lock, []
        else:
            counter = self.workers[camera].counter
            model, lock, zones = counter.model, counter.lock, counter.zones
        self.metrics.uploads.inc()
        with lock:
            batch = model.count_batch([model.prepare_image(rgb)], with_density=bool(zones))
        zone_record = None
        if zones:  # the camera's zones were checked against its model when it started
            (in_zones,) = density_records(
                model, zones, rgb.shape[:2], batch.density, batch.counts, routes=batch.routes, readings=batch.readings
            )
            zone_record = in_zones["zones"]
        row = picture_record(model, batch, 0, {"image": "upload"}, zone_record)
        return Counts(model=model.name, rows=[row]).as_dict()
