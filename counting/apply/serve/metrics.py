"""Prometheus metrics of `counting serve` (prometheus-client), in a registry of their own so
that several services in one process (tests) do not collide."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CAMERA_STATES = ("starting", "running", "reconnecting", "failed", "stopped")


class ServeMetrics:
    """The gauges, counters and histograms the service updates and ``/metrics`` exposes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        zone = ["camera", "zone"]
        self.count = Gauge(
            "counting_count",
            "Latest count per camera and zone (zone '' is the whole frame)",
            zone,
            registry=self.registry,
        )
        self.low = Gauge("counting_count_low", "Lower end of the latest count's interval", zone, registry=self.registry)
        self.high = Gauge(
            "counting_count_high", "Upper end of the latest count's interval", zone, registry=self.registry
        )
        self.frames = Counter("counting_frames", "Frames counted per camera", ["camera"], registry=self.registry)
        self.lag = Gauge(
            "counting_frame_lag_seconds",
            "Seconds from reading a frame to storing its count (latest frame)",
            ["camera"],
            registry=self.registry,
        )
        self.reconnects = Counter(
            "counting_reconnects", "Times a camera's source failed and was reopened", ["camera"], registry=self.registry
        )
        self.state = Gauge(
            "counting_camera_state",
            "1 for the camera's current state, 0 for the others",
            ["camera", "state"],
            registry=self.registry,
        )
        self.uploads = Counter("counting_uploads", "Images counted through POST /api/count", registry=self.registry)
        self.history_rows = Gauge(
            "counting_history_rows_written", "Rows committed to the history since start", registry=self.registry
        )
        self.requests = Histogram(
            "counting_http_request_duration_seconds",
            "HTTP request latency by route and status",
            ["method", "route", "status"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4),
            registry=self.registry,
        )

    def set_state(self, camera: str, state: str) -> None:
        for name in CAMERA_STATES:
            self.state.labels(camera, name).set(1.0 if name == state else 0.0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
