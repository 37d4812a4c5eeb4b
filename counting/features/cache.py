"""On-disk feature cache: one ``.npy`` file per (settings, image content) pair.

Layout::

    <cache dir>/content-hashes.json                 (path, size, mtime) -> image sha256 memo
    <cache dir>/<settings key>/settings.json        what the key stands for, readable
    <cache dir>/<settings key>/<image sha256>-<checksum>.npy

The settings key hashes the backbone name, its weights' sha256, the preprocessing (input size,
ROI mask hash), the grid and the output kind; the file name carries the image's content hash
and a checksum of the stored array, so a damaged entry is detected on read and recomputed.
Entries are written to a temporary file and moved into place with ``os.replace``, so a crash
never leaves a half-written entry under a valid name, and every finished image stays cached
when a run is interrupted.

A cache folder that cannot be used (a file, read-only, on a full disk) is never fatal: the
cache warns once and turns itself off, and the command carries on computing every feature.

Staleness (why inode + ctime): the content-hash memo is keyed by path and trusted while the
file's (size, mtime, inode, ctime) are unchanged. mtime alone can be restored (``touch -d``,
``cp -p``, tar, rsync), so an image replaced by another of the same size would return the old
features. ctime is set by the kernel on every write, rename or metadata change and cannot be
set back from user space, and a replaced file usually has a new inode too, so the pair catches
every replacement at the cost of the one ``stat`` the memo already needs. Hashing the content
on every run would be exact too, but would read every image each time, which is what the memo
exists to avoid; the price of ctime is only an occasional needless re-hash (after ``chmod`` or
a backup restore), never a stale answer.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agp.persistence import NPY_READ_ERRORS
from counting.core.files import atomic_write_bytes, is_regular_file

__all__ = ["FeatureCache", "default_cache_dir", "settings_key"]

_FORMAT_VERSION = 1
_MEMO_FILE = "content-hashes.json"
_SETTINGS_FILE = "settings.json"
_STALE_TEMPORARY_SECONDS = 3600


def default_cache_dir() -> Path:
    """``$COUNTING_CACHE_DIR``, else ``~/.cache/counting/features``."""
    configured = os.environ.get("COUNTING_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "counting" / "features"


def default_export_dir() -> Path:
    """Folder of the exported ONNX networks (backbones and the detector): ``$COUNTING_ONNX_DIR``,
    else ``onnx/`` in ``$COUNTING_CACHE_DIR``, else ``~/.cache/counting/onnx``. Here rather than in
    ``backbones/onnx_export.py``, which imports torch, so that the detector's runner reads it too."""
    configured = os.environ.get("COUNTING_ONNX_DIR")
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("COUNTING_CACHE_DIR")
    if cache:
        return Path(cache).expanduser() / "onnx"
    return Path.home() / ".cache" / "counting" / "onnx"


