"""How a picture becomes a network input: whole-frame resize, optional ROI mask, normalisation.

The whole frame is kept (no centre crop) because a crop would cut people off the count; both
backbones pool globally, so any input size works.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from PIL import Image

from counting.core.errors import ImageError
from counting.data.copies import degraded_pixels
from counting.data.imaging import Sideways, to_rgb
from counting.features.backbones.limits import MAX_ASPECT_RATIO, MAX_INPUT_PIXELS, MAX_INPUT_SIZE, MAX_LONG_SIDE

__all__ = [
    "MAX_ASPECT_RATIO",
    "MIN_SOURCE_SIDE",
    "MAX_INPUT_PIXELS",
    "MAX_INPUT_SIZE",
    "MAX_LONG_SIDE",
    "ImageLike",
    "Normalisation",
    "Preprocessing",
    "grayscale_pixels",
    "prepare_image",
    "to_pil",
]

# A picture whose short side is below this is counted, with a warning: blown up to the input
# size it holds too few pixels for a count to mean much (a 1x1 image is one colour).
MIN_SOURCE_SIDE = 32

# A Sideways picture (counting.data.imaging.load_pixels(..., sideways=True)) is turned upright here.
ImageLike = Image.Image | np.ndarray | Sideways

_REDUCING_GAP = 1.05
RESIZE_METHOD = f"pil-bilinear-reducing-gap-{_REDUCING_GAP}"
# Names the degraded copies (counting.data.copies) in cache keys: a change to their recipe must
# change it, so that no cached map of an older copy is read back.
DEGRADED_COPIES = "blur-smaller-jpeg-webp-v1"


@dataclass(frozen=True)
class Normalisation:
    """Per-channel ``(pixel - mean) / std`` with ``mean`` and ``std`` in 0-255 pixel units."""

    mean: tuple[float, float, float]
    std: tuple[float, float, float]


@dataclass(frozen=True, eq=False)
class Preprocessing:
    """Input size and ROI for turning frames into network inputs.

    ``input_size`` is the short side in pixels after resizing, aspect ratio kept, whole frame
    (``None`` keeps the native resolution). ``roi_mask`` is an ``(H, W)`` boolean array at the
    images' native size (after EXIF orientation); pixels outside it are set to the value that
    normalises to zero.
    """

    input_size: int | None = 224
    roi_mask: np.ndarray | None = None
    # Mirror the frame left to right (after resizing, ROI included): the second view of
    # flip-averaged descriptors.
    flip: bool = False
    # See the frame as its grayscale copy (ITU-R 601 luma, PIL's "L", in all three channels):
    # the grayscale copies a crowd model trains on beside the colour pictures, so that CCTV,
    # infrared and old photos are counted as colour ones are (docs/density.md, "Grayscale").
    grayscale: bool = False
    # See the frame as a degraded copy (counting.data.copies.degraded_pixels: blurred or made
    # smaller, saved again as JPEG or WebP, drawn from the frame's pixels): the copies the crowd
    # model's heads train on, so that a soft or recompressed photo is counted as its original is
    # (docs/density.md, "Soft and recompressed photos"). After the grayscale step, when both are set.
    degraded: bool = False
    _mask_cache: dict[tuple[int, int], np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _roi_sha256: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.input_size is not None:
            if isinstance(self.input_size, bool) or not isinstance(self.input_size, (int, np.integer)):
                raise ValueError(f"input_size must be a positive integer or None, got {self.input_size!r}")
            if self.input_size < 8:
                raise ValueError(f"input_size must be at least 8 pixels, got {self.input_size}")
            if self.input_size > MAX_INPUT_SIZE:
                raise ValueError(f"input_size must be at most {MAX_INPUT_SIZE} pixels, got {self.input_size}")
            object.__setattr__(self, "input_size", int(self.input_size))
        if self.roi_mask is not None:
            mask = np.asarray(self.roi_mask)
            if mask.ndim != 2 or mask.size == 0:
                raise ValueError(f"roi_mask must be a non-empty 2-D array, got shape {mask.shape}")
            mask = mask.astype(bool, copy=True)
            mask.setflags(write=False)
            object.__setattr__(self, "roi_mask", mask)
            digest = hashlib.sha256(repr(mask.shape).encode())
            digest.update(np.packbits(mask).tobytes())
            object.__setattr__(self, "_roi_sha256", digest.hexdigest())

    @property
    def roi_sha256(self) -> str | None:
        """Content hash of the ROI mask (shape included), for cache keys and model files."""
        return self._roi_sha256

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Preprocessing):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (self.input_size, self.roi_sha256, self.flip, self.grayscale, self.degraded)

    def fingerprint(self) -> dict[str, Any]:
        """JSON-ready description of everything that changes the network input."""
        description: dict[str, Any] = {"input_size": self.input_size, "roi_mask_sha256": self.roi_sha256}
        if self.input_size is not None:
            # Names the resampling so that a change to it changes cache keys; absent at native
            # size, where nothing is resampled (and earlier cache entries stay valid).
            description["resize"] = RESIZE_METHOD
        if self.flip:  # absent unflipped: earlier cache entries stay valid
            description["flip"] = "left-right"
        if self.grayscale:  # absent in colour: earlier cache entries stay valid
            description["grayscale"] = "itu-r-601-luma"
        if self.degraded:  # absent otherwise: earlier cache entries stay valid
            description["degraded"] = DEGRADED_COPIES
        return description

    def target_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` after resizing the short side to ``input_size``."""
        if self.input_size is None:
            return width, height
        scale = self.input_size / min(width, height)
        return max(1, round(width * scale)), max(1, round(height * scale))

    def checked_target_size(self, width: int, height: int, source: str = "image", warn: bool = True) -> tuple[int, int]:
        """:meth:`target_size`, or ImageError when the picture is outside the bounds above.

        Checked from the sizes alone, before anything is resized or allocated.
        """
        if width < 1 or height < 1:
            raise ImageError(f"{source}: image has no pixels ({width}x{height})")
        aspect = max(width, height) / min(width, height)
        if aspect > MAX_ASPECT_RATIO:
            raise ImageError(
                f"{source}: image is {width}x{height}, aspect ratio {_ratio(aspect)}:1 is above the "
                f"limit of {MAX_ASPECT_RATIO:.0f}:1"
            )
        new_width, new_height = self.target_size(width, height)
        if max(new_width, new_height) > MAX_LONG_SIDE or new_width * new_height > MAX_INPUT_PIXELS:
            # The widest picture that fits at this input: the limit users meet is an aspect ratio
            # (a 20:1 panorama is within MAX_ASPECT_RATIO but, at a 576-pixel short side, not here).
            short = min(new_width, new_height)
            fits = min(MAX_LONG_SIDE, MAX_INPUT_PIXELS / short) / short
            raise ImageError(
                f"{source}: image is {width}x{height}, {new_width}x{new_height} after resizing is "
                f"above the limit of {MAX_INPUT_PIXELS // 1_000_000}.{MAX_INPUT_PIXELS % 1_000_000 // 100_000} "
                f"megapixels / {MAX_LONG_SIDE} pixels a side, so at this input a picture may be at most "
                f"{np.floor(fits * 10) / 10:g}:1 (crop or split the picture; when training, a smaller --input-size)"
            )
        # Warned only for a picture that will be counted (a refused one gets its one error line),
        # and only when asked: the crowd model's detector prepares each picture a second time.
        if warn and min(width, height) < MIN_SOURCE_SIDE:
            warnings.warn(
                f"{source}: image is only {width}x{height} pixels; its count means little "
                f"(short side below {MIN_SOURCE_SIDE})",
                UserWarning,
                stacklevel=2,
            )
        return new_width, new_height

    def reduces_in_opencv(self, width: int, height: int) -> bool:
        """Whether a ``width`` x ``height`` array is resized by OpenCV's 2x2 box reduction (see
        :func:`_resized_rgb`): the one case where decoding to an OpenCV array pays off."""
        size = self.target_size(width, height)
        return _opencv_reduction(width, height, size)

    def resized_mask(self, size: tuple[int, int]) -> np.ndarray:
        """The ROI mask resized to ``size = (width, height)``, cached because frames repeat sizes."""
        assert self.roi_mask is not None
        with self._lock:
            cached = self._mask_cache.get(size)
        if cached is not None:
            return cached
        if size == (self.roi_mask.shape[1], self.roi_mask.shape[0]):
            resized = self.roi_mask
        else:
            # Bilinear then threshold keeps thin ROI borders where nearest would alias them.
            as_image = Image.fromarray(self.roi_mask.astype(np.uint8) * 255, mode="L")
            resized = np.asarray(as_image.resize(size, Image.BILINEAR)) >= 128
            resized.setflags(write=False)
        with self._lock:
            self._mask_cache[size] = resized
        return resized


