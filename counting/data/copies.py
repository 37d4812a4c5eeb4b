"""Everyday copies of a picture: the recompression and downscaling photos go through.

A photo reaches a counter after a phone, a messenger or a web page has saved it again: JPEG or
WebP at some quality, often smaller. The crowd model's sparse gate read such traces in the
backbone's map statistics as "unlike an everyday photo": the coco-voc20 validation photos saved
again as JPEG at quality 95 (an invisible change) were counted with MAE 1.71 instead of 1.14, two
of them handed from the detector to the density head (a photo of 13 people counted 77). The gate
is therefore fitted on such copies of its train pictures beside the pictures themselves
(:func:`counting.train.crowd.fit_crowd_gate`), so that what the copies change carries no label.

Pillow does the encoding (its JPEG and WebP codecs, as the tools that save the photos do); the
copy is decoded back before it is returned, so it holds the codec's artefacts.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image

__all__ = ["CopyRecipe", "everyday_copy", "recipe_for"]

# The codecs and qualities photos are saved again with (phones, messengers, browsers).
CODECS = ("JPEG", "WEBP")
QUALITY_RANGE = (60, 95)
# Half the copies are also made smaller, by a factor drawn from this range.
SMALLER_SHARE = 0.5
SCALE_RANGE = (0.6, 1.0)


@dataclass(frozen=True)
class CopyRecipe:
    """How one copy is made: ``scale`` (1: the picture's own size), then ``codec`` at ``quality``."""

    codec: str
    quality: int
    scale: float = 1.0

    def describe(self) -> str:
        smaller = "" if self.scale == 1.0 else f", {self.scale:.2f} of its size"
        return f"{self.codec} at quality {self.quality}{smaller}"


def recipe_for(seed: int, index: int) -> CopyRecipe:
    """The recipe of picture ``index``'s copy: drawn from ``seed`` and ``index`` alone, so a
    picture gets the same copy in every step that makes it (the gate's fit and its refit)."""
    rng = np.random.default_rng([seed, index])
    codec = CODECS[int(rng.integers(len(CODECS)))]
    quality = int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))
    scale = float(rng.uniform(*SCALE_RANGE)) if rng.random() < SMALLER_SHARE else 1.0
    return CopyRecipe(codec, quality, round(scale, 3))


def everyday_copy(image: Image.Image, recipe: CopyRecipe) -> Image.Image:
    """``image`` (RGB) resized by ``recipe.scale``, saved with its codec and quality, and decoded
    again."""
    if recipe.codec not in CODECS:
        raise ValueError(f"codec {recipe.codec!r}: expected one of {', '.join(CODECS)}")
    picture = image.convert("RGB")
    if recipe.scale != 1.0:
        size = (max(1, round(picture.width * recipe.scale)), max(1, round(picture.height * recipe.scale)))
        picture = picture.resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    picture.save(buffer, format=recipe.codec, quality=recipe.quality)
    buffer.seek(0)
    with Image.open(buffer) as saved:
        return saved.convert("RGB")
