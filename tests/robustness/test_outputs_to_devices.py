"""Outputs sent to a device (a private /dev/null): nothing written beside it, and a folder output that
is a device says what it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def null_device(tmp_path: Path):
    """A private character device equal to /dev/null (never the machine's own), removed after."""
    from robust_helpers import NULL_DEVICE, private_device

    path = private_device(tmp_path / "null", NULL_DEVICE)
    yield path
    path.unlink()


def test_features_into_a_device_writes_no_listing_beside_it(cli, tmp_path: Path, null_device: Path) -> None:
    from robust_helpers import make_image

    image = make_image(tmp_path / "a.png")
    out = null_device.with_suffix(".npy")
    os.rename(null_device, out)
    try:
        result = cli("features", image, "-o", out, "--no-cache", "--no-progress")
        assert result.exit_code == 0, result.output
        assert not out.with_suffix(".files.txt").exists()
    finally:
        os.rename(out, null_device)


def test_report_into_a_device_says_what_it_is(cli, null_device: Path) -> None:
    from robust_helpers import assert_one_error

    assert_one_error(cli("report", "-o", null_device), "is a character device, not a folder")
