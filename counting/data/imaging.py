"""Image loading: one RGB picture per file, upright, or a one-line ``ImageError`` naming the file."""

from __future__ import annotations

import errno
import functools
import io
import os
import re
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image, ImageFile, JpegImagePlugin, UnidentifiedImageError

from counting.core.errors import CountingError, ImageError

__all__ = [
    "DECODE_SECONDS",
    "MAX_IMAGE_BYTES",
    "MAX_JPEG_HEADER_BYTES",
    "MAX_SOURCE_PIXELS",
    "Sideways",
    "decode_seconds",
    "image_size",
    "load_image",
    "load_pixels",
    "max_image_bytes",
    "to_rgb",
    "upright",
]

# Largest picture decoded at all (about 300 MB as RGB), checked from the header before decoding.
# PIL's own bomb guard only warns below twice its limit and is a process-wide setting; its
# warning is kept quiet while this module reads a file (_without_pil_bomb_warning).
MAX_SOURCE_PIXELS = 100_000_000

# Largest image file opened at all, checked from its size before any byte is read (environment
# variable COUNTING_MAX_IMAGE_BYTES overrides it). The largest picture decoded, stored without
# compression, is 300 MB (8-bit RGB) to 800 MB (16-bit RGBA); a photo is a few MB. Above this a
# file is far more likely a disk image, a sparse or zero-filled file or a hostile one, some of
# which PIL reads whole (WebP) or byte by byte (a JPEG's marker scan).
MAX_IMAGE_BYTES = 512 << 20
# Wall time one decode may take (COUNTING_DECODE_SECONDS overrides it), checked at every read
# PIL makes from the file: header scans and decoders read as they go, so a file that keeps the
# decoder busy is stopped at the next read. A 100-megapixel picture decodes in 1-3 s.
DECODE_SECONDS = 30.0
# A JPEG's image data must start within this many bytes (its header: EXIF, ICC profile, XMP and
# tables, at most a few MB in practice). PIL scans the header a byte at a time in Python (about
# 8 MB/s) where it holds stray bytes, which a sparse file of zeros with a JPEG's first bytes
# makes a 3 GB scan; the scan is checked here first, at C speed, with these bounds.
MAX_JPEG_HEADER_BYTES = 16 << 20
_MAX_JPEG_STRAY_BYTES = 1 << 20  # bytes between header markers (PIL: about 0.1 s per MB)
_MAX_JPEG_MARKERS = 10_000  # markers before the image data (a photo has about ten)

# PIL's default is to refuse truncated files; we rely on that to report them, so make sure
# nobody in the process has switched it on by accident.
ImageFile.LOAD_TRUNCATED_IMAGES = False

_EXIF_ORIENTATION = 0x0112
# Larger JPEGs (rare: a photo is a few MB) are decoded by PIL without first reading them whole.
_MAX_FAST_JPEG_BYTES = 64 << 20


# EXIF orientations whose turn swaps width and height.
_SWAPS_AXES = (5, 6, 7, 8)
# What ImageOps.exif_transpose does to the pixels for each EXIF orientation.
_EXIF_TRANSPOSES = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


