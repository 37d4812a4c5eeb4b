"""`counting serve examples/serve.toml` starts as a fresh clone has it (issue 49): it stopped with
"video file not found" until a script had made its videos. Run on a copy of the files a clone
holds (what git tracks or would add, never what it ignores: no video made on this machine), it
counts both cameras and an upload, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from robust_helpers import REPO_ROOT


def clone_files(folder: str) -> list[str]:
    """The files under ``folder`` that a clone of this checkout has: tracked, or new and not
    ignored (what the next commit adds); files that .gitignore names (made by running) are not."""
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout to tell the committed example files from made ones")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file()]


def copy_of_the_example(root: Path) -> Path:
    """examples/ as a clone has it, under ``root``, with the shipped models beside it (linked:
    they are tracked files, nothing is made from them)."""
    for name in clone_files("examples"):
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    (root / "models").symlink_to(REPO_ROOT / "models", target_is_directory=True)
    return root / "examples" / "serve.toml"


def first_line(stream, timeout: float) -> str:  # type: ignore[no-untyped-def]
    """The first line of a process's pipe, or '' after ``timeout`` seconds."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0].strip() if lines else ""


@pytest.mark.slow  # a serve process loading the Mall density model and the default crowd model
def test_the_serve_example_starts_as_a_clone_has_it(tmp_path: Path, mall_root: Path) -> None:
    config = copy_of_the_example(tmp_path)
    assert not (tmp_path / "examples" / "serve-history.sqlite").exists()  # a made file: not copied
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    environment.pop("COUNTING_SERVE_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "counting.cli.app", "serve", str(config), "--port", "0", "--quiet", "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=tmp_path,
    )
    try:
        url = first_line(process.stdout, timeout=180)  # --quiet --port 0 prints the address alone
        assert url.startswith("http://127.0.0.1:"), f"no address: {url!r} {process.poll()} {process.stderr.read()}"  # type: ignore[union-attr]
        with httpx.Client(base_url=url, timeout=120) as client:
            frame = (mall_root / "frames" / "seq_000005.jpg").read_bytes()
            upload = client.post("/api/count", files={"file": ("seq_000005.jpg", frame, "image/jpeg")})
            assert upload.status_code == 200, upload.text
            assert Path(upload.json()["model"]).name == "crowd.npz"
            assert 10 < upload.json()["images"][0]["count"] < 60  # Mall frames hold 13-53 people
            deadline = time.monotonic() + 180
            latest = client.get("/api/latest").json()
            while not all(latest.values()) and time.monotonic() < deadline:
                time.sleep(0.5)
                latest = client.get("/api/latest").json()
        assert set(latest) == {"mall-a", "mall-b"}
        for name, record in latest.items():
            assert record is not None, f"camera {name} counted no frame in 180 s"
            assert 10 < record["count"] < 60 and record["zones"], record
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
