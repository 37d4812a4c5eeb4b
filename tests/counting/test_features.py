"""Batched extraction, bad images, the on-disk cache (hit, resume, corruption) and the CLI."""

from __future__ import annotations

import io
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import typer
from rich.console import Console
from typer.testing import CliRunner

from counting.cli.app import app as counting_app
from counting.core.errors import ImageError
from counting.data.imaging import load_image
from counting.features import FeatureCache, configure_torch_threads, default_cache_dir, extract_features
from counting.features.backbones import Backbone, Preprocessing, get_backbone
from counting.features.extract import available_cpus

SIZE = 96  # small inputs keep the suite fast; the pipeline is size-agnostic


@pytest.fixture(scope="session")
def backbone() -> Backbone:
    model = get_backbone("efficientnet-lite0")
    model.trace_after = 1_000_000  # few batches per shape here: eager (trace tested in test_backbones)
    return model


@pytest.fixture(scope="module")
def mall_frames(mall_root: Path) -> list[Path]:
    return [mall_root / "frames" / f"seq_{i:06d}.jpg" for i in range(1, 8)]


@pytest.fixture(scope="module")
def mixed_sizes(voc_root: Path, shanghaitech_root: Path, mall_root: Path) -> list[Path]:
    """Real images of different sizes: VOC photos, a ShanghaiTech image and a Mall frame."""
    voc = sorted((voc_root / "VOC2007" / "JPEGImages").glob("*.jpg"))[:3]
    return [*voc, shanghaitech_root / "images" / "IMG_1.jpg", mall_root / "frames" / "seq_000001.jpg"]


