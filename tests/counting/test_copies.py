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
