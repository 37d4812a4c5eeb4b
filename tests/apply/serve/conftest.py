"""Fixtures of the `counting serve` tests: small videos made of real Mall frames and an MJPEG
stream served on loopback (helpers: serve_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import MjpegStream, mall_frames

from counting.apply.serve.videos import frames_to_video


@pytest.fixture(scope="session")
def mall_video(mall_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mall frames 1-40 as a 10 frames/s MJPEG .avi (4 s, looped by the service)."""
    return frames_to_video(mall_frames(mall_root, 1, 40), tmp_path_factory.mktemp("videos") / "mall.avi", 10.0)


@pytest.fixture
def mjpeg_stream(mall_root: Path) -> Iterator[MjpegStream]:
    stream = MjpegStream(mall_frames(mall_root, 41, 60))
    yield stream
    stream.close()
