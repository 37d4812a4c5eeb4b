"""`counting serve` as a process: start-up errors in one line, Ctrl-C stops it cleanly, the
history survives a restart, and a `kill -9` loses at most the last second of counts."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from serve_helpers import FAST_MODEL, REPO, free_port, wait_for, write_config


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "counting.cli.app", "serve", *args]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("COUNTING_SERVE_TOKEN", None)
    return env


def run_fails(*args: str) -> str:
    done = subprocess.run(serve_command(*args), capture_output=True, text=True, env=environment(), timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.mark.slow  # six processes, each importing the package
def test_startup_errors_are_one_line(tmp_path: Path) -> None:
    bad = write_config(tmp_path / "bad.toml", "port = 'eighty'")
    assert f"{bad}: server.port: must be a whole number" in run_fails(str(bad))
    good = write_config(tmp_path / "good.toml", 'database = "h.sqlite"')
    assert "--host 0.0.0.0: listening beyond this machine needs --token" in run_fails(str(good), "--host", "0.0.0.0")
    assert "--token (or $COUNTING_SERVE_TOKEN): use at least 8 characters" in run_fails(str(good), "--token", "short")
    assert "config file not found" in run_fails(str(tmp_path / "absent.toml"))
    zoned = write_config(
        tmp_path / "zoned.toml",
        'database = "h.sqlite"',
        f'[[camera]]\nname = "a"\nsource = "rtsp://127.0.0.1:9/x"\nmodel = "{FAST_MODEL}"\nzones = ["left:0,0,0.5,0,0.5,1,0,1"]\n',
    )
    refused = run_fails(str(zoned))
    assert "camera[0].zones: " in refused and "cannot count zones" in refused
    with socket_taken() as port:
        assert f"127.0.0.1:{port}: cannot listen there" in run_fails(str(good), "--port", str(port))


class socket_taken:  # noqa: N801 - used as a context manager, reads as a phrase
    def __enter__(self) -> int:
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        return self.socket.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.socket.close()


class ServeProcess:
    def __init__(self, config: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            serve_command(str(config), "--port", str(port), "--threads", "1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
        )
        wait_for(self._up, timeout=120, what="the server to answer")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the server exited: {self.process.stderr.read()}")  # type: ignore[union-attr]
        try:
            return httpx.get(self.url + "/api/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def frames(self) -> int:
        return httpx.get(self.url + "/api/cameras", timeout=10).json()[0]["frames"]


def camera_config(tmp_path: Path, video: Path) -> Path:
    return write_config(
        tmp_path / "serve.toml",
        'database = "history.sqlite"\nretention_hours = 1',
        f'[[camera]]\nname = "mall"\nsource = "{video}"\nmodel = "{FAST_MODEL}"\nfps = 5\n',
    )


def stored_times(database: Path) -> list[float]:
    connection = sqlite3.connect(database)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return [row[0] for row in connection.execute("SELECT time FROM counts WHERE zone = '' ORDER BY time")]
    finally:
        connection.close()


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_history_survives_a_restart(tmp_path: Path, mall_video: Path) -> None:
    config = camera_config(tmp_path, mall_video)
    port = free_port()
    first = ServeProcess(config, port)
    wait_for(lambda: first.frames() >= 5, what="5 frames")
    first.process.send_signal(signal.SIGINT)
    _, stderr = first.process.communicate(timeout=60)
    assert first.process.returncode == 0, stderr
    assert "Traceback" not in stderr and "history rows written this run" in stderr
    before = stored_times(tmp_path / "history.sqlite")
    assert len(before) >= 5
    # Restarted: the old rows are still served, and new ones follow them.
    second = ServeProcess(config, port)
    try:

        def three_new_rows() -> list[float] | None:
            rows = httpx.get(second.url + "/api/history", params={"camera": "mall", "zone": ""}).json()["rows"]
            times = [row["time"] for row in rows]
            return times if len(times) >= len(before) + 3 else None

        # Counted frames reach the history at the writer's next commit (every 0.25 s): wait for
        # the stored rows, not for the frame counter (which ran ahead of them under load).
        times = wait_for(three_new_rows, what="3 new rows in the served history")
        assert times[: len(before)] == pytest.approx(before) and len(times) >= len(before) + 3
        assert min(times[len(before) :]) > max(before)
    finally:
        second.process.terminate()
        second.process.communicate(timeout=60)
    assert second.process.returncode == 0  # SIGTERM, as a service manager stops it, is a clean stop too


@pytest.mark.slow
def test_kill_9_loses_at_most_the_last_second(tmp_path: Path, mall_video: Path) -> None:
    config = camera_config(tmp_path, mall_video)
    server = ServeProcess(config, free_port())
    try:
        wait_for(lambda: server.frames() >= 15, what="15 frames")
        latest = httpx.get(server.url + "/api/latest").json()["mall"]["time"]
        seen = [row["time"] for row in httpx.get(server.url + "/api/history", params={"zone": ""}).json()["rows"]]
    finally:
        killed_at = time.time()
        server.process.kill()  # SIGKILL: no handler, no flush
        server.process.communicate(timeout=30)
    stored = stored_times(tmp_path / "history.sqlite")
    # Every row the API had served is on disk; the newest stored frame is at most a second older
    # than the newest counted one and than the kill (commits every 0.25 s; a frame every 0.2 s).
    assert stored[: len(seen)] == pytest.approx(seen)
    assert len(stored) >= len(seen) >= 10
    assert stored[-1] >= latest - 1.0
    assert killed_at - stored[-1] <= 1.0 + 1.0 / 5


def test_a_second_ctrl_c_waits_for_the_stop_instead_of_breaking_it() -> None:
    from counting.cli.serve import signals_wait_for

    said: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    finished = False
    with signals_wait_for("stopping: the history's last rows", said.append):
        os.kill(os.getpid(), signal.SIGINT)  # delivered to this (main) thread at once
        os.kill(os.getpid(), signal.SIGTERM)
        finished = True  # neither signal broke the block off
    assert finished and len(said) == 2 and said[0].startswith("stopping: the history's last rows are still")
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):  # after the stop, Ctrl-C is Ctrl-C again
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    # serve's stop is its end: the handlers stay, silent, so a signal while the process exits
    # leaves its clean exit status (a SIGTERM there made it 143).
    try:
        with signals_wait_for("stopping", said.append, restore=False):
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert len(said) == 2  # nothing more said after the block
    finally:
        signal.signal(signal.SIGINT, before)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.slow
def test_a_quiet_start_on_any_free_port_prints_its_address(tmp_path: Path) -> None:
    # Under -q nothing was printed, so the port --port 0 picked could not be known.
    config = write_config(tmp_path / "uploads.toml", 'database = "h.sqlite"')
    process = subprocess.Popen(
        serve_command(str(config), "--port", "0", "-q"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    try:
        url = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        assert httpx.get(url + "api/health", timeout=10).status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0 and stderr == "" and stdout == ""  # -q: nothing else, on either stream
