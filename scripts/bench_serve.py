"""Load on `counting serve` (issue 23), loopback only, bounded in count and time.

1. POST /api/count with a 640x480 Mall JPEG at concurrency 4: p50 / p95 / max latency.
2. N file cameras (Mall frames 1-400 as a video) counted at F frames/s each for M minutes: the
   frame lag and the server's RSS sampled every 10 s (is either growing?), and every counted
   frame checked in SQLite after a clean stop.

    python scripts/bench_serve.py                              # 200 requests; 4 cameras x 5 fps x 10 min
    python scripts/bench_serve.py --requests 100 --minutes 2   # shorter
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from counting.apply import frames_to_video

ROOT = Path(__file__).resolve().parents[1]
FRAMES = ROOT.parent / "shared" / "data" / "mall-train" / "frames"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(config: Path, threads: int | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "counting.cli.app", "serve", str(config), "--port", str(port)]
    if threads:
        command += ["--threads", str(threads)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited: {process.stderr.read()}")  # type: ignore[union-attr]
        try:
            if httpx.get(url + "/api/health", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("the server did not answer in 180 s")


def stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    return stderr


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_uploads(folder: Path, requests: int, concurrency: int, threads: int | None, model: Path) -> None:
    config = folder / "uploads.toml"
    config.write_text(f'[server]\ndatabase = "uploads.sqlite"\nmodel = "{model}"\n')
    process, url = start(config, threads)
    picture = (FRAMES / "seq_000001.jpg").read_bytes()  # 640x480 JPEG
    headers = {"Content-Type": "image/jpeg"}
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            for _ in range(5):  # warm-up: the model loads at the first upload
                client.post("/api/count", content=picture, headers=headers).raise_for_status()

        def one(_: int) -> float:
            with httpx.Client(base_url=url, timeout=60) as client:
                started = time.perf_counter()
                client.post("/api/count", content=picture, headers=headers).raise_for_status()
                return time.perf_counter() - started

        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            latencies = list(pool.map(one, range(requests)))
        wall = time.perf_counter() - started
    finally:
        stop(process)
    ms = [1000 * value for value in latencies]
    print(
        f"POST /api/count, 640x480 JPEG, concurrency {concurrency}, {requests} requests: "
        f"p50 {percentile(ms, 0.5):.0f} ms, p95 {percentile(ms, 0.95):.0f} ms, max {max(ms):.0f} ms, "
        f"{requests / wall:.1f} requests/s"
    )


def bench_cameras(folder: Path, cameras: int, fps: float, minutes: float, threads: int | None, model: Path) -> None:
    video = frames_to_video([FRAMES / f"seq_{k:06d}.jpg" for k in range(1, 401)], folder / "mall.avi", 10.0)
    blocks = "".join(
        f'[[camera]]\nname = "cam{k}"\nsource = "{video}"\nmodel = "{model}"\nfps = {fps}\n' for k in range(cameras)
    )
    config = folder / "cameras.toml"
    config.write_text(f'[server]\ndatabase = "cameras.sqlite"\n{blocks}')
    process, url = start(config, threads)
    samples = []
    deadline = time.monotonic() + 60 * minutes
    try:
        while time.monotonic() < deadline:
            time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
            status = httpx.get(url + "/api/cameras", timeout=30).json()
            lags = [camera["lag_s"] or 0.0 for camera in status]
            frames = sum(camera["frames"] for camera in status)
            samples.append((time.monotonic(), max(lags), statistics.mean(lags), rss_mb(process.pid), frames))
            print(
                f"  t={len(samples) * 10:4d} s  frames {frames:6d}  lag mean {samples[-1][2]:.3f} s max {samples[-1][1]:.3f} s"
                f"  RSS {samples[-1][3]:.0f} MB",
                flush=True,
            )
    finally:
        stderr = stop(process)
    match = re.search(r"(\d+) frames counted, (\d+) history rows", stderr)
    counted, written = (int(match.group(1)), int(match.group(2))) if match else (-1, -1)
    connection = sqlite3.connect(folder / "cameras.sqlite")
    stored = connection.execute("SELECT COUNT(*) FROM counts").fetchone()[0]
    connection.close()
    tenth = max(1, len(samples) // 10)
    first, last = samples[:tenth], samples[-tenth:]
    elapsed = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
    rate = (samples[-1][4] - samples[0][4]) / elapsed if elapsed else 0.0
    print(
        f"{cameras} file cameras x {fps:g} frames/s for {minutes:g} min: {counted} frames counted "
        f"({rate:.2f}/s, asked {cameras * fps:g}/s); mean lag first {statistics.mean(s[2] for s in first):.3f} s, "
        f"last {statistics.mean(s[2] for s in last):.3f} s (max over the run {max(s[1] for s in samples):.3f} s); "
        f"RSS {min(s[3] for s in samples):.0f}-{max(s[3] for s in samples):.0f} MB "
        f"(first {first[0][3]:.0f}, last {last[-1][3]:.0f}); rows in SQLite {stored}, written {written}, "
        f"every counted frame stored: {stored == counted == written}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--cameras", type=int, default=4)
    parser.add_argument("--fps", type=float, default=5.0)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=None, help="--threads of the server (default: every core)")
    parser.add_argument("--model", type=Path, default=None, help="model file (default: the shipped default model)")
    parser.add_argument("--skip-uploads", action="store_true")
    parser.add_argument("--skip-cameras", action="store_true")
    args = parser.parse_args()
    if not 1 <= args.requests <= 10_000 or not 0 < args.minutes <= 60:
        raise SystemExit("--requests 1-10000 and --minutes up to 60: this benchmark is bounded")
    from counting.model import default_model_path

    model = (args.model or default_model_path()).resolve()
    print(f"model: {model}")
    print(
        f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} ({os.cpu_count()} cores)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as name:
        folder = Path(name)
        if not args.skip_uploads:
            bench_uploads(folder, args.requests, args.concurrency, args.threads, model)
        if not args.skip_cameras:
            bench_cameras(folder, args.cameras, args.fps, args.minutes, args.threads, model)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
