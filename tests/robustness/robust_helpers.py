"""Helpers of the robustness suite: hostile inputs and faults, made on the fly, run through the real CLI.

Every case checks what a user sees and keeps: the exit code, exactly one error line that names
the file and the problem, no traceback, and that files which existed before are unchanged.
Memory bounds are tested by the bound checks refusing before anything is allocated, not by
measuring memory.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from counting.cli.app import app

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO_ROOT / "models" / "default.npz"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_non_root = pytest.mark.skipif(IS_ROOT, reason="root ignores file permissions")
needs_root = pytest.mark.skipif(not IS_ROOT, reason="mknod of a private device node needs root")
# Linux's memory devices (major 1) that /dev/null and /dev/full are.
NULL_DEVICE, FULL_DEVICE = os.makedev(1, 3), os.makedev(1, 7)


def private_device(path: Path, device: int) -> Path:
    """A character device node ``device`` (:data:`NULL_DEVICE`, :data:`FULL_DEVICE`) at ``path``
    in the test's own folder, so the machine's /dev is never written; the test is skipped where
    nodes cannot be made (not root)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, device)
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each case gets its own feature cache, never the user's or another test's."""
    cache = tmp_path / "feature-cache"
    monkeypatch.setenv("COUNTING_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(scope="session")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="session")
def cli(runner: CliRunner) -> Callable[..., Any]:
    def invoke(*args: Any) -> Any:
        return runner.invoke(app, [str(arg) for arg in args])

    return invoke


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("warning:")]


def assert_one_error(result: Any, *fragments: str, code: int = 1) -> str:
    """Exit ``code``, no traceback, exactly one error line containing every fragment."""
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def assert_process_one_error(process: subprocess.CompletedProcess, *fragments: str, code: int = 1) -> str:
    assert process.returncode == code, process.stdout + process.stderr
    assert "Traceback" not in process.stderr + process.stdout
    lines = error_lines(process.stderr)
    assert len(lines) == 1, process.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def run_cli_process(
    *args: Any,
    timeout: float = 120,
    preamble: str = "",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``python -c '<preamble>; main()' args`` in a fresh interpreter (signals, rlimits, hangs)."""
    code = f"import sys\n{preamble}\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    return subprocess.run(  # noqa: PLW1510 - callers check the exit code
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=str(REPO_ROOT),
    )


def file_size_limit(limit: int) -> str:
    """Preamble making writes past ``limit`` bytes fail like a full disk (EFBIG, not a signal)."""
    return (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
    )


def snapshot(*paths: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in paths}


def assert_unchanged(before: dict[Path, bytes]) -> None:
    for path, data in before.items():
        assert path.read_bytes() == data, f"{path} was changed"


def no_temporary_files(folder: Path) -> bool:
    return not [
        p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith((".tmp", ".npz", ".csv", ".json"))
    ]


def make_image(path: Path, size: tuple[int, int] = (64, 48), seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def make_video(
    path: Path,
    n_frames: int = 20,
    size: tuple[int, int] = (160, 120),
    fps: float = 10.0,
) -> Path:
    fourcc = cv2.VideoWriter_fourcc(*("MJPG" if path.suffix == ".avi" else "mp4v"))
    writer = cv2.VideoWriter(str(path), fourcc, fps, size)
    rng = np.random.default_rng(1)
    for index in range(n_frames):
        frame = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
        cv2.putText(
            frame,
            str(index),
            (10, size[1] // 2),
            cv2.FONT_HERSHEY_SIMPLEX,
            1.0,
            (255, 255, 255),
            2,
        )
        writer.write(frame)
    writer.release()
    return path


def model_parts(path: Path = DEFAULT_MODEL) -> tuple[dict[str, np.ndarray], dict]:
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    return arrays, json.loads(str(arrays.pop("metadata")))


def write_model(path: Path, arrays: dict[str, np.ndarray], document: dict) -> Path:
    with open(path, "wb") as handle:
        np.savez(handle, metadata=np.array(json.dumps(document)), **arrays)
    return path


@pytest.fixture
def mutated_model(tmp_path: Path) -> Callable[..., Path]:
    """A copy of the shipped model with ``change(arrays, document)`` applied."""

    def make(change: Callable[[dict, dict], None], name: str = "bad.npz") -> Path:
        arrays, document = model_parts()
        change(arrays, document)
        return write_model(tmp_path / name, arrays, document)

    return make


@pytest.fixture
def folder_dataset(tmp_path: Path) -> Path:
    """16 small noise images with counts, 12 train / 4 test."""
    root = tmp_path / "dataset"
    root.mkdir()
    rows = ["filename,count,split"]
    for index in range(16):
        make_image(root / f"img{index:02d}.png", seed=index)
        rows.append(f"img{index:02d}.png,{index % 5},{'test' if index >= 12 else 'train'}")
    (root / "counts.csv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
def features_file(tmp_path: Path) -> Path:
    """Two rows of 1000-d descriptors (what the shipped model reads)."""
    path = tmp_path / "features.npy"
    np.save(path, np.random.default_rng(0).normal(size=(2, 1000)))
    return path


@pytest.fixture
def http_folder(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(folder, base URL): a folder served over HTTP on 127.0.0.1 for the test."""
    folder = tmp_path / "served"
    folder.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
