"""UCSD reader on the real release's annotation files (``ucsd-real/`` of the shared data).

The real ``vidf-cvpr/`` files are all here (the ten count files, the ROI, the perspective map,
the head points of clips 000 and 002) but only two frames are: vidf1_33_000_f001 (frame 1) and
vidf1_33_002_f200 (frame 600). The layout the reader expects is rebuilt under tmp_path: the
real annotation files and frames linked in, a generated 238x158 grayscale PNG for every other
frame number. Figures from the release: counts 11-45, mean 24.75 over the 2000 frames.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from PIL import Image

from counting.core.errors import DatasetError
from counting.data.datasets import load_dataset
from counting.data.datasets.ucsd import FRAMES_PER_CLIP, frame_path
from counting.features.descriptors import Descriptor

HEIGHT, WIDTH = 158, 238
REAL_FRAMES = {1: (0, 1), 600: (2, 200)}  # global frame number -> (clip, frame in clip)


def build_layout(real: Path, root: Path, clips: range = range(10), annotations: bool = True) -> Path:
    """``root/vidf-cvpr`` linked to the real files, ``root/vidf`` with every frame of ``clips``:
    the real one where it exists, else a link to one generated frame of the clip."""
    if annotations:
        (root / "vidf-cvpr").mkdir(parents=True)
        for source in sorted((real / "vidf-cvpr").glob("*.mat")):
            (root / "vidf-cvpr" / source.name).symlink_to(source)
    rng = np.random.default_rng(0)
    generated = root / "generated"
    generated.mkdir(parents=True, exist_ok=True)
    for clip in clips:
        stand_in = generated / f"clip{clip}.png"
        Image.fromarray(rng.integers(0, 256, (HEIGHT, WIDTH), dtype=np.uint8), mode="L").save(stand_in)
        for frame in range(1, FRAMES_PER_CLIP + 1):
            target = frame_path(root, clip, frame)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = frame_path(real, clip, frame)
            target.symlink_to(source if source.is_file() else stand_in)
    return root


@pytest.fixture(scope="module")
def release(ucsd_real_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_layout(ucsd_real_root, tmp_path_factory.mktemp("ucsd-real") / "ucsd")


@pytest.fixture(scope="module")
def standard(release: Path):
    return load_dataset("ucsd", release)


def _direction_counts(real: Path, clip: int) -> np.ndarray:
    contents = scipy.io.loadmat(real / "vidf-cvpr" / f"vidf1_33_{clip:03d}_count_roi_mainwalkway.mat")
    return np.stack([np.asarray(cell, dtype=float).ravel() for cell in contents["count"].ravel()])


def test_counts_of_the_2000_frames_are_the_releases(standard, ucsd_real_root: Path) -> None:
    counts = standard.counts
    assert len(standard) == 2000 and standard.indices.tolist() == list(range(1, 2001))
    assert counts.min() == 11 and counts.max() == 45
    assert counts.sum() == 49496 and counts.mean() == pytest.approx(24.75, abs=0.005)
    assert np.array_equal(counts, np.round(counts))  # whole people
    # Each frame's count is the sum of the two walking directions of its clip's count file.
    for clip in range(10):
        directions = _direction_counts(ucsd_real_root, clip)
        assert directions.shape == (2, FRAMES_PER_CLIP)
        assert np.array_equal(counts[clip * 200 : (clip + 1) * 200], directions.sum(axis=0))
    # Per clip: clip 006 is the densest (32-45 people), clips 003/004 the sparsest (11).
    per_clip = counts.reshape(10, 200)
    assert per_clip.min(axis=1).tolist() == [12, 20, 19, 11, 11, 20, 32, 29, 21, 17]
    assert per_clip.max(axis=1).tolist() == [22, 27, 25, 21, 23, 40, 45, 45, 31, 24]


def test_standard_split_is_601_1400_train_the_other_1200_test(standard) -> None:
    train, test = standard.subset("train"), standard.subset("test")
    assert len(train) == 800 and len(test) == 1200
    assert train.indices.tolist() == list(range(601, 1401))
    assert test.indices.tolist() == [*range(1, 601), *range(1401, 2001)]
    assert (train.counts.min(), train.counts.max(), train.counts.sum()) == (11, 45, 20201)
    assert (test.counts.min(), test.counts.max(), test.counts.sum()) == (12, 45, 29295)
    summary = standard.describe()
    assert summary["splits"]["train"]["count_mean"] == 25.251 and summary["splits"]["test"]["count_mean"] == 24.413
    assert summary["roi_mask"] == [HEIGHT, WIDTH]


def test_the_two_real_frames_are_where_they_belong(standard, ucsd_real_root: Path) -> None:
    by_number = {sample.index: sample for sample in standard.samples}
    for number, (clip, frame) in REAL_FRAMES.items():
        sample = by_number[number]
        assert sample.path.name == f"vidf1_33_{clip:03d}_f{frame:03d}.png"
        assert sample.path.resolve() == frame_path(ucsd_real_root, clip, frame).resolve()
        assert sample.split == "test"
        with Image.open(sample.path) as image:
            assert (image.mode, image.size) == ("L", (WIDTH, HEIGHT))
    assert (by_number[1].count, by_number[600].count) == (12, 20)
    assert (len(by_number[1].dots), len(by_number[600].dots)) == (17, 24)


def test_roi_mask_is_the_main_walkway(standard, ucsd_real_root: Path) -> None:
    mask = standard.roi_mask
    assert mask.shape == (HEIGHT, WIDTH) and mask.dtype == bool
    assert int(mask.sum()) == 19525  # 52 % of the frame
    roi = scipy.io.loadmat(ucsd_real_root / "vidf-cvpr" / "vidf1_33_roi_mainwalkway.mat")["roi"][0, 0]
    assert np.array_equal(mask, roi["mask"] != 0)
    # The walkway crosses the frame diagonally: the top-left and bottom-right corners are outside.
    assert not mask[0, 0] and not mask[-1, -1] and mask[HEIGHT // 2, WIDTH // 2]


def test_perspective_map_is_read_and_weights_far_rows_up(standard) -> None:
    """``dmap.pmapxy``: an area weight per pixel, one value per image row (like Mall's pMapN)."""
    weights = standard.perspective_map
    assert weights is not None and weights.shape == (HEIGHT, WIDTH)
    assert np.allclose(weights, weights[:, :1])  # constant along each row
    column = weights[:, 0]
    assert column[0] == pytest.approx(7.5306, abs=1e-4) and column[-1] == pytest.approx(0.7805, abs=1e-4)
    assert (np.diff(column) < 0).all()  # people are smaller (weigh more) further up
    # The perspective-weighted descriptors take it (before: "has no perspective map").
    descriptor = Descriptor.build("sum:block10,perspective", weights, source="ucsd")
    assert descriptor.perspective_code["shape"] == [HEIGHT, WIDTH]
    assert np.allclose(descriptor.perspective_full(), weights, rtol=1e-5)


def test_head_points_of_clips_000_and_002_agree_with_the_counts(standard) -> None:
    """frame_full covers the whole frame, the count the walkway ROI only. The release counted a
    person on the ROI mask pixel of the point (MATLAB coordinates: pixel centres at 1, 2, ...):
    that count is never below the published one and equals it on 191 and 180 of the 200 frames
    (the rest differ by 1-2 people at the ROI's edge)."""
    by_number = {sample.index: sample for sample in standard.samples}
    mask = standard.roi_mask
    for clip, agreeing in ((0, 191), (2, 180)):
        samples = [by_number[clip * 200 + frame] for frame in range(1, 201)]
        assert all(sample.dots is not None and sample.dots.shape[1] == 2 for sample in samples)
        assert all(len(sample.dots) >= sample.count for sample in samples)
        inside = []
        for sample in samples:
            cols = np.clip(np.round(sample.dots[:, 0]).astype(int) - 1, 0, WIDTH - 1)
            rows = np.clip(np.round(sample.dots[:, 1]).astype(int) - 1, 0, HEIGHT - 1)
            inside.append(int(mask[rows, cols].sum()))
        inside, counts = np.array(inside), np.array([sample.count for sample in samples])
        assert (inside >= counts).all() and int((inside == counts).sum()) == agreeing
        assert (inside - counts).max() <= 2
    assert by_number[1].dots[0].tolist() == pytest.approx([30.26241135, 114.86083686])
    # The other eight clips ship no head points: their frames have none.
    assert all(by_number[number].dots is None for number in (201, 601, 1400, 2000))


def test_range_split_on_the_shared_folder_itself(ucsd_real_root: Path) -> None:
    """The two real frames with nothing generated: a range split reads them; the standard
    split refuses the partial sequence, naming the first missing frame of clip 002."""
    ds = load_dataset("ucsd", ucsd_real_root, split="train=600,test=1")
    assert [sample.path.name for sample in ds.samples] == ["vidf1_33_000_f001.png", "vidf1_33_002_f200.png"]
    assert ds.counts.tolist() == [12, 20] and ds.splits.tolist() == ["test", "train"]
    assert ds.roi_mask.shape == ds.perspective_map.shape == (HEIGHT, WIDTH)
    with pytest.raises(DatasetError, match=r"vidf1_33_002_f001\.png: frame not found, but later frames"):
        load_dataset("ucsd", ucsd_real_root)


def test_a_perspective_map_of_another_size_is_named(ucsd_real_root: Path, tmp_path: Path) -> None:
    root = build_layout(ucsd_real_root, tmp_path / "ucsd", clips=range(1))
    dmap = root / "vidf-cvpr" / "vidf1_33_dmap3.mat"
    dmap.unlink()
    shutil.copy(ucsd_real_root / "vidf-cvpr" / "vidf1_33_dmap3.mat", dmap)
    real = scipy.io.loadmat(dmap)["dmap"]
    real[0, 0]["pmapxy"] = real[0, 0]["pmapxy"][:100, :]
    scipy.io.savemat(dmap, {"dmap": real})
    with pytest.raises(DatasetError, match=r"vidf1_33_dmap3\.mat: dmap\.pmapxy is 238x100 \(WxH\) but frame"):
        load_dataset("ucsd", root, split="random:0.5")
    dmap.unlink()
    assert load_dataset("ucsd", root, split="random:0.5").perspective_map is None  # optional
