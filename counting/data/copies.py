"""Everyday copies of a picture: the recompression and downscaling photos go through.

A photo reaches a counter after a phone, a messenger or a web page has saved it again: JPEG or
WebP at some quality, often smaller. The crowd model's sparse gate read such traces in the
backbone's map statistics as "unlike an everyday photo": the coco-voc20 validation photos saved
again as JPEG at quality 95 (an invisible change) were counted with MAE 1.71 instead of 1.14, two
of them handed from the detector to the density head (a photo of 13 people counted 77). The gate
is therefore fitted on such copies of its train pictures beside the pictures themselves
(:func:`counting.train.crowd.fit_crowd_gate`), so that what the copies change carries no label.

The gate's copies also reach past recompression (:func:`recipe_for`): a quarter of them are
grayscale, a quarter blurred. Fitted on recompressed copies alone, the gate kept the heads' count
of a grayscale copy of a coco-voc20 photo of 12 children on grass (269 people: the heads took the
grass for a crowd), and two photos saved at JPEG 95 went to the heads (docs/density.md,
"Grayscale and blurred copies for the gate").

The density heads train on such copies too, softer ones included (:func:`degraded_pixels`: a
blur, a smaller copy brought back to size, then JPEG or WebP): trained on the pictures alone, a
1-pixel blur took one head's count of ShanghaiTech A photos by 72 people on average.

Pillow does the encoding (its JPEG and WebP codecs, as the tools that save the photos do) and the
blur; the copy is decoded back before it is returned, so it holds the codec's artefacts.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

__all__ = ["CopyRecipe", "degraded_pixels", "everyday_copy", "recipe_for", "training_recipe"]

# The codecs and qualities photos are saved again with (phones, messengers, browsers).
CODECS = ("JPEG", "WEBP")
QUALITY_RANGE = (60, 95)
# Half the copies are also made smaller, by a factor drawn from this range.
SMALLER_SHARE = 0.5
SCALE_RANGE = (0.6, 1.0)

# Of the gate's copies (:func:`recipe_for`), these shares are also grayscale or blurred (by a
# Gaussian drawn from BLUR_RANGE): photos reach a counter in black and white and out of focus.
GRAY_SHARE = 0.25
GATE_BLUR_SHARE = 0.25

# The heads' training copies (:func:`training_recipe`) reach further: softer and smaller, as
# photos taken out of focus, frames of compressed video and thumbnails are. Half are blurred by a
# Gaussian of this many pixels (of the network's input), half made smaller by a factor in
# TRAINING_SCALE_RANGE (then brought back to size), every one saved again at TRAINING_QUALITY_RANGE.
BLUR_SHARE = 0.5
BLUR_RANGE = (0.4, 1.5)
TRAINING_SCALE_RANGE = (0.5, 0.9)
TRAINING_QUALITY_RANGE = (50, 95)


@dataclass(frozen=True)
class CopyRecipe:
    """How one copy is made: made grayscale (``gray``), blurred by a Gaussian of ``blur`` pixels
    (0: not), made ``scale`` of its size (1: its own size), then saved as ``codec`` at ``quality``."""

    codec: str
    quality: int
    scale: float = 1.0
    blur: float = 0.0
    gray: bool = False

    def describe(self) -> str:
        gray = "grayscale, " if self.gray else ""
        blurred = "" if self.blur == 0.0 else f"blurred {self.blur:.2f} px, "
        smaller = "" if self.scale == 1.0 else f", {self.scale:.2f} of its size"
        return f"{gray}{blurred}{self.codec} at quality {self.quality}{smaller}"


def recipe_for(seed: int, index: int, *, wider: bool = True) -> CopyRecipe:
    """The recipe of picture ``index``'s copy for the sparse gate: drawn from ``seed`` and
    ``index`` alone, so a picture gets the same copy in every step that makes it (the gate's fit
    and its refit). Saved again as JPEG or WebP, half of them smaller; with ``wider`` a GRAY_SHARE
    of them also grayscale, another GATE_BLUR_SHARE blurred (without it, the gate's copies until
    2026-11-27: the same recipes, recompressed alone)."""
    rng = np.random.default_rng([seed, index])
    codec = CODECS[int(rng.integers(len(CODECS)))]
    quality = int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))
    scale = float(rng.uniform(*SCALE_RANGE)) if rng.random() < SMALLER_SHARE else 1.0
    if not wider:
        return CopyRecipe(codec, quality, round(scale, 3))
    # Drawn after the recompression, so that part of each recipe is the same with or without ``wider``.
    kind = rng.random()
    gray = kind < GRAY_SHARE
    blur = float(rng.uniform(*BLUR_RANGE)) if GRAY_SHARE <= kind < GRAY_SHARE + GATE_BLUR_SHARE else 0.0
    return CopyRecipe(codec, quality, round(scale, 3), round(blur, 3), gray)


def training_recipe(key: int) -> CopyRecipe:
    """The recipe of a density head's training copy, drawn from ``key`` alone (the picture's
    content: :func:`degraded_pixels`)."""
    rng = np.random.default_rng(key)
    blur = float(rng.uniform(*BLUR_RANGE)) if rng.random() < BLUR_SHARE else 0.0
    scale = float(rng.uniform(*TRAINING_SCALE_RANGE)) if rng.random() < SMALLER_SHARE else 1.0
    codec = CODECS[int(rng.integers(len(CODECS)))]
    quality = int(rng.integers(TRAINING_QUALITY_RANGE[0], TRAINING_QUALITY_RANGE[1] + 1))
    return CopyRecipe(codec, quality, round(scale, 3), round(blur, 3))


def degraded_pixels(pixels: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` RGB uint8 -> its training copy (:func:`training_recipe`) at the same size:
    a smaller copy is brought back by a bilinear resize, so the picture's head positions and
    density targets hold for it. The recipe is drawn from a hash of the pixels, so a picture gets
    the same copy in every run and step (and the feature cache keeps its maps)."""
    array = np.ascontiguousarray(pixels, dtype=np.uint8)
    digest = hashlib.sha256(repr(array.shape).encode())
    digest.update(array.tobytes())
    recipe = training_recipe(int.from_bytes(digest.digest()[:8], "little"))
    original = Image.fromarray(array)
    copy = everyday_copy(original, recipe)
    if copy.size != original.size:
        copy = copy.resize(original.size, Image.Resampling.BILINEAR)
    return np.asarray(copy, dtype=np.uint8)


def everyday_copy(image: Image.Image, recipe: CopyRecipe) -> Image.Image:
    """``image`` made grayscale (``recipe.gray``: Pillow's ITU-R 601 luma, as a grayscale file
    holds it), blurred by ``recipe.blur``, resized by ``recipe.scale``, saved with its codec and
    quality, and decoded again as RGB."""
    if recipe.codec not in CODECS:
        raise ValueError(f"codec {recipe.codec!r}: expected one of {', '.join(CODECS)}")
    picture = image.convert("L" if recipe.gray else "RGB")
    if recipe.blur > 0.0:
        picture = picture.filter(ImageFilter.GaussianBlur(recipe.blur))
    if recipe.scale != 1.0:
        size = (max(1, round(picture.width * recipe.scale)), max(1, round(picture.height * recipe.scale)))
        picture = picture.resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    picture.save(buffer, format=recipe.codec, quality=recipe.quality)
    buffer.seek(0)
    with Image.open(buffer) as saved:
        return saved.convert("RGB")