def to_pil(image: ImageLike, source: str = "image") -> Image.Image:
    """Accept a PIL image or an ``(H, W)`` / ``(H, W, 3)`` uint8 RGB array (or ``(H, W, 4)`` RGBA,
    composited on white); return RGB PIL."""
    if isinstance(image, Image.Image):
        return to_rgb(image)
    return to_rgb(Image.fromarray(np.ascontiguousarray(_checked_array(image, source))))


def _normalise(pixels: np.ndarray, normalisation: Normalisation, planar: bool = False) -> np.ndarray:
    """``(pixels - mean) * (1 / std)`` in float32, bit for bit, by the cheapest exact route.

    ``pixels`` is ``(H, W, 3)``; ``planar`` returns a C-contiguous ``(3, H, W)`` array.
    """
    mean = np.asarray(normalisation.mean, np.float32)
    scale = 1.0 / np.asarray(normalisation.std, np.float32)
    if planar:
        # Whole planes at a time: the uint8 transpose copy, then two in-place float32 passes
        # broadcast over the leading axis (0.10 ms per 224x299 frame, the lookup below 0.26 ms).
        normalised = np.ascontiguousarray(pixels.transpose(2, 0, 1)).astype(np.float32)
        normalised -= mean[:, None, None]
        normalised *= scale[:, None, None]
        return normalised
    if np.all(mean == mean[0]) and np.all(scale == scale[0]):
        # Channels last, the innermost axis is only 3 long and broadcasting over it is slow: one
        # table of the 256 results when every channel is normalised alike (EfficientNet),
        # 0.22 ms per 224x299 frame against 1.9 ms for the broadcast arithmetic.
        table = (np.arange(256, dtype=np.float32) - mean[0]) * scale[0]
        return np.take(table, pixels)
    # In place: the same float32 operations without temporaries (1.9 -> 0.66 ms per frame).
    normalised = pixels.astype(np.float32)
    normalised -= mean
    normalised *= scale
    return normalised