def settings_key(settings: Mapping[str, Any]) -> str:
    """Stable short hash of JSON-ready extraction settings."""
    payload = json.dumps({"format": _FORMAT_VERSION, **settings}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def array_checksum(array: np.ndarray) -> str:
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


class FeatureCache:
    """Feature store keyed by extraction settings and image content (see module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.on_warning = on_warning if on_warning is not None else _warn_on_stderr
        self.disabled_reason: str | None = None
        self._checked = False
        self._memo: dict[str, list[Any]] | None = None
        self._memo_dirty = False
        self._lock = threading.Lock()
        self._indexes: dict[str, dict[str, str]] = {}
        self._headers: dict[tuple[int, ...], bytes] = {}

    def __repr__(self) -> str:
        return f"FeatureCache({str(self.directory)!r})"

    # -- usability ------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """False once the folder proved unusable (see :meth:`disable`)."""
        if not self._checked:
            self._checked = True
            self._check_directory()
        return self.disabled_reason is None

    def disable(self, reason: str) -> None:
        """Stop reading and writing the cache, with one warning (the first reason wins)."""
        with self._lock:
            if self.disabled_reason is not None:
                return
            self.disabled_reason = reason
        self.on_warning(f"{self.directory}: feature cache not used ({reason}); carrying on without it")

    def _check_directory(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            self.disable("it is a file, not a folder")
            return
        except OSError as error:
            self.disable(_reason(error))
            return
        if not self.directory.is_dir():
            self.disable("it is a file, not a folder")
        elif not os.access(self.directory, os.W_OK | os.X_OK):
            self.disable("the folder is not writable")

    def _failed(self, error: OSError) -> None:
        self.disable(_reason(error))

    # -- image content hashes ---------------------------------------------------------------
    def content_hash(self, path: str | os.PathLike[str]) -> str | None:
        """sha256 of the file's bytes; ``None`` if it cannot be read (reported by the decoder).

        Re-hashing every image would cost more than the cache saves on big datasets, so the
        hash is remembered per (absolute path, size, mtime) in ``content-hashes.json``.
        """
        if not self.enabled:
            return None
        try:
            # abspath, not resolve(): symlink resolution costs more than the rest of a cache hit.
            resolved = os.path.abspath(path)
            stat = os.stat(resolved)
        except (OSError, ValueError):
            return None
        if not is_regular_file(resolved):
            return None  # /dev/zero or a FIFO would never finish hashing; the decoder reports it
        if stat.st_size > _image_byte_limit():
            return None  # the decoder refuses it by its size at once; hashing 100 GB took 100 s
        memo = self._load_memo()
        # Inode and ctime as well as size and mtime: see "Staleness" in the module docstring.
        signature = [stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns]
        with self._lock:
            known = memo.get(resolved)
        if isinstance(known, list) and len(known) == len(signature) + 1 and known[:-1] == signature:
            return str(known[-1])
        try:
            digest = hashlib.sha256()
            with open(resolved, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError:
            return None
        value = digest.hexdigest()
        with self._lock:
            memo[resolved] = [*signature, value]
            self._memo_dirty = True
        return value

    def flush(self) -> None:
        """Write the content-hash memo (atomically) if it changed."""
        if not self.enabled:
            return
        with self._lock:
            if not self._memo_dirty or self._memo is None:
                return
            # Merge with what another process may have written meanwhile.
            merged = {**self._read_memo_file(), **self._memo}
            self._memo_dirty = False
        try:
            atomic_write_bytes(self.directory / _MEMO_FILE, json.dumps(merged).encode("utf-8", "surrogateescape"))
        except OSError as error:
            self._failed(error)

    # -- entries ----------------------------------------------------------------------------
    def folder(self, key: str) -> Path:
        return self.directory / key

    def describe(self, key: str, settings: Mapping[str, Any]) -> None:
        """Record what a settings key stands for, next to its entries (for people, not lookups)."""
        if not self.enabled:
            return
        target = self.folder(key) / _SETTINGS_FILE
        if not target.exists():
            try:
                atomic_write_bytes(target, json.dumps(dict(settings), indent=2, sort_keys=True).encode())
            except OSError as error:
                self._failed(error)

    def get_many(self, key: str, hashes: Iterable[str], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Stored arrays for the given content hashes; missing or damaged entries are left out.

        Damaged entries (unreadable, wrong shape, checksum mismatch) are deleted so the next
        write replaces them.
        """
        if not self.enabled:
            return {}
        index = self._index(key)
        folder = str(self.folder(key))
        found: dict[str, np.ndarray] = {}
        for content_hash in hashes:
            name = index.get(content_hash)
            if name is None or content_hash in found:
                continue
            array = self._read_entry(os.path.join(folder, name), shape)
            if array is None:
                with self._lock:
                    index.pop(content_hash, None)
                continue
            found[content_hash] = array
        return found

    def get(self, key: str, content_hash: str, shape: tuple[int, ...]) -> np.ndarray | None:
        return self.get_many(key, [content_hash], shape).get(content_hash)

    def put(self, key: str, content_hash: str, array: np.ndarray) -> None:
        """Store one image's features atomically."""
        if not self.enabled:
            return
        array = np.ascontiguousarray(array, dtype=np.float32)
        folder = self.folder(key)
        name = f"{content_hash}-{array_checksum(array)}.npy"
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        try:
            # No fsync per entry: a power cut can at worst leave a damaged entry, which the
            # checksum in its name detects and the next run recomputes.
            atomic_write_bytes(folder / name, buffer.getvalue(), durable=False)
        except OSError as error:
            self._failed(error)
            return
        index = self._index(key)
        with self._lock:
            previous = index.get(content_hash)
            index[content_hash] = name
        if previous is not None and previous != name:
            (folder / previous).unlink(missing_ok=True)

    # -- internals --------------------------------------------------------------------------
    def _index(self, key: str) -> dict[str, str]:
        """content hash -> entry file name, from one directory listing per settings key."""
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                return index
        index = {}
        stale_before = time.time() - _STALE_TEMPORARY_SECONDS
        try:
            with os.scandir(self.folder(key)) as entries:
                for entry in entries:
                    name = entry.name
                    if name.endswith(".npy") and not name.startswith("."):
                        index[name.split("-", 1)[0]] = name
                    elif name.endswith(".tmp") and _modified_before(entry, stale_before):
                        # Left by a killed process; a live writer renames its file within seconds.
                        _remove(entry.path)
        except FileNotFoundError:
            pass
        except OSError as error:  # the settings folder is a file, or unreadable
            self._failed(error)
        with self._lock:
            return self._indexes.setdefault(key, index)

    def _read_entry(self, path: str, shape: tuple[int, ...]) -> np.ndarray | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        header = self._npy_header(shape)
        if data.startswith(header) and len(data) == len(header) + 4 * int(np.prod(shape)):
            # Fast path for the files this class writes: np.load parses the header with
            # ast.literal_eval, which alone costs more than the rest of a cache hit.
            array = np.frombuffer(data, dtype=np.float32, offset=len(header)).reshape(shape)
        else:
            try:
                array = np.load(io.BytesIO(data), allow_pickle=False)
            except NPY_READ_ERRORS:  # a damaged entry is a miss: computed and written again
                _remove(path)
                return None
        expected_checksum = os.path.basename(path)[: -len(".npy")].split("-", 1)[-1]
        if array.shape != tuple(shape) or array.dtype != np.float32 or array_checksum(array) != expected_checksum:
            _remove(path)
            return None
        return array

    def _npy_header(self, shape: tuple[int, ...]) -> bytes:
        """The exact bytes np.save writes before the data of a float32 array of ``shape``."""
        header = self._headers.get(shape)
        if header is None:
            buffer = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                buffer,
                {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                    "fortran_order": False,
                    "shape": tuple(shape),
                },
            )
            header = buffer.getvalue()
            self._headers[shape] = header
        return header

    def _load_memo(self) -> dict[str, list[Any]]:
        with self._lock:
            if self._memo is None:
                self._memo = self._read_memo_file()
            return self._memo

    def _read_memo_file(self) -> dict[str, list[Any]]:
        try:
            loaded = json.loads((self.directory / _MEMO_FILE).read_text())
        except (OSError, ValueError):
            return {}  # absent or damaged memo: hashes are simply recomputed
        return loaded if isinstance(loaded, dict) else {}


def _modified_before(entry: os.DirEntry, moment: float) -> bool:
    try:
        return entry.stat().st_mtime < moment
    except OSError:
        return False


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _reason(error: OSError) -> str:
    # OutputError from counting.core.files already reads "<path>: cannot write (<reason>)...".
    text = str(error)
    if "cannot write (" in text:
        return text.split("cannot write (", 1)[1].split(")", 1)[0]
    return error.strerror or text


def _warn_on_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _image_byte_limit() -> int:
    """The decoder's file-size cap (counting.data.imaging.max_image_bytes); with a bad
    ``COUNTING_MAX_IMAGE_BYTES`` value no file is hashed and the decoder says what is wrong."""
    from counting.core.errors import CountingError
    from counting.data.imaging import max_image_bytes

    try:
        return max_image_bytes()
    except CountingError:
        return -1
