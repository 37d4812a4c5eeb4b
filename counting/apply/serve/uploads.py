"""Pictures sent to ``POST /api/count``: checked in bytes, kind and pixels before decoding.

The body is the image itself (``Content-Type: image/jpeg``, ``image/png``, ...), JSON
``{"image": "<base64>"}``, or a ``multipart/form-data`` form holding one file (what HTML forms and
``curl -F file=@photo.jpg`` send); nothing is stored. Each refusal is an :class:`UploadError` with
the HTTP status the API answers: 413 too large (bytes, or pixels declared in the header, checked
before any pixel is decoded), 415 not an image of a supported kind, 400 malformed (bad JSON,
unknown fields, a form without exactly one non-empty file, a truncated or undecodable image).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import warnings
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageOps
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

# What PIL may open here: the formats cameras and phones produce. Others (PSD, EPS through
# Ghostscript, ...) are refused before their decoders run.
FORMATS = ("JPEG", "PNG", "BMP", "WEBP", "TIFF", "GIF")
IMAGE_TYPES = ("image/jpeg", "image/png", "image/bmp", "image/webp", "image/tiff", "image/gif")
JSON_FIELDS = {"image"}
FORM_TYPE = "multipart/form-data"
# A picture upload is one file part; a form of more parts than this is not one (and each part
# costs a few objects: the cap keeps a 10 MB body of empty parts from becoming a million).
MAX_FORM_PARTS = 16
# python-multipart logs each malformed form as a warning before raising: the client gets the
# problem in its 400 answer, and serve's stderr is no per-request log (its access log is off).
_FORM_LOG = logging.getLogger(f"{__name__}.multipart")
_FORM_LOG.addHandler(logging.NullHandler())
_FORM_LOG.propagate = False


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
    if kind == FORM_TYPE:
        return form_picture(body, content_type)
    if kind not in IMAGE_TYPES and kind != "application/octet-stream":
        shown = kind or "none"
        raise UploadError(
            415, f"Content-Type {shown!r:.60}: send an image ({', '.join(IMAGE_TYPES)}), JSON or a {FORM_TYPE} form"
        )
    return body


@dataclass
class _FormPart:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    data: bytearray = field(default_factory=bytearray)

    @property
    def disposition(self) -> bytes:
        return self.headers.get(b"content-disposition", b"")

    @property
    def name(self) -> str:
        return parse_options_header(self.disposition)[1].get(b"name", b"").decode("utf-8", "replace")

    @property
    def filename(self) -> str | None:
        """The file name the client gave (None: a text field); ``filename*=`` (RFC 5987) counts too."""
        options = parse_options_header(self.disposition)[1]
        if b"filename" in options:
            return options[b"filename"].decode("utf-8", "replace")
        return "" if b"filename*=" in self.disposition.lower() else None


class _FormParts:
    """python-multipart's parser callbacks, keeping each part's headers and bytes in memory: the
    body is already in memory and bounded by max_upload_bytes, so no part is spooled to disk."""

    def __init__(self) -> None:
        self.parts: list[_FormPart] = []
        self.ended = False
        self._header_name = bytearray()
        self._header_value = bytearray()

    def callbacks(self) -> dict:
        return {
            "on_part_begin": self._begin,
            "on_part_data": lambda data, start, end: self.parts[-1].data.extend(data[start:end]),
            "on_header_field": lambda data, start, end: self._header_name.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._header_value.extend(data[start:end]),
            "on_header_end": self._header_end,
            "on_end": self._end,
        }

    def _begin(self) -> None:
        if len(self.parts) == MAX_FORM_PARTS:
            raise UploadError(400, f"the form has more than {MAX_FORM_PARTS} parts: send one picture as one file")
        self.parts.append(_FormPart())

    def _header_end(self) -> None:
        self.parts[-1].headers[bytes(self._header_name).lower()] = bytes(self._header_value)
        self._header_name.clear()
        self._header_value.clear()

    def _end(self) -> None:
        self.ended = True


def form_picture(body: bytes, content_type: str | None) -> bytes:
    """The bytes of the one file in a ``multipart/form-data`` body. A form without a file, with
    two, with an empty one or with text fields is refused (400): a field such as ``camera`` would
    otherwise be ignored in silence (the camera is ``?camera=NAME``)."""
    if not body:
        raise UploadError(400, "the body is empty: send a picture")
    boundary = parse_options_header(content_type)[1].get(b"boundary")
    if not boundary:
        raise UploadError(400, f"Content-Type {FORM_TYPE} without a boundary: let the client write the header")
    reader = _FormParts()
    try:
        parser = MultipartParser(boundary, reader.callbacks())
        parser.logger = _FORM_LOG
        parser.write(body)
        parser.finalize()
    except FormParserError as error:
        raise UploadError(400, f"the {FORM_TYPE} body cannot be read ({str(error).splitlines()[0]:.120})") from None
    if not reader.ended:
        raise UploadError(400, f"the {FORM_TYPE} body ends before its closing boundary: it is truncated")
    files = [part for part in reader.parts if part.filename is not None]
    if not files:
        raise UploadError(400, "the form has no file: send the picture as a file field (curl -F file=@photo.jpg)")
    if len(files) > 1:
        raise UploadError(400, f"the form has {len(files)} files: send one picture per request")
    fields = [part.name for part in reader.parts if part.filename is None]
    if fields:
        raise UploadError(
            400,
            f"form field {fields[0]!r:.40} is not read: send only the picture's file (a camera goes in ?camera=NAME)",
        )
    (file,) = files
    if not file.data:
        raise UploadError(400, f"the file {file.filename!r:.60} in the form is empty: send a picture")
    return bytes(file.data)


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
