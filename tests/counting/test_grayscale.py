"""Grayscale copies: the preprocessing that makes them, the conv heads' training on them beside
their pictures (never validated on, never leaking into the head validated on their picture), and
a model that sees every picture as its grayscale copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from counting.features import FeatureCache
from counting.features.backbones.preprocessing import Normalisation, Preprocessing, grayscale_pixels, prepare_image
from counting.heads.density.conv import fitting as conv_fitting
from counting.heads.density.conv.fitting import ConvSettings, fit_conv_heads
from counting.model.counting_model import load_model

NORMALISATION = Normalisation(mean=(127.0, 127.0, 127.0), std=(128.0, 128.0, 128.0))
REPO = Path(__file__).resolve().parents[2]


def test_grayscale_pixels_are_pils_luma_in_every_channel() -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (31, 47, 3), dtype=np.uint8)
    expected = np.asarray(Image.fromarray(pixels).convert("L").convert("RGB"))
    np.testing.assert_array_equal(grayscale_pixels(pixels), expected)
    pure = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]]], np.uint8)
    assert grayscale_pixels(pure)[0, :, 0].tolist() == [76, 150, 29, 255]


def test_a_grayscale_view_is_the_grayscale_files_input(shared_data: Path) -> None:
    """The copy is made after resizing (cheaper); a grayscale file resized instead differs only by
    rounding (at most two grey levels, a small fraction of one on average), and every channel of
    the view is equal."""
    photo = Image.open(shared_data / "shanghaitech-B-train" / "images" / "IMG_1.jpg").convert("RGB")
    for planar in (False, True):
        seen = prepare_image(photo, Preprocessing(224, grayscale=True), NORMALISATION, channels_last=not planar).numpy()
        file = prepare_image(photo.convert("L"), Preprocessing(224), NORMALISATION, channels_last=not planar).numpy()
        colour = prepare_image(photo, Preprocessing(224), NORMALISATION, channels_last=not planar).numpy()
        assert seen.shape == file.shape == colour.shape == (3, 224, 299)
        np.testing.assert_array_equal(seen[0], seen[1])
        np.testing.assert_array_equal(seen[0], seen[2])
        assert np.abs(seen - file).max() <= 2.01 / 128
        assert np.abs(seen - file).mean() < 0.5 / 128
        assert np.abs(seen - colour).max() > 0.2
    flipped = prepare_image(photo, Preprocessing(224, flip=True, grayscale=True), NORMALISATION).numpy()
    np.testing.assert_array_equal(flipped, seen[:, :, ::-1])


def test_grayscale_is_part_of_the_preprocessing_key() -> None:
    colour, gray = Preprocessing(224), Preprocessing(224, grayscale=True)
    assert colour != gray and hash(colour) != hash(gray)
    assert gray == Preprocessing(224, grayscale=True)
    assert "grayscale" not in colour.fingerprint()  # colour cache entries keep their keys
    assert gray.fingerprint()["grayscale"] == "itu-r-601-luma"


def test_degraded_is_part_of_the_preprocessing_key_and_made_after_resizing(shared_data: Path) -> None:
    """A degraded view (counting.data.copies.degraded_pixels) has its own cache key, and is the
    plain view's pixels degraded: the same input every time, another input than the plain one."""
    from counting.data.copies import degraded_pixels
    from counting.features.backbones.preprocessing import DEGRADED_COPIES

    plain, degraded = Preprocessing(224), Preprocessing(224, degraded=True)
    assert plain != degraded and hash(plain) != hash(degraded)
    assert degraded != Preprocessing(224, grayscale=True)
    assert "degraded" not in plain.fingerprint()  # earlier cache entries keep their keys
    assert degraded.fingerprint()["degraded"] == DEGRADED_COPIES
    photo = Image.open(shared_data / "shanghaitech-B-train" / "images" / "IMG_1.jpg").convert("RGB")
    seen = prepare_image(photo, degraded, NORMALISATION).numpy()
    colour = prepare_image(photo, plain, NORMALISATION).numpy()
    np.testing.assert_array_equal(seen, prepare_image(photo, degraded, NORMALISATION).numpy())
    pixels = np.rint(colour.transpose(1, 2, 0) * 128 + 127).astype(np.uint8)
    np.testing.assert_allclose(seen, (degraded_pixels(pixels).transpose(2, 0, 1) - 127.0) / 128, atol=1e-6)
    assert np.abs(seen - colour).mean() > 0.005