@pytest.fixture(scope="module")
def bad_images(tmp_path_factory: pytest.TempPathFactory, mall_root: Path) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad")
    real = (mall_root / "frames" / "seq_000001.jpg").read_bytes()
    files = {
        "truncated": (folder / "truncated.jpg", real[: len(real) // 3]),
        "text": (folder / "readme.jpg", b"not an image at all\n"),
        "empty": (folder / "empty.jpg", b""),
    }
    for path, data in files.values():
        path.write_bytes(data)
    return {name: path for name, (path, _) in files.items()} | {"missing": folder / "gone.jpg"}


def _one_by_one(backbone: Backbone, paths: list[Path], prep: Preprocessing) -> np.ndarray:
    return np.concatenate([backbone.eager_forward(backbone.prepare(load_image(p), prep)[None]) for p in paths])


def test_batched_extraction_matches_single_images(backbone: Backbone, mall_frames: list[Path]) -> None:
    prep = Preprocessing(input_size=SIZE)
    result = extract_features(mall_frames, backbone, prep, batch_size=3, progress=False)
    assert result.features.shape == (7, 1000) and result.ok.all() and result.errors == {}
    assert result.n_computed == 7 and result.paths == [str(p) for p in mall_frames]
    np.testing.assert_allclose(result.features, _one_by_one(backbone, mall_frames, prep), rtol=1e-4, atol=1e-4)
    # Consecutive frames of a static camera are close, but not identical.
    assert 0 < np.abs(result.features[0] - result.features[1]).max() < np.abs(result.features).max()


def test_images_of_different_sizes_in_one_run(backbone: Backbone, mixed_sizes: list[Path]) -> None:
    sizes = {load_image(p).size for p in mixed_sizes}
    assert len(sizes) >= 3
    prep = Preprocessing(input_size=SIZE)
    result = extract_features(mixed_sizes, backbone, prep, batch_size=4, progress=False)
    assert result.ok.all()
    np.testing.assert_allclose(result.features, _one_by_one(backbone, mixed_sizes, prep), rtol=1e-4, atol=1e-4)


def test_bad_images_are_skipped_with_their_messages(
    backbone: Backbone, mall_frames: list[Path], bad_images: dict[str, Path]
) -> None:
    paths = [
        mall_frames[0],
        bad_images["truncated"],
        bad_images["text"],
        mall_frames[1],
        bad_images["empty"],
        bad_images["missing"],
    ]
    result = extract_features(paths, backbone, Preprocessing(SIZE), batch_size=4, progress=False, on_error="skip")
    np.testing.assert_array_equal(result.ok, [True, False, False, True, False, False])
    assert np.isnan(result.features[~result.ok]).all() and np.isfinite(result.features[result.ok]).all()
    expected = {
        "truncated": "image file is truncated",
        "text": "not an image file",
        "empty": "file is empty (0 bytes)",
        "missing": "file not found",
    }
    assert set(result.errors) == {str(bad_images[name]) for name in expected}
    for name, problem in expected.items():
        message = result.errors[str(bad_images[name])]
        assert message.startswith(f"{bad_images[name]}: ") and problem in message and "\n" not in message
    np.testing.assert_allclose(
        result.features[[0, 3]],
        _one_by_one(backbone, [mall_frames[0], mall_frames[1]], Preprocessing(SIZE)),
        rtol=1e-4,
        atol=1e-4,
    )


def test_bad_image_raises_naming_the_file(
    backbone: Backbone, mall_frames: list[Path], bad_images: dict[str, Path]
) -> None:
    with pytest.raises(ImageError, match=rf"^{bad_images['text']}: not an image file"):
        extract_features([mall_frames[0], bad_images["text"]], backbone, Preprocessing(SIZE), progress=False)
    with pytest.raises(ValueError, match="on_error"):
        extract_features(mall_frames[:1], backbone, Preprocessing(SIZE), progress=False, on_error="ignore")


def test_grid_and_pooled_outputs(backbone: Backbone, mall_frames: list[Path]) -> None:
    prep = Preprocessing(input_size=SIZE)
    whole = extract_features(mall_frames[:2], backbone, prep, progress=False).features
    grid = extract_features(mall_frames[:2], backbone, prep, grid=(2, 3), progress=False).features
    assert grid.shape == (2, 6, 1000)
    one_cell = extract_features(mall_frames[:2], backbone, prep, grid=(1, 1), progress=False).features
    np.testing.assert_allclose(one_cell[:, 0], whole, rtol=1e-5, atol=1e-5)
    pooled = extract_features(mall_frames[:2], backbone, prep, progress=False, pooled=True).features
    assert pooled.shape == (2, 1280) and (pooled >= 0).all()  # after ReLU6: non-negative


def test_roi_changes_descriptors(backbone: Backbone, mall_frames: list[Path]) -> None:
    mask = np.zeros((480, 640), bool)
    mask[120:360, 160:480] = True
    plain = extract_features(mall_frames[:2], backbone, Preprocessing(SIZE), progress=False).features
    masked = extract_features(mall_frames[:2], backbone, Preprocessing(SIZE, roi_mask=mask), progress=False).features
    assert np.abs(plain - masked).max() > 0.1


# -- cache ----------------------------------------------------------------------------------------
class CountingBackbone:
    """Wraps a backbone, counting images sent through the network; can fail after N batches."""

    def __init__(self, inner: Backbone, fail_after_batches: int | None = None) -> None:
        self._inner = inner
        self.images = 0
        self.batches = 0
        self._fail_after = fail_after_batches

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def forward(self, batch):
        if self._fail_after is not None and self.batches >= self._fail_after:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C mid-run
        self.batches += 1
        self.images += len(batch)
        return self._inner.forward(batch)


def test_cache_hit_is_identical_and_skips_the_network(
    backbone: Backbone, mall_frames: list[Path], tmp_path: Path
) -> None:
    prep = Preprocessing(SIZE)
    first = extract_features(mall_frames, backbone, prep, cache=FeatureCache(tmp_path), progress=False)
    spy = CountingBackbone(backbone)
    again = extract_features(mall_frames, spy, prep, cache=FeatureCache(tmp_path), progress=False)
    assert spy.images == 0 and again.n_cached == 7 and again.n_computed == 0
    np.testing.assert_array_equal(again.features, first.features)
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temporary files

    # Any change to the settings or to an image's content is a miss.
    other_size = extract_features(
        mall_frames[:2], spy, Preprocessing(SIZE + 16), cache=FeatureCache(tmp_path), progress=False
    )
    assert other_size.n_computed == 2
    mask = np.ones((480, 640), bool)
    mask[:100] = False
    with_roi = extract_features(
        mall_frames[:2], spy, Preprocessing(SIZE, roi_mask=mask), cache=FeatureCache(tmp_path), progress=False
    )
    assert with_roi.n_computed == 2
    copy = tmp_path / "copy.jpg"
    shutil.copy(mall_frames[0], copy)
    assert (
        extract_features([copy], spy, prep, cache=FeatureCache(tmp_path), progress=False).n_cached == 1
    )  # same content
    unseen = mall_frames[0].with_name("seq_000008.jpg")
    shutil.copy(unseen, copy)  # same path, new content
    changed = extract_features([copy], spy, prep, cache=FeatureCache(tmp_path), progress=False)
    assert changed.n_computed == 1
    np.testing.assert_allclose(changed.features, _one_by_one(backbone, [unseen], prep), rtol=1e-4, atol=1e-4)


def test_interrupted_run_resumes_without_redoing_finished_batches(
    backbone: Backbone, mall_frames: list[Path], tmp_path: Path
) -> None:
    prep = Preprocessing(SIZE)
    interrupted = CountingBackbone(backbone, fail_after_batches=2)
    with pytest.raises(KeyboardInterrupt):
        extract_features(mall_frames, interrupted, prep, cache=FeatureCache(tmp_path), batch_size=2, progress=False)
    assert interrupted.images == 4
    resumed = CountingBackbone(backbone)
    result = extract_features(mall_frames, resumed, prep, cache=FeatureCache(tmp_path), batch_size=2, progress=False)
    assert result.n_cached == 4 and result.n_computed == 3 and resumed.images == 3
    np.testing.assert_allclose(result.features, _one_by_one(backbone, mall_frames, prep), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("damage", ["flip-bytes", "truncate", "empty"])
def test_corrupt_entry_is_detected_and_recomputed(
    backbone: Backbone, mall_frames: list[Path], tmp_path: Path, damage: str
) -> None:
    prep = Preprocessing(SIZE)
    paths = mall_frames[:3]
    first = extract_features(paths, backbone, prep, cache=FeatureCache(tmp_path), progress=False)
    entries = sorted(tmp_path.rglob("*.npy"))
    assert len(entries) == 3
    victim = entries[1]
    data = bytearray(victim.read_bytes())
    if damage == "flip-bytes":
        data[-20:-10] = bytes(255 - b for b in data[-20:-10])  # still a valid .npy, wrong numbers
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = bytearray()
    victim.write_bytes(bytes(data))

    spy = CountingBackbone(backbone)
    again = extract_features(paths, spy, prep, cache=FeatureCache(tmp_path), progress=False)
    assert again.n_cached == 2 and again.n_computed == 1 and spy.images == 1
    np.testing.assert_allclose(again.features, first.features, rtol=1e-4, atol=1e-4)
    healed = extract_features(paths, spy, prep, cache=FeatureCache(tmp_path), progress=False)
    assert healed.n_cached == 3 and len(sorted(tmp_path.rglob("*.npy"))) == 3


def test_stale_temporary_files_are_cleaned_fresh_ones_kept(
    backbone: Backbone, mall_frames: list[Path], tmp_path: Path
) -> None:
    prep = Preprocessing(SIZE)
    extract_features(mall_frames[:1], backbone, prep, cache=FeatureCache(tmp_path), progress=False)
    folder = next(tmp_path.rglob("*.npy")).parent
    stale, fresh = folder / ".killed.tmp", folder / ".writing.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    assert extract_features(mall_frames[:1], backbone, prep, cache=FeatureCache(tmp_path), progress=False).n_cached == 1
    assert not stale.exists() and fresh.exists()


def test_torch_threads_follow_the_machine_unless_pinned(monkeypatch) -> None:
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert configure_torch_threads() == available_cpus() == torch.get_num_threads()
        assert configure_torch_threads(1) == 1 == torch.get_num_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert configure_torch_threads() == 1  # the user's setting is left alone
    finally:
        torch.set_num_threads(before)


def test_default_cache_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COUNTING_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here" and FeatureCache().directory == tmp_path / "here"
    monkeypatch.delenv("COUNTING_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "counting" / "features"


class _Terminal(io.StringIO):
    """A terminal's file: the progress bars ask the file (counting.core.terminal), not rich."""

    def isatty(self) -> bool:
        return True


def test_progress_bar_shows_images_per_second_only_when_asked(backbone: Backbone, mall_frames: list[Path]) -> None:
    shown = _Terminal()
    terminal = Console(file=shown, width=120)
    extract_features(mall_frames[:2], backbone, Preprocessing(SIZE), progress=True, console=terminal)
    assert "img/s" in shown.getvalue() and "2/2" in shown.getvalue()
    hidden = io.StringIO()
    extract_features(
        mall_frames[:2],
        backbone,
        Preprocessing(SIZE),
        progress=False,
        console=Console(file=hidden, force_terminal=True),
    )
    piped = io.StringIO()
    extract_features(mall_frames[:2], backbone, Preprocessing(SIZE), progress=True, console=Console(file=piped))
    # FORCE_COLOR asks for colours in a pipe or a log: rich then calls it a terminal, and the bar
    # redrew itself into the log.
    coloured = io.StringIO()
    console = Console(file=coloured, force_terminal=True)
    extract_features(mall_frames[:2], backbone, Preprocessing(SIZE), progress=True, console=console)
    assert hidden.getvalue() == "" and piped.getvalue() == "" and coloured.getvalue() == ""


# -- the `counting features` command ----------------------------------------------------------
@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    return counting_app


def test_cli_writes_csv_with_filenames(
    cli: typer.Typer, mall_frames: list[Path], tmp_path: Path, backbone: Backbone
) -> None:
    output = tmp_path / "out.csv"
    result = CliRunner().invoke(
        cli,
        [
            "features",
            str(mall_frames[0].parent / "seq_00000[12].jpg"),
            "--input-size",
            str(SIZE),
            "--cache-dir",
            str(tmp_path / "cache"),
            "-o",
            str(output),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = output.read_text().splitlines()
    assert rows[0].split(",")[:3] == ["filename", "f0", "f1"] and len(rows[0].split(",")) == 1001
    assert [row.split(",")[0] for row in rows[1:]] == [str(p) for p in mall_frames[:2]]
    written = np.array([[float(v) for v in row.split(",")[1:]] for row in rows[1:]])
    expected = _one_by_one(backbone, mall_frames[:2], Preprocessing(SIZE))
    np.testing.assert_allclose(written, expected, rtol=1e-4, atol=1e-4)


def test_cli_npy_output_with_grid_and_skipped_images(
    cli: typer.Typer, mall_frames: list[Path], bad_images: dict[str, Path], tmp_path: Path
) -> None:
    output = tmp_path / "out.npy"
    result = CliRunner().invoke(
        cli,
        [
            "features",
            str(mall_frames[0]),
            str(bad_images["text"]),
            "--input-size",
            str(SIZE),
            "--grid",
            "2x2",
            "--no-cache",
            "--skip-bad",
            "-o",
            str(output),
        ],
    )
    assert result.exit_code == 0, result.output
    array = np.load(output)
    assert array.shape == (2, 4, 1000) and np.isfinite(array[0]).all() and np.isnan(array[1]).all()
    assert output.with_suffix(".files.txt").read_text().split() == [str(mall_frames[0]), str(bad_images["text"])]
    assert "not an image file" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["/no/such/frame.jpg"], "/no/such/frame.jpg: no such file or folder"),
        (["--grid", "3by4", "{frame}"], "'--grid': grid '3by4': expected ROWSxCOLS"),
        (["-o", "out.parquet", "{frame}"], "out.parquet: output must end in .npy or .csv"),
        (["--backbone", "vgg", "{frame}"], "'vgg' is not one of efficientnet-lite0, resnet50"),
        (["{bad}"], "not an image file"),
    ],
)
def test_cli_errors_are_one_line(
    cli: typer.Typer, mall_frames: list[Path], bad_images: dict[str, Path], arguments: list[str], message: str
) -> None:
    filled = [a.format(frame=mall_frames[0], bad=bad_images["text"]) for a in arguments]
    result = CliRunner().invoke(cli, ["features", "--no-cache", "--input-size", str(SIZE), *filled])
    assert result.exit_code == (2 if filled[0].startswith("--") else 1)  # click's code for a bad option
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