def prepare_image(
    image: ImageLike,
    prep: Preprocessing,
    normalisation: Normalisation,
    source: str | None = None,
    *,
    channels_last: bool = True,
    bgr: bool = False,
    warn: bool = True,
) -> torch.Tensor:
    """Resize the whole frame, blank the outside of the ROI, normalise -> ``(3, H, W)`` float32.

    ``bgr`` says an array is in OpenCV's BGR order (a video frame, an OpenCV decode): it is
    turned to RGB after the resize, where it costs a quarter of the full-size conversion.
    ``warn`` False: no warning for a tiny picture (one already prepared once, and warned of).
    """
    source = source or getattr(image, "filename", None) or "image"
    if not isinstance(image, (Image.Image, Sideways)):
        image = _checked_array(image, source)
    width, height = image.size if isinstance(image, (Image.Image, Sideways)) else (image.shape[1], image.shape[0])
    mask = None
    if prep.roi_mask is not None and prep.roi_mask.shape != (height, width):
        mask_h, mask_w = prep.roi_mask.shape
        raise ImageError(f"{source}: ROI mask is {mask_w}x{mask_h} (WxH) but the image is {width}x{height}")
    size = prep.checked_target_size(width, height, source, warn=warn)
    pixels = _resized_rgb(image, size, source, bgr)
    if prep.roi_mask is not None:
        mask = prep.resized_mask(size)
    if prep.flip:
        pixels = np.ascontiguousarray(pixels[:, ::-1])
        mask = None if mask is None else np.ascontiguousarray(mask[:, ::-1])
    if prep.grayscale:
        pixels = grayscale_pixels(pixels)
    if prep.degraded:
        pixels = degraded_pixels(pixels)
    # NumPy on purpose: torch's multi-threaded element-wise kernels cost ~50x more than this on
    # a 2-core machine where the decode threads and the forward pass share the cores.
    if not channels_last:
        # Planar (3, H, W) straight from the lookup (onnxruntime takes NCHW): the transpose
        # rides on the normalisation instead of costing a copy per batch in the forward path.
        normalised = _normalise(pixels, normalisation, planar=True)
        if mask is not None:
            normalised *= mask[None]  # exactly zero after normalisation: "no signal" outside the ROI
        return torch.from_numpy(normalised)
    normalised = _normalise(pixels, normalisation)
    if mask is not None:
        # Exactly zero after normalisation: "no signal" for the network outside the ROI.
        normalised *= mask[:, :, None]
    # A (3, H, W) view of the (H, W, 3) pixels: batches are stacked straight into the
    # channels-last layout torch runs in, without a transpose copy per image.
    return torch.from_numpy(normalised).permute(2, 0, 1)