def test_each_kind_of_copy_is_trained_on_its_share_of_the_time(monkeypatch) -> None:
    """Grayscale and degraded copies together: every copy is drawn (none of a held-out picture),
    with its kind's share of the crops."""
    from counting.heads.density.conv.training import copy_kinds

    settings = ConvSettings(gray_share=0.2, degraded_share=0.3)
    assert copy_kinds(settings) == [(0.2, {"grayscale": True}), (0.3, {"degraded": True})]
    with pytest.raises(ValueError, match=r"gray_share \+ degraded_share must be under 1"):
        ConvSettings(gray_share=0.5, degraded_share=0.5)
    with pytest.raises(ValueError, match=r"degraded_share must be in \[0, 1\)"):
        ConvSettings(degraded_share=-0.1)
    rng = np.random.default_rng(1)
    pictures = 12
    maps = [rng.normal(size=(3, 8, 8)).astype(np.float16) for _ in range(3 * pictures)]
    targets = [np.abs(rng.normal(size=(8, 8))) / 10 for _ in range(3 * pictures)]
    counts = np.array([target.sum() for target in targets])
    parts = [np.arange(pictures) >= 9]
    drawn: list[int] = []
    crop_batch = conv_fitting._crop_batch

    def recording(maps_, targets_, weights_, choice, crop, rng_):
        drawn.extend(int(index) for index in choice)
        return crop_batch(maps_, targets_, weights_, choice, crop, rng_)

    monkeypatch.setattr(conv_fitting, "_crop_batch", recording)
    weights = np.concatenate([np.full(pictures, 0.5), np.full(pictures, 0.2), np.full(pictures, 0.3)])
    fit_conv_heads(
        maps, targets, counts, ["a"], parts, sample_weights=weights, copy_of=np.tile(np.arange(pictures), 2),
        settings=ConvSettings(width=4, depth=1, crop=6, batch=16, max_steps=60, eval_every=60, keep="last"),
    )  # fmt: skip
    kinds = np.bincount(np.array(drawn) // pictures, minlength=3) / len(drawn)
    np.testing.assert_allclose(kinds, [0.5, 0.2, 0.3], atol=0.06)
    held_out = {9, 10, 11}
    assert not set(drawn) & {index + offset for index in held_out for offset in (0, pictures, 2 * pictures)}


def test_copies_train_with_their_picture_and_never_leak_into_its_validation(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    pictures = 12
    maps = [rng.normal(size=(3, 8, 8)).astype(np.float16) for _ in range(2 * pictures)]
    targets = [np.abs(rng.normal(size=(8, 8))) / 10 for _ in range(2 * pictures)]
    counts = np.array([target.sum() for target in targets])
    parts = [np.arange(pictures) % 3 == fold for fold in range(3)]
    drawn: list[set[int]] = []
    crop_batch = conv_fitting._crop_batch

    def recording(maps_, targets_, weights_, choice, crop, rng_):
        drawn[-1].update(int(index) for index in choice)
        return crop_batch(maps_, targets_, weights_, choice, crop, rng_)

    monkeypatch.setattr(conv_fitting, "_crop_batch", recording)
    settings = ConvSettings(width=4, depth=1, crop=6, batch=8, max_steps=40, eval_every=40, keep="last")
    weights = np.concatenate([np.full(pictures, 0.75), np.full(pictures, 0.25)])

    def log(line: str) -> None:
        if line.startswith("training"):
            drawn.append(set())

    fits, rows = fit_conv_heads(
        maps, targets, counts, ["a"], parts, settings=settings, sample_weights=weights,
        copy_of=np.arange(pictures), log=log,
    )  # fmt: skip
    assert rows.shape == (pictures, 1) and np.isfinite(rows).all()
    for part, fit, chosen in zip(parts, fits, drawn, strict=True):
        validated = set(np.flatnonzero(part).tolist())
        assert len(fit.validation_sums) == len(validated)
        assert not chosen & validated  # its validation pictures are not trained on
        assert not chosen & {pictures + index for index in validated}  # nor are their copies
        assert chosen & {pictures + index for index in np.flatnonzero(~part)}  # the others' copies are
    with pytest.raises(ValueError, match="24 maps are not 12 pictures and 11 copies"):
        fit_conv_heads(maps, targets, counts, ["a"], parts, settings=settings, copy_of=np.arange(11))
    with pytest.raises(ValueError, match="copies of them"):
        fit_conv_heads(maps, targets, counts, ["a"], parts, settings=settings, copy_of=np.arange(12) + 1)


def test_a_model_seeing_grayscale_counts_the_grayscale_file(shared_data: Path, tmp_path: Path) -> None:
    """seeing_grayscale(): a colour Mall frame counted as its grayscale copy, under its own cache
    key (the colour count already cached is not served for it)."""
    model = load_model(REPO / "models" / "mall-sums.npz")
    frames = [shared_data / "mall-train" / "frames" / f"seq_{number:06d}.jpg" for number in (1, 400)]
    grays = []
    for frame in frames:
        gray = tmp_path / f"{frame.stem}-gray.png"
        Image.open(frame).convert("L").save(gray)
        grays.append(gray)
    cache = FeatureCache(tmp_path / "cache")
    colour = model.count_paths(frames, cache=cache).counts
    seen = model.seeing_grayscale().count_paths(frames, cache=cache).counts
    files = model.count_paths(grays, cache=cache).counts
    np.testing.assert_allclose(seen, files, atol=0.1)
    assert np.abs(seen - colour).max() > 0.1
    np.testing.assert_array_equal(model.count_paths(frames, cache=cache).counts, colour)


def test_a_model_seeing_degraded_copies_counts_them_under_their_own_key(shared_data: Path, tmp_path: Path) -> None:
    model = load_model(REPO / "models" / "mall-sums.npz")
    frames = [shared_data / "mall-train" / "frames" / f"seq_{number:06d}.jpg" for number in (1, 400)]
    cache = FeatureCache(tmp_path / "cache")
    colour = model.count_paths(frames, cache=cache).counts
    seen = model.seeing_degraded().count_paths(frames, cache=cache).counts
    assert np.isfinite(seen).all() and np.abs(seen - colour).max() > 0.01
    np.testing.assert_array_equal(model.seeing_degraded().count_paths(frames, cache=cache).counts, seen)
    np.testing.assert_array_equal(model.count_paths(frames, cache=cache).counts, colour)
    assert model.preprocessing().degraded is False  # the view has its own preprocessing


def test_the_shipped_crowd_model_counts_grayscale_mall_frames_as_colour_ones(shared_data: Path) -> None:
    """The Mall specialist trained on grayscale copies and the router learnt them: a grayscale
    Mall frame goes to the Mall specialist and is counted within two people of its colour count
    (before the copies the specialist, trained on colour frames, counted 39 % fewer people)."""
    model = load_model(REPO / "models" / "crowd.npz")
    gray = model.seeing_grayscale()
    frames = [str(shared_data / "mall-train" / "frames" / f"seq_{number:06d}.jpg") for number in (650, 750)]
    statistics, ok, _ = gray.probe_paths(frames)
    head = gray.density_head
    mall = list(head.specialists).index("mall") + 1
    assert ok.all() and np.all(head.router.mixture(statistics, list(head.specialists))[:, mall] > 0.95)
    colour, seen = model.count_paths(frames).counts, gray.count_paths(frames).counts
    assert np.all(np.abs(seen - colour) < 2.0) and np.all(colour > 15)


def test_a_gray_share_outside_zero_to_one_is_refused() -> None:
    from counting.train import CrowdSettings

    assert CrowdSettings(gray_share=0.25).conv_settings().gray_share == 0.25
    for share in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="gray_share must be in \\[0, 1\\)"):
            CrowdSettings(gray_share=share)
        with pytest.raises(ValueError, match="gray_share must be in \\[0, 1\\)"):
            ConvSettings(gray_share=share)


def test_a_cluster_refuses_grayscale_extraction() -> None:
    """Its workers rebuild the preprocessing from the input size and ROI: they would see colour."""
    from counting.apply.distributed import extract_features_distributed
    from counting.apply.distributed.cluster import ClusterError
    from counting.features.backbones import get_backbone

    with pytest.raises(ClusterError, match="rebuild only the input size and ROI, not grayscale; drop --cluster"):
        extract_features_distributed(
            ["a.jpg"], get_backbone("efficientnet-lite0"), Preprocessing(input_size=64, grayscale=True), client=None
        )
