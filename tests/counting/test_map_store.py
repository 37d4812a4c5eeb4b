"""Training maps on disk (counting.heads.density.map_store): what a crop reads is what was written,
the training is the one in memory, and the folder goes when training ends or fails."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from counting.features.backbones import Preprocessing, get_backbone
from counting.heads.density import map_store
from counting.heads.density.conv import fitting as conv_fitting
from counting.heads.density.conv import training as conv_training
from counting.heads.density.conv.fitting import ConvSettings, fit_conv_head, stride8_maps
from counting.heads.density.map_store import MapStore, StoredMap


@pytest.fixture(scope="module")
def mall_conv(mall_root: Path):
    from counting.data import load_dataset

    return load_dataset("mall", mall_root, split="train=1-20,test=21-24")


def _maps(n: int = 6, channels: int = 5, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(channels, 9 + k, 12 - k)).astype(np.float16) for k in range(n)]


def test_a_stored_map_reads_back_exactly_the_window_asked_for(tmp_path: Path) -> None:
    maps = _maps()
    with MapStore(tmp_path / "store") as store:
        for item in maps:
            store.append(item)
        assert len(store) == 6 and store.nbytes == sum(item.nbytes for item in maps)
        for stored, item in zip(store, maps, strict=True):
            assert isinstance(stored, StoredMap) and stored.shape == item.shape and stored.dtype == np.float16
            np.testing.assert_array_equal(stored[:, 2:7, 1:5], item[:, 2:7, 1:5])
            np.testing.assert_array_equal(stored[:, 2:7, 1:5][..., ::-1], item[:, 2:7, 1:5][..., ::-1])
            np.testing.assert_array_equal(np.asarray(stored), item)
            assert np.asarray(stored, dtype=np.float32).dtype == np.float32
            np.testing.assert_array_equal(stored.astype(np.float32), item.astype(np.float32))
            np.testing.assert_array_equal(stored.reshape(5, -1), item.reshape(5, -1))
        # Plain .npy files a person can open.
        files = sorted(store.folder.glob("*.npy"))
        assert len(files) == 6
        np.testing.assert_array_equal(np.load(files[3]), maps[3])
        folder = store.folder
    assert not folder.exists()


def test_float32_maps_are_stored_as_float16(tmp_path: Path) -> None:
    item = np.linspace(-3, 3, 5 * 4 * 4, dtype=np.float32).reshape(5, 4, 4)
    store = MapStore(tmp_path)
    store.append(item)
    np.testing.assert_array_equal(np.asarray(store[0]), item.astype(np.float16))
    store.close()
    assert list(tmp_path.iterdir()) == []


def test_a_head_trained_on_stored_maps_is_the_head_trained_in_memory(tmp_path: Path) -> None:
    maps = _maps(8, seed=1)
    targets = [np.abs(np.asarray(item[0], dtype=np.float32)) / 10 for item in maps]
    counts = np.array([float(target.sum()) for target in targets])
    validation = np.arange(8) >= 6
    quick = ConvSettings(width=4, depth=1, batch=3, crop=6, max_steps=12, eval_every=6, seed=3)
    in_memory = fit_conv_head(maps, targets, counts, ("a",), validation, settings=quick)
    with MapStore(tmp_path) as store:
        for item in maps:
            store.append(item)
        on_disk = fit_conv_head(store, targets, counts, ("a",), validation, settings=quick)
    for mine, theirs in zip(on_disk.head.weights, in_memory.head.weights, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(on_disk.validation_sums, in_memory.validation_sums)
    np.testing.assert_array_equal(on_disk.head.x_mean, in_memory.head.x_mean)


def test_stride8_maps_in_chunks_equal_the_maps_made_in_one_go(mall_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [str(mall_root / "frames" / f"seq_{k:06d}.jpg") for k in range(1, 6)]
    backbone = get_backbone("efficientnet-lite0")
    prep = Preprocessing(input_size=96)
    layers = ("block4", "block7", "block10")
    whole = stride8_maps(paths, backbone, prep, layers)  # one chunk (MAP_CHUNK is 32)
    monkeypatch.setattr(map_store, "MAP_CHUNK", 2)  # three chunks: 2 + 2 + 1 pictures
    stored = stride8_maps(paths, backbone, prep, layers)
    assert isinstance(stored, MapStore) and isinstance(whole, MapStore) and len(stored) == len(whole) == 5
    for mine, theirs in zip(stored, whole, strict=True):
        assert theirs.dtype == np.float16 and mine.shape == theirs.shape == (40 + 80 + 112, 12, 16)
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    folders = [stored.folder, whole.folder]
    stored.close()
    whole.close()
    assert not any(folder.exists() for folder in folders)


def test_the_map_folder_is_removed_when_training_fails_half_way(
    mall_conv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C (or any error) in the head's training leaves no map folder behind."""
    made: list[Path] = []
    real = conv_fitting.stride8_maps

    def recording(*args, **kwargs):
        store = real(*args, **kwargs)
        made.append(store.folder)
        return store

    def interrupted(*args, **kwargs):
        assert made and made[0].exists() and any(made[0].glob("*.npy"))
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(conv_training, "stride8_maps", recording)
    monkeypatch.setattr(conv_training, "fit_conv_heads", interrupted)
    train = mall_conv.subset("train")
    prep = Preprocessing(input_size=96)
    with pytest.raises(KeyboardInterrupt):
        conv_training.fit_conv_descriptors(
            train.samples, train, get_backbone("efficientnet-lite0"), prep, (2, 2), is_sequence=True, seed=0
        )
    assert made and made[0].parent == tmp_path and not made[0].exists()
    assert list(tmp_path.iterdir()) == []


