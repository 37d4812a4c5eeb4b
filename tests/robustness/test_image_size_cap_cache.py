"""The feature cache does not hash a file the decoder's size cap refuses (a sparse 100 GB \"JPEG\")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from counting.features.cache import FeatureCache


def test_a_file_over_the_image_size_cap_is_not_hashed_for_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache hashed the whole file before the decoder's size cap refused it: a sparse
    100 GB "JPEG" took 100 s to be skipped whenever a cache was in use."""
    monkeypatch.setenv("COUNTING_MAX_IMAGE_BYTES", "1000")
    big, small = tmp_path / "big.jpg", tmp_path / "small.jpg"
    with open(big, "wb") as handle:
        handle.write(b"\xff\xd8")
        handle.truncate(5000)
    small.write_bytes(b"\xff\xd8" + b"\0" * 500)
    cache = FeatureCache(tmp_path / "cache")
    opened: list[str] = []
    real_open = open

    def watching_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watching_open)
    assert cache.content_hash(big) is None
    assert str(big) not in opened
    assert cache.content_hash(small) is not None
