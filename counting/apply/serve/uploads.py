"""Pictures sent to ``POST /api/count``: checked in bytes, kind and pixels before decoding.

The body is the image itself (``Content-Type: image/jpeg``, ``image/png``, ...) or JSON
``{"image": "<base64>"}``; nothing is stored. Each refusal is an :class:`UploadError` with the
HTTP status the API answers: 413 too large (bytes, or pixels declared in the header, checked
before any pixel is decoded), 415 not an image of a supported kind, 400 malformed (bad JSON,
unknown fields, a truncated or undecodable image).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import warnings

import numpy as np
from PIL import Image, ImageOps

# What PIL may open here: the formats cameras and phones produce. Others (PSD, EPS through
# Ghostscript, ...) are refused before their decoders run.
FORMATS = ("JPEG", "PNG", "BMP", "WEBP", "TIFF", "GIF")
IMAGE_TYPES = ("image/jpeg", "image/png", "image/bmp", "image/webp", "image/tiff", "image/gif")
JSON_FIELDS = {"image"}


class UploadError(Exception):
    """A refused upload: ``status`` (400, 413 or 415) and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def image_bytes(body: bytes, content_type: str | None, max_bytes: int) -> bytes:
    """The picture's bytes from a request body (raw image, or JSON with base64)."""
    kind = media_type(content_type)
    if kind == "application/json":
        try:
            document = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise UploadError(400, f"the body is not valid JSON ({error})") from None
        if not isinstance(document, dict):
            raise UploadError(400, 'expected a JSON object {"image": "<base64>"}')
        unknown = sorted(set(document) - JSON_FIELDS)
        if unknown:
            raise UploadError(400, f"unknown field {unknown[0]!r:.40}: only 'image' (base64 picture) is read")
        encoded = document.get("image")
        if not isinstance(encoded, str) or not encoded:
            raise UploadError(400, "'image' must be the picture as a base64 string")
        if len(encoded) * 3 // 4 > max_bytes:
            raise UploadError(413, f"the picture is larger than the {max_bytes} bytes accepted")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise UploadError(400, "'image' is not valid base64") from None
    if kind not in IMAGE_TYPES and kind != "application/octet-stream":
        shown = kind or "none"
        raise UploadError(415, f"Content-Type {shown!r:.60}: send an image ({', '.join(IMAGE_TYPES)}) or JSON")
    return body


def decode_upload(data: bytes, max_pixels: int) -> np.ndarray:
    """An RGB ``(H, W, 3)`` uint8 array of an uploaded picture, upright (EXIF)."""
    if not data:
        raise UploadError(400, "the body is empty: send a picture")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise UploadError(413, f"the picture declares too many pixels ({str(error).splitlines()[0]})") from None
    except Image.UnidentifiedImageError:
        raise UploadError(415, f"not a picture of a supported kind ({', '.join(FORMATS)})") from None
    except OSError as error:
        raise UploadError(400, f"cannot read the picture ({error})") from None
    width, height = image.size
    if width * height > max_pixels:
        raise UploadError(413, f"{width}x{height} pixels is more than the {max_pixels} accepted")
    if width < 1 or height < 1:
        raise UploadError(400, f"a {width}x{height} picture has no pixels")
    try:
        image.load()
        upright = ImageOps.exif_transpose(image)
        return np.asarray(upright.convert("RGB"))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        raise UploadError(400, f"the picture is truncated or damaged ({str(error).splitlines()[0]})") from None