def test_the_ridge_head_reads_its_maps_from_disk_and_fits_as_in_memory(
    mall_conv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The closed-form route (`train --density-head`) fits from a float32 store, which it removes
    afterwards: the head is the one fitted on the same maps held in memory."""
    from counting.heads.density import training
    from counting.heads.density.ridge.fitting import fit_density_head

    seen: list = []

    def recording(maps, *args, **kwargs):
        seen.append((maps, len(maps), maps.folder.parent))
        return fit_density_head(maps, *args, **kwargs)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(training, "fit_density_head", recording)
    train = mall_conv.subset("train")
    backbone, prep = get_backbone("efficientnet-lite0"), Preprocessing(input_size=96)
    head, rows = training.fit_head_descriptors(
        train.samples, train, backbone, prep, (2, 2), is_sequence=True, seed=0, kind="ridge"
    )
    ((store, size, parent),) = seen
    assert isinstance(store, MapStore) and store.dtype == np.float32 and size == len(train.samples)
    assert parent == tmp_path
    assert list(tmp_path.iterdir()) == []  # removed once fitted
    # The same fit on the maps in memory.
    from counting.heads.density.maps import extract_maps

    held = extract_maps(train.paths, backbone, prep, head.layers).maps
    density = training.density_targets(
        train.samples, [item.shape[1:] for item in held], training.TargetSettings(), None, str(train.root)
    )
    counts = np.array([float(sample.count) for sample in train.samples])
    folds = np.arange(len(held)) % 5
    on_disk = fit_density_head(store_copy(held, tmp_path), density, counts, head.layers, grid=(2, 2), folds=folds)
    in_memory = fit_density_head(held, density, counts, head.layers, grid=(2, 2), folds=folds)
    np.testing.assert_array_equal(on_disk.head.coef, in_memory.head.coef)
    np.testing.assert_array_equal(on_disk.out_of_fold, in_memory.out_of_fold)
    assert np.isfinite(rows).all() and rows.shape == (len(train.samples), 5)


def store_copy(maps: list[np.ndarray], folder: Path) -> MapStore:
    store = MapStore(folder / "copy", dtype=np.float32)
    for item in maps:
        store.append(item)
    return store


def test_a_full_disk_is_one_line_naming_the_folder_and_leaves_nothing(tmp_path: Path) -> None:
    """A private 1 MB tmpfs stands in for a full disk (unmounted afterwards)."""
    import subprocess

    from counting.core.errors import CountingError

    tiny = tmp_path / "tiny"
    tiny.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(tiny)], capture_output=True).returncode:
        pytest.skip("cannot mount a private tmpfs here (not root)")
    try:
        store = MapStore(tiny)
        with pytest.raises(CountingError, match=r"cannot write the training maps .* after \d+ pictures .*TMPDIR"):
            for _ in range(40):
                store.append(np.zeros((100, 30, 40), np.float16))  # 240 KB each
        assert 1 <= len(store) < 40
        store.close()
        assert list(tiny.iterdir()) == []
    finally:
        subprocess.run(["umount", str(tiny)], check=True)