@dataclass(frozen=True)
class Sideways:
    """A decoded RGB picture as the file stores it, with its EXIF orientation (2-8) not applied.

    Phones store most portrait photos sideways with orientation 6 or 8, and PIL's turning of a
    12-megapixel picture upright costs 60 ms, most of its decoding time. The resize that follows
    (:func:`counting.features.backbones.preprocessing.prepare_image`) can box-reduce the stored picture and
    turn the small one instead: the same pixels whenever the sides divide by the reduction
    factors (the boxes then tile both pictures alike), as they do for phone cameras' sizes.
    """

    stored: Image.Image
    orientation: int

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` of the upright picture."""
        width, height = self.stored.size
        return (height, width) if self.swaps_axes else (width, height)

    @property
    def swaps_axes(self) -> bool:
        return self.orientation in _SWAPS_AXES

    @property
    def transpose(self) -> Image.Transpose:
        return _EXIF_TRANSPOSES[self.orientation]

    def upright(self) -> Image.Image:
        return self.stored.transpose(self.transpose)


# PIL warns of a "decompression bomb" above its own limit (89.5 Mpx): a second limit, without the
# file's name, below the one this module applies (MAX_SOURCE_PIXELS). While a file is read here
# that warning is ignored: a picture up to MAX_SOURCE_PIXELS is decoded without a word, a larger
# one is refused with this module's one line. The filter goes in front of the process's filters
# while any thread reads (decoding runs in threads, so a catch_warnings per read would restore
# another thread's filter list) and leaves when the last one is done; PIL's refusal of twice
# its limit (an error, not a warning) stays.
_BOMB_FILTER = ("ignore", None, Image.DecompressionBombWarning, None, 0)
_bomb_lock = threading.Lock()
_bomb_readers = 0


@contextmanager
def _without_pil_bomb_warning() -> Iterator[None]:
    global _bomb_readers
    with _bomb_lock:
        _bomb_readers += 1
        if not warnings.filters or warnings.filters[0] != _BOMB_FILTER:
            warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    try:
        yield
    finally:
        with _bomb_lock:
            _bomb_readers -= 1
            if _bomb_readers == 0 and _BOMB_FILTER in warnings.filters:
                # No registry needs resetting (which warnings' private _filters_mutated() would do,
                # and Python 3.14 renamed): an "ignore" filter records nothing in any module's
                # __warningregistry__, and it matched this one category alone.
                warnings.filters.remove(_BOMB_FILTER)


def load_image(path: str | os.PathLike[str]) -> Image.Image:
    """Decode ``path`` fully into an RGB ``PIL.Image`` with its EXIF orientation applied.

    Grayscale, 16-bit, palette and alpha images become plain 8-bit RGB. Missing, empty,
    truncated or non-image files raise :class:`ImageError` with ``"{path}: {problem}"``.
    """
    picture = _decode(path, sideways=False)
    assert isinstance(picture, Image.Image)
    return picture


def _decode(path: str | os.PathLike[str], sideways: bool) -> Image.Image | Sideways:
    """:func:`load_image`, or with ``sideways`` a :class:`Sideways` picture where the file's
    EXIF orientation turns it."""
    with _without_pil_bomb_warning():
        return _decode_file(Path(path), sideways)


def _decode_file(path: Path, sideways: bool) -> Image.Image | Sideways:
    size = _check_file(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - PIL takes ownership below
    except PermissionError:
        raise ImageError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ImageError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    try:
        with handle, Image.open(_guarded(handle, size, path)) as opened:
            width, height = opened.size  # from the header: nothing decoded yet
            if width * height > MAX_SOURCE_PIXELS:
                raise ImageError(
                    f"{path}: image too large ({width}x{height} pixels; at most "
                    f"{MAX_SOURCE_PIXELS // 1_000_000} megapixels are decoded)"
                )
            # load() inside the with-block so the whole file is decoded (and a truncated
            # file detected) before the handle closes.
            opened.load()
            orientation = opened.getexif().get(_EXIF_ORIENTATION, 1) if sideways else 1
            # RGB conversion is per pixel, so it may come before the turn (CMYK must come before
            # any box reduction).
            rgb = Sideways(to_rgb(opened), orientation) if orientation in _EXIF_TRANSPOSES else to_rgb(upright(opened))
    except ImageError:
        raise
    except _DecodeTimeout:
        raise ImageError(_timeout_message(path)) from None
    except UnidentifiedImageError:
        kind = _unsupported_jpeg_kind(path)
        if kind is not None:
            raise ImageError(f"{path}: cannot decode image ({kind}, which the JPEG decoder does not read)") from None
        raise ImageError(f"{path}: not an image file (unrecognised format)") from None
    except Image.DecompressionBombError as error:
        raise ImageError(_bomb_message(path, error)) from None
    except MemoryError:
        raise ImageError(f"{path}: not enough memory to decode this image") from None
    except (OSError, SyntaxError, ValueError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "truncated" in message.lower():
            message = "image file is truncated"
        kind = _unsupported_jpeg_kind(path)
        if kind is not None:
            message = f"{kind}, which the JPEG decoder does not read"
        raise ImageError(f"{path}: cannot decode image ({message})") from None
    return rgb


def _bomb_message(path: Path, error: Exception) -> str:
    """The line for a picture PIL refuses from its header (above twice its limit, so above
    MAX_SOURCE_PIXELS too), with its size when PIL's message gives it."""
    found = re.search(r"\((\d+) pixels\)", str(error))
    size = f"{int(found.group(1)) / 1e6:,.0f} megapixels; " if found else ""
    return (
        f"{path}: image too large ({size}at most {MAX_SOURCE_PIXELS // 1_000_000} megapixels are decoded; "
        f"PIL refuses it as a decompression bomb)"
    )


def _check_file(path: Path) -> int:
    """The size of ``path`` in bytes; ImageError unless it is a non-empty regular file we may
    read, of at most :func:`max_image_bytes`."""
    try:
        status = path.stat()
    except FileNotFoundError:
        raise ImageError(f"{path}: file not found") from None
    except PermissionError:
        raise ImageError(f"{path}: permission denied") from None
    except (OSError, ValueError) as exc:
        raise ImageError(f"{path}: cannot read file ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(status.st_mode):
        raise ImageError(f"{path}: is a folder, not an image file")
    if not stat.S_ISREG(status.st_mode):
        # A device such as /dev/zero never ends and a FIFO blocks until someone writes to it.
        raise ImageError(f"{path}: not a regular file (a device, pipe or socket)")
    if status.st_size == 0:
        raise ImageError(f"{path}: file is empty (0 bytes)")
    limit = max_image_bytes()
    if status.st_size > limit:
        raise ImageError(
            f"{path}: file too large for an image ({_megabytes(status.st_size)}; at most "
            f"{_megabytes(limit)} are read, COUNTING_MAX_IMAGE_BYTES raises the limit)"
        )
    return status.st_size


def _megabytes(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MB" if size >= 10 << 20 else f"{size / (1 << 20):.1f} MB"


def max_image_bytes() -> int:
    """:data:`MAX_IMAGE_BYTES`, or the environment's ``COUNTING_MAX_IMAGE_BYTES``."""
    return int(_environment_number("COUNTING_MAX_IMAGE_BYTES", MAX_IMAGE_BYTES, integer=True))


def decode_seconds() -> float:
    """:data:`DECODE_SECONDS`, or the environment's ``COUNTING_DECODE_SECONDS``."""
    return _environment_number("COUNTING_DECODE_SECONDS", DECODE_SECONDS, integer=False)


def _environment_number(name: str, default: float, integer: bool) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = -1
    if not value > 0 or value == float("inf"):
        kind = "a whole number of bytes" if integer else "a number of seconds"
        # Not an ImageError: every image would be skipped with it. The run stops on it instead.
        raise CountingError(f"{name}={text!r}: expected {kind} above zero")
    return value


class _DecodeTimeout(Exception):  # noqa: N818 - internal, turned into an ImageError
    """A decode ran past :func:`decode_seconds` (raised from a read; PIL lets it through)."""


def _timeout_message(path: Path) -> str:
    return (
        f"{path}: cannot decode image (still decoding after {decode_seconds():g} s: a damaged or "
        f"hostile file; COUNTING_DECODE_SECONDS raises the limit)"
    )


class _TimedReader:
    """A binary file that raises :class:`_DecodeTimeout` on any read past its deadline.

    Handed to PIL instead of the file: header scans and decoders read as they go, so no decode
    outlives the deadline by more than one read's worth of work. Everything else is the file's.
    """

    def __init__(self, handle: IO[bytes], seconds: float) -> None:
        self._handle = handle
        self._deadline = time.monotonic() + seconds

    def _check(self) -> None:
        if time.monotonic() > self._deadline:
            raise _DecodeTimeout

    def read(self, size: int | None = -1) -> bytes:
        self._check()
        return self._handle.read(size)

    def read1(self, size: int = -1) -> bytes:
        self._check()
        return self._handle.read1(size)  # type: ignore[attr-defined]

    def readinto(self, buffer: bytearray | memoryview) -> int | None:
        self._check()
        return self._handle.readinto(buffer)  # type: ignore[attr-defined]

    def readline(self, size: int | None = -1) -> bytes:
        self._check()
        return self._handle.readline(size)

    def __getattr__(self, name: str) -> object:
        return getattr(self._handle, name)


def _guarded(handle: IO[bytes], size: int, path: Path) -> _TimedReader:
    """``handle`` (at its start) for PIL: a JPEG's header checked (:func:`_jpeg_header_problem`),
    every read under :func:`decode_seconds`."""
    if handle.read(3) == b"\xff\xd8\xff":
        problem = _jpeg_header_problem(handle, size)
        if problem is not None:
            raise ImageError(f"{path}: cannot decode image (JPEG {problem})")
    handle.seek(0)
    return _TimedReader(handle, decode_seconds())


def _jpeg_header_problem(handle: IO[bytes], size: int) -> str | None:
    """Why PIL's scan of this JPEG's header (from SOI to the first SOS) would not end promptly,
    or None when it ends (at the image data, or at once on an error PIL reports itself).

    Walks the markers as ``JpegImagePlugin.JpegImageFile._open`` does, seeking over segments
    and skipping stray bytes with ``bytes.find``: PIL reads the stray bytes one at a time, so a
    sparse 3 GB file holding a JPEG's first bytes kept it busy for many minutes. Also refuses a
    JPEG whose image data is zeros to the end of the file: a zero-filled or sparse file (PIL
    decodes it to a flat grey picture without a word). Reads a few small pieces of a
    well-formed file.
    """
    position, markers, stray = 2, 0, 0  # position: a 0xFF of PIL's scan (its first is after SOI)
    while position < size:
        if position > MAX_JPEG_HEADER_BYTES:
            return f"header runs past the first {_megabytes(MAX_JPEG_HEADER_BYTES)} without image data"
        handle.seek(position)
        head = handle.read(4)
        if not head:
            return None
        if head[0] != 0xFF:  # PIL skips stray bytes up to the next 0xFF
            found = _next_ff(handle, position, _MAX_JPEG_STRAY_BYTES - stray + 1)
            if found is None:
                if position + _MAX_JPEG_STRAY_BYTES - stray >= size:
                    return None  # the file ends first: PIL finds no marker and says so
                return _stray_problem(handle, position)
            stray += found - position
            position = found
            if stray > _MAX_JPEG_STRAY_BYTES:
                return _stray_problem(handle, position)
            continue
        if len(head) < 2:
            return None
        marker = 0xFF00 | head[1]
        if marker in (0xFFFF, 0xFF00):  # a fill byte; a stuffed zero PIL steps over
            step = 1 if marker == 0xFFFF else 2
            stray += step
            position += step
            if stray > _MAX_JPEG_STRAY_BYTES:
                return _stray_problem(handle, position)
            continue
        if marker not in JpegImagePlugin.MARKER:
            return None  # PIL stops here: "no marker found"
        markers += 1
        if markers > _MAX_JPEG_MARKERS:
            return f"header holds more than {_MAX_JPEG_MARKERS:,} markers before its image data"
        if JpegImagePlugin.MARKER[marker][2] is None:  # a marker without a segment
            position += 2
            continue
        if len(head) < 4:
            return None
        position += 2 + max(int.from_bytes(head[2:4], "big"), 2)
        if marker == 0xFFDA:  # start of scan: PIL's header scan ends here
            return _zero_data_problem(handle, position, size)
    return None


def _next_ff(handle: IO[bytes], position: int, budget: int) -> int | None:
    """Offset of the next 0xFF byte from ``position`` within ``budget`` bytes, or None."""
    handle.seek(position)
    while budget > 0:
        block = handle.read(min(budget, 1 << 16))
        if not block:
            return None
        found = block.find(b"\xff")
        if found >= 0:
            return position + found
        position += len(block)
        budget -= len(block)
    return None


def _stray_problem(handle: IO[bytes], position: int) -> str:
    handle.seek(position)
    zeros = not handle.read(1 << 16).strip(b"\0")
    what = "zero bytes: a zero-filled or sparse file" if zeros else "bytes that are no JPEG markers"
    return f"header holds more than {_megabytes(_MAX_JPEG_STRAY_BYTES)} of {what}"


_ZEROS = bytes(1 << 20)


def _zero_data_problem(handle: IO[bytes], start: int, size: int) -> str | None:
    """The zero-filled file's problem when every byte from ``start`` (the image data) to the end
    is zero, else None. A flat picture with optimised Huffman tables may be coded as zero bytes,
    but its end-of-image marker follows them; holes of a sparse file are skipped, not read."""
    position, block_size = start, 1 << 16
    while position < size:
        position = _next_data(handle, position)
        handle.seek(position)
        block = handle.read(block_size)
        if not block:
            break
        if block != _ZEROS[: len(block)]:  # memcmp: gigabytes a second
            return None
        position += len(block)
        block_size = len(_ZEROS)
    return "image data is zero bytes to the end of the file: a zero-filled or sparse file"


def _next_data(handle: IO[bytes], position: int) -> int:
    """The first offset at or after ``position`` that is not in a hole of a sparse file (the
    file's end when only a hole follows); ``position`` where holes cannot be told."""
    try:
        return os.lseek(handle.fileno(), position, os.SEEK_DATA)
    except (AttributeError, io.UnsupportedOperation):  # bytes in memory; a system without holes
        return position
    except OSError as error:  # ENXIO: nothing but a hole up to the end
        return os.fstat(handle.fileno()).st_size if error.errno == errno.ENXIO else position


def load_pixels(
    path: str | os.PathLike[str], array_if: Callable[[int, int], bool] | None = None, *, sideways: bool = False
) -> tuple[Image.Image | np.ndarray | Sideways, bool]:
    """Decode ``path`` for the network: ``(pixels, bgr)``.

    Plain JPEGs (colour or grey, complete, any EXIF orientation) come back as OpenCV's BGR
    uint8 array, ``bgr=True``, turned upright: OpenCV's libjpeg-turbo gives the same pixels
    as PIL's (tested on every shared photo), and with the array the resize that follows skips
    a full-size PIL copy (:func:`counting.features.backbones.preprocessing.prepare_image` turns it to
    RGB after the resize). Anything else is :func:`load_image`'s RGB picture, ``bgr=False``,
    with its errors.

    ``array_if(width, height)``, given the upright size from the header, says whether the
    caller wants the array; when it says no, PIL decodes the JPEG, straight into the layout
    PIL's own resize works on. That is faster except before OpenCV's 2x2 box reduction
    (:meth:`counting.features.backbones.Preprocessing.reduces_in_opencv`): 67 against 110-130 ms CPU
    for a 12-megapixel photo, 8.4 against 14-17 ms for a 1024x768 one kept at native size.
    With ``sideways``, a picture PIL decodes whose EXIF orientation turns it comes back as
    :class:`Sideways`, for ``prepare_image`` to turn after reducing it.
    """
    path = Path(path)
    size = _check_file(path)
    try:
        with open(path, "rb") as handle:
            # Only a JPEG of ordinary size is read whole: anything else (a huge file of another
            # kind named .jpg) goes to PIL, which reads no more than its header to refuse it.
            if handle.read(3) != b"\xff\xd8\xff" or size > _MAX_FAST_JPEG_BYTES:
                return _decode(path, sideways), False
            # The header before the whole file: a sparse one is refused from a few reads.
            problem = _jpeg_header_problem(handle, size)
            if problem is not None:
                raise ImageError(f"{path}: cannot decode image (JPEG {problem})")
            handle.seek(0)
            data = handle.read(_MAX_FAST_JPEG_BYTES + 1)
    except OSError:
        return _decode(path, sideways), False  # names the problem
    if len(data) > _MAX_FAST_JPEG_BYTES:  # grew since it was measured
        return _decode(path, sideways), False
    # A JPEG that does not end with its end-of-image marker may be truncated: OpenCV would fill
    # the rest with grey where PIL reports it, so those take PIL's path.
    if data.endswith(b"\xff\xd9"):
        array = _decode_plain_jpeg(data, array_if)
        if array is not None:
            return array, True
    return _decode(path, sideways), False


def _decode_plain_jpeg(data: bytes, array_if: Callable[[int, int], bool] | None = None) -> np.ndarray | None:
    try:
        with _without_pil_bomb_warning(), Image.open(io.BytesIO(data)) as header:  # the header only: nothing decoded
            width, height = header.size
            plain = header.format == "JPEG" and header.mode in ("RGB", "L") and width * height <= MAX_SOURCE_PIXELS
            orientation = header.getexif().get(_EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - anything odd takes PIL's path, which names the problem
        return None
    if not plain or orientation not in range(1, 9):
        return None
    upright = (height, width) if orientation in _SWAPS_AXES else (width, height)
    if (array_if is not None and not array_if(*upright)) or not _clean_structure(data):
        return None
    import cv2  # the OpenCV decoder is only needed here and for video

    array = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if array is None or array.shape[:2] != (height, width):
        return None
    return _opencv_uprights()[orientation](array)


@functools.cache
def _opencv_uprights() -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """For each EXIF orientation, OpenCV's copy of what ``ImageOps.exif_transpose`` does to the
    pixels (tested equal for all eight): phones write orientations 6 and 8 on most portrait
    photos, which can then take the OpenCV route too (a 90-degree turn of a 12-megapixel array
    costs OpenCV 20 ms, PIL 60 ms)."""
    import cv2

    return {
        1: lambda array: array,
        2: lambda array: cv2.flip(array, 1),
        3: lambda array: cv2.rotate(array, cv2.ROTATE_180),
        4: lambda array: cv2.flip(array, 0),
        5: cv2.transpose,
        6: lambda array: cv2.rotate(array, cv2.ROTATE_90_CLOCKWISE),
        7: lambda array: cv2.flip(cv2.transpose(array), -1),
        8: lambda array: cv2.rotate(array, cv2.ROTATE_90_COUNTERCLOCKWISE),
    }


# Markers a plain JPEG may hold before its image data (SOI, APPn, COM, DQT, DHT, DRI) and the
# frames both decoders read the same way: baseline, extended and progressive Huffman-coded.
# Arithmetic coding (SOF9-11) is refused by PIL's decoder and read by OpenCV's; it goes to PIL.
_SEGMENT_MARKERS = frozenset([0xDB, 0xC4, 0xDD, 0xFE, *range(0xE0, 0xF0)])
_FRAME_MARKERS = frozenset([0xC0, 0xC1, 0xC2])
_SOS, _EOI = 0xDA, 0xD9
# The first marker after entropy-coded data: 0xFF not followed by a stuffed zero, a restart
# marker (D0-D7) or another fill 0xFF.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")


def _clean_structure(data: bytes) -> bool:
    """True when ``data`` is a well-formed Huffman-coded JPEG whose last scan runs to the final
    end-of-image marker, with nothing odd between its markers.

    OpenCV keeps the pixels when libjpeg fails after the last scan line (a bogus marker in the
    bytes after the image data, e.g. a corrupted middle ending with a copied FFD9), where PIL
    reports the file as broken; damage inside the image data alone gives both decoders the same
    pixels. A sequential image must have one scan: the markers between scans are only read
    after OpenCV has kept the pixels. The regular expression keeps the walk at C speed.
    """
    if not data.startswith(b"\xff\xd8"):
        return False
    position, end, frame, scans = 2, len(data) - 2, None, 0
    while position < end:
        if data[position] != 0xFF:
            return False
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte before a marker
            position += 1
            continue
        if marker not in _SEGMENT_MARKERS and marker not in _FRAME_MARKERS and marker != _SOS:
            return False
        if position + 4 > end:
            return False
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if length < 2:
            return False
        position += 2 + length
        if marker in _FRAME_MARKERS:
            if frame is not None:
                return False
            frame = marker
        elif marker == _SOS:
            if frame is None:
                return False
            scans += 1
            found = _NEXT_MARKER.search(data, position)
            if found is None:
                return False
            position = found.start()
    return position == end and frame is not None and scans >= 1 and (frame == 0xC2 or scans == 1)


def _unsupported_jpeg_kind(path: Path) -> str | None:
    """ "12-bit JPEG", "arithmetic-coded JPEG" or "lossless JPEG" when the frame header of the
    JPEG at ``path`` says so (PIL reports those as unrecognised or as a broken stream)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)
    except OSError:
        return None
    if not head.startswith(b"\xff\xd8"):
        return None
    position = 2
    while position + 9 < len(head) and head[position] == 0xFF:
        marker = head[position + 1]
        if marker == 0xFF:
            position += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header (SOFn)
            if marker in (0xC3, 0xC7, 0xCB, 0xCF):
                return "lossless JPEG"
            if marker >= 0xC9:
                return "arithmetic-coded JPEG"
            precision = head[position + 4]
            return f"{precision}-bit JPEG" if precision != 8 else None
        position += 2 + int.from_bytes(head[position + 2 : position + 4], "big")
    return None


def upright(image: Image.Image) -> Image.Image:
    """Apply the EXIF orientation (a picture opened by PIL is stored as the camera held it, and
    shown turned by every viewer). Not ``ImageOps.exif_transpose``: it also rewrites the EXIF
    block, which fails with raw exceptions on mistyped tags (broken maker notes), and it copies
    the picture even when upright, which costs more than the decode."""
    orientation = image.getexif().get(_EXIF_ORIENTATION, 1)
    if orientation not in _EXIF_TRANSPOSES:
        return image
    upright = image.transpose(_EXIF_TRANSPOSES[orientation])
    # The turn is applied: drop the metadata that asks for it, so that nothing turns it twice.
    for key in ("exif", "xmp", "XML:com.adobe.xmp"):
        upright.info.pop(key, None)
    return upright


def to_rgb(image: Image.Image) -> Image.Image:
    """Return ``image`` as 8-bit RGB, rescaling 16/32-bit grayscale instead of clipping it."""
    if image.mode == "RGB":
        return image
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        # PIL's convert("L") clips high-bit-depth values at 255; scale by the mode's range.
        values = np.asarray(image, dtype=np.float64)
        peak = 65535.0 if image.mode.startswith("I;16") else max(float(values.max()), 1.0)
        gray = np.clip(values * (255.0 / peak), 0, 255).astype(np.uint8)
        return Image.fromarray(gray, mode="L").convert("RGB")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        # Transparent pixels go black-on-nothing otherwise; composite on white like viewers do.
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def image_size(path: str | os.PathLike[str]) -> tuple[int, int]:
    """``(H, W)`` of the upright picture (EXIF orientation applied, as :func:`load_image` does)
    from the file header, without decoding the pixels.

    The file passes the same checks as a decode (:func:`_check_file`, a JPEG's header walk, the
    time bound): reading the header of a hostile file is no cheaper for PIL than decoding it.
    """
    path = Path(path)
    size = _check_file(path)  # a FIFO would block the open; a device never ends
    try:
        with (
            _without_pil_bomb_warning(),
            open(path, "rb") as handle,
            Image.open(_guarded(handle, size, path)) as image,
        ):
            width, height = image.size
            if image.getexif().get(_EXIF_ORIENTATION, 1) in _SWAPS_AXES:
                width, height = height, width
    except ImageError:
        raise
    except _DecodeTimeout:
        raise ImageError(_timeout_message(path)) from None
    except Image.DecompressionBombError as error:  # not an OSError: it escaped the header read (a crash)
        raise ImageError(_bomb_message(path, error)) from None
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise ImageError(f"{path}: cannot read the image header ({exc})") from None
    return height, width