def grayscale_pixels(pixels: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` RGB uint8 -> the same shape holding its luma in every channel, bit for bit
    what ``PIL.Image.convert("L").convert("RGB")`` gives (PIL's fixed-point ITU-R 601 weights),
    so a grayscale copy made here is the picture a grayscale file would be."""
    rgb = pixels.astype(np.uint32)
    luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
    return np.repeat(luma.astype(np.uint8)[..., None], 3, axis=2)


def _checked_array(image: np.ndarray, source: str) -> np.ndarray:
    """An ``(H, W)`` or ``(H, W, 3)`` uint8 array of ``image``; ``(H, W, 1)`` is read as
    ``(H, W)`` and ``(H, W, 4)`` (RGBA, as PIL and a PNG's decode give it) composited on white,
    as an RGBA file is (counting.data.imaging.to_rgb): the same picture counts the same either way."""
    array = np.asarray(image)
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (1, 3, 4)):
        raise ImageError(
            f"{source}: expected an (H, W), (H, W, 3) or (H, W, 4) uint8 RGB(A) array, got {array.dtype} {array.shape}"
        )
    if array.ndim == 3 and array.shape[2] == 4:
        return np.asarray(to_rgb(Image.fromarray(np.ascontiguousarray(array))))  # uint8 x 4: RGBA
    return array[:, :, 0] if array.ndim == 3 and array.shape[2] == 1 else array


def reduction_factors(width: int, height: int, size: tuple[int, int]) -> tuple[int, int]:
    """The integer box-reduction PIL's ``resize(..., reducing_gap=_REDUCING_GAP)`` applies first."""
    return (
        int(width / size[0] / _REDUCING_GAP) or 1,
        int(height / size[1] / _REDUCING_GAP) or 1,
    )


def _resized_rgb(image: ImageLike, size: tuple[int, int], source: str, bgr: bool) -> np.ndarray:
    """``image`` as ``(h, w, 3)`` RGB uint8 at ``size = (w, h)``, resized as :data:`RESIZE_METHOD`.

    PIL's resize with a reducing gap is a box reduction by integer factors followed by the
    antialiased bilinear filter on the reduced picture. Arrays (OpenCV decodes, video frames)
    take one of three routes to that same result, bit for bit (tested):

    * at the size asked for: only the channel order is fixed;
    * the common 2x2 reduction of an even-sized array (640x480 frames at 224): OpenCV's area
      resize computes the same ``(a + b + c + d + 2) >> 2`` as PIL's ``reduce``, several times
      faster and without a full-size PIL copy;
    * anything else: PIL's own reduce and resize, run on an RGBX buffer that PIL maps without
      copying (:func:`_mapped_rgbx`). Handing PIL the RGB array instead costs a full-size
      channel-order copy and PIL's conversion to its 4-byte layout: 170 ms of a 12-megapixel
      phone photo's preparation against 28 ms.
    """
    if isinstance(image, Sideways):
        return _resized_sideways(image, size)
    if not isinstance(image, Image.Image):
        array = image  # already through _checked_array (prepare_image)
        if array.ndim == 3:
            return _resized_array(array, size, bgr)
        picture = to_pil(array, source)
    else:
        picture = to_rgb(image)
    if size != picture.size:
        # PIL's bilinear filter widens its support when shrinking, i.e. it antialiases. The
        # reducing gap first box-averages by an integer factor when shrinking 2x or more: the
        # same picture to about 1 grey level on average, at 2/3 of the cost (decode-bound pipeline).
        picture = picture.resize(size, Image.BILINEAR, reducing_gap=_REDUCING_GAP)
    return np.asarray(picture)


def _resized_sideways(image: Sideways, size: tuple[int, int]) -> np.ndarray:
    """A :class:`Sideways` picture upright at ``size``: box-reduced before it is turned when the
    upright sides divide by the reduction factors (then each box holds the same pixels in both
    pictures, so the reduced pictures are turns of each other), else turned first."""
    width, height = image.size
    factors = reduction_factors(width, height, size)
    if factors != (1, 1) and width % factors[0] == 0 and height % factors[1] == 0:
        stored_factors = factors[::-1] if image.swaps_axes else factors
        small = image.stored.reduce(stored_factors).transpose(image.transpose)
        return np.asarray(_resize_reduced(small, size, (width, height), factors))
    return _resized_rgb(image.upright(), size, "image", bgr=False)


def _opencv_reduction(width: int, height: int, size: tuple[int, int]) -> bool:
    return (
        (width, height) != size
        and reduction_factors(width, height, size) == (2, 2)
        and width % 2 == 0
        and height % 2 == 0
    )


def _resized_array(array: np.ndarray, size: tuple[int, int], bgr: bool) -> np.ndarray:
    """An ``(H, W, 3)`` array resized as PIL would (see :func:`_resized_rgb`), RGB."""
    import cv2  # the video and decode paths load it anyway

    height, width = array.shape[:2]
    if (width, height) == size:
        return cv2.cvtColor(array, cv2.COLOR_BGR2RGB) if bgr else array
    if _opencv_reduction(width, height, size):
        reduced = cv2.resize(array, (width // 2, height // 2), interpolation=cv2.INTER_AREA)
        if bgr:
            reduced = cv2.cvtColor(reduced, cv2.COLOR_BGR2RGB)
        return np.asarray(_resize_reduced(Image.fromarray(reduced), size, (width, height), (2, 2)))
    picture = _mapped_rgbx(array, bgr)
    factors = reduction_factors(width, height, size)
    if factors != (1, 1):
        picture = picture.reduce(factors)
    return np.asarray(_resize_reduced(picture, size, (width, height), factors).convert("RGB"))


def _resize_reduced(
    reduced: Image.Image, size: tuple[int, int], source_size: tuple[int, int], factors: tuple[int, int]
) -> Image.Image:
    """The bilinear step of ``resize(size, BILINEAR, reducing_gap=...)`` on a whole picture of
    ``source_size`` that was box-reduced by ``factors``: PIL resizes the reduced picture over the
    source's extent in reduced pixels (the last partial box counts as part of a pixel)."""
    box = (0.0, 0.0, source_size[0] / factors[0], source_size[1] / factors[1])
    return reduced.resize(size, Image.BILINEAR, box=box)


def _mapped_rgbx(array: np.ndarray, bgr: bool) -> Image.Image:
    """An ``(H, W, 3)`` uint8 array as a PIL "RGBX" picture sharing one new RGBA buffer.

    PIL keeps RGB pixels in 4 bytes; OpenCV writes that layout (channel order fixed on the way)
    in one vectorised pass, and PIL maps an RGBX buffer instead of copying it. The padding byte
    is a separate band, so reduce and resize treat R, G and B exactly as in an RGB picture.
    """
    import cv2

    padded = cv2.cvtColor(array, cv2.COLOR_BGR2RGBA if bgr else cv2.COLOR_RGB2RGBA)
    height, width = array.shape[:2]
    # The mapped picture holds a reference to the buffer (PIL's buffer protocol view).
    return Image.frombuffer("RGBX", (width, height), padded, "raw", "RGBX", 0, 1)


def _ratio(aspect: float) -> str:
    """An aspect ratio with the decimals that tell it from the limit (20.005, not 20), none when whole."""
    return f"{aspect:.3f}".rstrip("0").rstrip(".")
