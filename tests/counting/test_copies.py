"""Everyday copies of a picture (counting.data.copies): recipes drawn reproducibly from the
recompressions photos go through, and copies that hold the codec's traces."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from counting.data.copies import CODECS, QUALITY_RANGE, SCALE_RANGE, CopyRecipe, everyday_copy, recipe_for


def test_recipes_are_reproducible_and_span_the_codecs_qualities_and_sizes() -> None:
    recipes = [recipe_for(0, k) for k in range(400)]
    assert recipes == [recipe_for(0, k) for k in range(400)]  # the fit and its refit make the same copies
    assert recipes != [recipe_for(1, k) for k in range(400)]
    assert {recipe.codec for recipe in recipes} == set(CODECS)
    qualities = np.array([recipe.quality for recipe in recipes])
    assert qualities.min() >= QUALITY_RANGE[0] and qualities.max() <= QUALITY_RANGE[1]
    assert qualities.max() - qualities.min() > 25
    scales = np.array([recipe.scale for recipe in recipes])
    smaller = scales < 1.0
    assert 0.4 < smaller.mean() < 0.6
    assert scales[smaller].min() >= SCALE_RANGE[0]
    assert "quality" in recipes[0].describe()


def test_a_quarter_of_the_gates_copies_are_grayscale_and_a_quarter_blurred() -> None:
    from counting.data.copies import BLUR_RANGE, GATE_BLUR_SHARE, GRAY_SHARE

    recipes = [recipe_for(0, k) for k in range(1000)]
    gray = np.array([recipe.gray for recipe in recipes])
    blurs = np.array([recipe.blur for recipe in recipes])
    assert abs(gray.mean() - GRAY_SHARE) < 0.05 and abs((blurs > 0).mean() - GATE_BLUR_SHARE) < 0.05
    assert not (gray & (blurs > 0)).any()  # one or the other, never both
    assert BLUR_RANGE[0] <= blurs[blurs > 0].min() and blurs.max() <= BLUR_RANGE[1]
    assert "grayscale" in recipes[int(np.flatnonzero(gray)[0])].describe()
    assert "blurred" in recipes[int(np.flatnonzero(blurs)[0])].describe()
    # Without ``wider``: the gate's copies until 2026-11-27, the same recompression of each picture.
    from dataclasses import replace

    recompressed = [recipe_for(0, k, wider=False) for k in range(1000)]
    assert recompressed == [replace(recipe, gray=False, blur=0.0) for recipe in recipes]


def test_a_grayscale_copy_is_the_pictures_luma_in_every_channel(shared_data) -> None:
    from counting.features.backbones.preprocessing import grayscale_pixels

    photo = Image.open(shared_data / "shanghaitech-B-train/images/IMG_10.jpg").convert("RGB")
    for codec in CODECS:
        copy = np.asarray(everyday_copy(photo, CopyRecipe(codec, 95, gray=True)), dtype=int)
        assert copy.shape == (photo.height, photo.width, 3)
        assert np.abs(copy - copy[..., :1]).max() <= 1  # gray: the channels agree (WebP within one level)
        # The luma the backbone's grayscale view sees, up to the codec's traces.
        luma = grayscale_pixels(np.asarray(photo)).astype(int)
        assert np.abs(copy - luma).mean() < 3.0
    colour = np.asarray(everyday_copy(photo, CopyRecipe("JPEG", 95)), dtype=int)
    assert np.abs(colour - colour[..., :1]).mean() > 3.0


def test_a_copy_holds_the_codecs_traces_at_the_recipes_size(shared_data) -> None:
    photo = Image.open(shared_data / "shanghaitech-B-train/images/IMG_10.jpg").convert("RGB")
    original = np.asarray(photo, dtype=float)
    for codec in CODECS:
        same_size = everyday_copy(photo, CopyRecipe(codec, 75))
        assert same_size.mode == "RGB" and same_size.size == photo.size
        difference = np.abs(np.asarray(same_size, dtype=float) - original)
        # Visibly the same picture, not the same pixels.
        assert 0.02 < difference.mean() < 6.0
    low, high = (
        np.abs(np.asarray(everyday_copy(photo, CopyRecipe("JPEG", quality)), dtype=float) - original).mean()
        for quality in (60, 95)
    )
    assert low > high
    smaller = everyday_copy(photo, CopyRecipe("WEBP", 90, scale=0.6))
    assert smaller.size == (round(photo.width * 0.6), round(photo.height * 0.6))


def test_an_unknown_codec_is_refused() -> None:
    with pytest.raises(ValueError, match="codec 'PNG'"):
        everyday_copy(Image.new("RGB", (8, 8)), CopyRecipe("PNG", 90))


def test_training_recipes_blur_and_shrink_half_the_copies_each() -> None:
    from counting.data.copies import BLUR_RANGE, TRAINING_QUALITY_RANGE, TRAINING_SCALE_RANGE, training_recipe

    recipes = [training_recipe(key) for key in range(400)]
    assert recipes == [training_recipe(key) for key in range(400)]
    blurs = np.array([recipe.blur for recipe in recipes])
    scales = np.array([recipe.scale for recipe in recipes])
    qualities = np.array([recipe.quality for recipe in recipes])
    assert 0.4 < (blurs > 0).mean() < 0.6 and 0.4 < (scales < 1).mean() < 0.6
    assert BLUR_RANGE[0] <= blurs[blurs > 0].min() and blurs.max() <= BLUR_RANGE[1]
    assert TRAINING_SCALE_RANGE[0] <= scales.min() and scales[scales < 1].max() <= TRAINING_SCALE_RANGE[1]
    assert TRAINING_QUALITY_RANGE[0] <= qualities.min() and qualities.max() <= TRAINING_QUALITY_RANGE[1]
    assert {recipe.codec for recipe in recipes} == set(CODECS)
    assert "blurred" in next(recipe for recipe in recipes if recipe.blur).describe()


def test_a_blur_takes_the_fine_detail_away() -> None:
    rng = np.random.default_rng(0)
    noise = Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))

    def detail(picture: Image.Image) -> float:
        return float(np.abs(np.diff(np.asarray(picture, dtype=float), axis=1)).mean())

    sharp, blurred = (everyday_copy(noise, CopyRecipe("WEBP", 95, blur=blur)) for blur in (0.0, 1.0))
    assert detail(blurred) < 0.5 * detail(sharp)


def test_degraded_pixels_keep_the_size_and_follow_the_picture(shared_data) -> None:
    """The heads' training copy: the picture's own size (its density targets hold), the same
    copy every time for the same pixels (the feature cache keeps its maps), visibly the same
    picture, and another recipe for another picture."""
    from counting.data.copies import degraded_pixels

    photo = Image.open(shared_data / "shanghaitech-B-train/images/IMG_10.jpg").convert("RGB").resize((384, 288))
    pixels = np.asarray(photo)
    copy = degraded_pixels(pixels)
    assert copy.shape == pixels.shape and copy.dtype == np.uint8
    np.testing.assert_array_equal(copy, degraded_pixels(pixels.copy()))
    difference = np.abs(copy.astype(float) - pixels)
    assert 0.5 < difference.mean() < 20.0
    others = [degraded_pixels(np.ascontiguousarray(np.roll(pixels, shift, axis=1))) for shift in range(1, 7)]
    changes = {round(float(np.abs(other.astype(float) - np.roll(pixels, shift, axis=1)).mean()), 3)
               for shift, other in enumerate(others, start=1)}  # fmt: skip
    assert len(changes) > 1  # the recipes differ between pictures
