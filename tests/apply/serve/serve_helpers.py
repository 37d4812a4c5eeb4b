"""Helpers of the `counting serve` tests (imported by the tests and their conftest)."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import uvicorn

from counting.apply.serve.app import create_app
from counting.apply.serve.config import load_config
from counting.apply.serve.service import Service

REPO = Path(__file__).resolve().parents[3]
FAST_MODEL = REPO / "models" / "default.npz"  # the fastest shipped model (~11 ms a frame)
DENSITY_MODEL = REPO / "models" / "mall-accurate.npz"  # the shipped density model: zones


def mall_frames(mall_root: Path, first: int, last: int) -> list[Path]:
    return [mall_root / "frames" / f"seq_{k:06d}.jpg" for k in range(first, last + 1)]


class MjpegStream:
    """``multipart/x-mixed-replace`` JPEG frames on loopback, as IP cameras serve them; ``stop``
    drops every client (a camera going away) and refuses new ones."""

    def __init__(self, frames: list[Path], fps: float = 10.0) -> None:
        self.frames = [path.read_bytes() for path in frames]
        self.fps = fps
        self.serving = threading.Event()
        self.serving.set()
        stream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if not stream.serving.is_set():
                    self.send_error(503)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
                self.end_headers()
                k = 0
                try:
                    while stream.serving.is_set():
                        data = stream.frames[k % len(stream.frames)]
                        k += 1
                        head = f"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: {len(data)}\r\n\r\n"
                        self.wfile.write(head.encode() + data + b"\r\n")
                        time.sleep(1.0 / stream.fps)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/stream.mjpg"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.serving.clear()

    def close(self) -> None:
        self.stop()
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RunningServer:
    """The service of ``config_path`` behind uvicorn on a free loopback port, in a thread."""

    def __init__(self, config_path: Path, token: str | None = None) -> None:
        self.service = Service(load_config(config_path))
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(self.service, token), log_level="warning", lifespan="off")
        )
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [listener]}, daemon=True)
        self.service.start()
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in 30 s")
            time.sleep(0.02)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self._thread.join(timeout=30)
        self.service.stop()


def write_config(path: Path, server: str, cameras: str = "") -> Path:
    path.write_text(f"[server]\n{server}\n{cameras}", encoding="utf-8")
    return path


def wait_for(condition, timeout: float = 60.0, every: float = 0.2, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll ``condition()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
