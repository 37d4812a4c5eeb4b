"""Regressions found by the second hostile pass over issue 24 (each failed on the code before)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from counting.features.cache import FeatureCache
from counting.model.counting_model import default_model_path


@pytest.fixture
def model_copy(tmp_path: Path) -> Path:
    return Path(shutil.copy(default_model_path(), tmp_path / "model.npz"))


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


def _linked_dataset(folder_dataset: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The dataset with its counts.csv, an image and a folder of images moved elsewhere and
    linked back: the command reads them through the links."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    labels = elsewhere / "labels.csv"
    os.replace(folder_dataset / "counts.csv", labels)
    (folder_dataset / "counts.csv").symlink_to(labels)
    image = elsewhere / "img00.png"
    os.replace(folder_dataset / "img00.png", image)
    (folder_dataset / "img00.png").symlink_to(image)
    return labels, image, elsewhere


@pytest.mark.parametrize("target", ["labels", "image", "beside"])
def test_train_and_evaluate_refuse_files_the_dataset_links_to(
    cli, folder_dataset: Path, tmp_path: Path, model_copy: Path, target: str
) -> None:
    from robust_helpers import assert_one_error

    labels, image, elsewhere = _linked_dataset(folder_dataset, tmp_path)
    if target == "beside":  # a folder the dataset links to as a whole
        (folder_dataset / "more").symlink_to(elsewhere, target_is_directory=True)
        output = elsewhere / "model.npz"
    else:
        output = labels if target == "labels" else image
    before = {path: path.read_bytes() for path in (labels, image)}
    common = ["-d", "folder", "-r", folder_dataset, "--no-cache"]
    assert_one_error(cli("train", *common, "--epochs", "1", "-o", output), "reads it through a symlink")
    assert_one_error(cli("evaluate", *common, "-m", model_copy, "--json", output), "reads it through a symlink")
    assert_one_error(cli("evaluate", *common, "-m", model_copy, "--csv", output), "reads it through a symlink")
    assert {path: path.read_bytes() for path in (labels, image)} == before
    assert not (elsewhere / "model.npz").exists()
