"""Safe file output: whole files or nothing, output paths checked before any work starts.

Every file the project writes goes through :func:`atomic_write`: the content is written to a
temporary file in the target's folder, flushed to disk (``fsync``) and renamed over the target
with ``os.replace``, which is atomic on POSIX and Windows. A crash, a full disk or an exception
while writing therefore leaves the previous file untouched, never a truncated one.

File names that are not valid UTF-8 (bytes from another locale, which Python decodes into lone
surrogates via ``os.fsdecode``) are written back with ``errors="surrogateescape"``: the listed
name is then byte-for-byte the file's real name, so a CSV or ``.files.txt`` read back with the
same error handler opens the same files. ``backslashreplace`` would give valid UTF-8 but names
that point at no file; JSON needs neither, as ``json.dumps`` escapes surrogates as ``\\udcXX``.
On screen, :func:`printable` shows such names with backslash escapes instead.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from counting.errors import CountingError

__all__ = [
    "OutputError",
    "atomic_path",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_writable",
    "check_writable_folder",
    "is_regular_file",
    "printable",
    "unique_files",
]

FILE_NAME_ERRORS = "surrogateescape"


class OutputError(CountingError, OSError):
    """An output file or folder cannot be written."""


def _reason(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "no space left on the device"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.EROFS:
        return "read-only file system"
    return error.strerror or str(error)


def _nearest_existing(folder: Path) -> Path:
    """``folder`` or its closest ancestor that exists (the one that must accept new entries)."""
    current = folder
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def _check_folder_accepts(folder: Path, target: Path) -> None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise OutputError(f"{target}: cannot write here ({existing} is a file, not a folder)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{target}: cannot write here (folder {existing} is not writable)")


def check_writable(path: str | os.PathLike[str], *, in_place: bool = False) -> Path:
    """Fail now, before any computing, if ``path`` could not be written later.

    Missing folders are fine (:func:`atomic_write` creates them) as long as the closest existing
    ancestor is a writable folder. ``in_place`` is for streams written straight into the file
    (video records): there an existing writable file is enough, whatever its folder allows.
    Raises :class:`OutputError` naming the path and the problem.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise OutputError(f"{target}: is a folder; give a file name")
    if in_place and os.path.exists(target) and os.access(target, os.W_OK):
        return target
    _check_folder_accepts(target.parent, target)
    return target


def check_writable_folder(path: str | os.PathLike[str]) -> Path:
    """Like :func:`check_writable` for an output folder (created later if missing)."""
    folder = Path(path).expanduser()
    if os.path.lexists(folder) and not folder.is_dir():
        raise OutputError(f"{folder}: is a file, not a folder")
    _check_folder_accepts(folder, folder)
    return folder


def new_file_mode(target: Path) -> int:
    """The mode an ordinary ``open(target, "w")`` would give: the old file's, else 0o666 - umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, durable: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that want a file name (NumPy, matplotlib,
    OpenCV); on success it is fsynced and renamed onto ``path``, on failure removed."""
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(
            dir=target.parent,
            prefix=f".{target.name[:64]}.",
            suffix=target.suffix or ".tmp",
        )
        os.close(fd)
    except OSError as error:
        raise OutputError(f"{target}: cannot write ({_reason(error)})") from None
    temporary = Path(name)
    try:
        yield temporary
        if durable:
            fd = os.open(temporary, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.chmod(temporary, new_file_mode(target))
        os.replace(temporary, target)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, CountingError):
            kept = "the previous file is unchanged" if os.path.lexists(target) else "no file was created"
            raise OutputError(f"{target}: cannot write ({_reason(error)}); {kept}") from None
        raise


@contextmanager
def atomic_write(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    newline: str | None = None,
    errors: str | None = FILE_NAME_ERRORS,
    durable: bool = True,
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename.

    On any exception (including Ctrl-C) the temporary file is removed and ``path`` keeps its
    previous content. ``OSError`` (full disk, permissions) becomes :class:`OutputError`.
    ``durable=False`` skips the ``fsync`` (for files that are checked on read and can be
    recomputed, like feature-cache entries).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write supports modes 'w' and 'wb', got {mode!r}")
    text: dict[str, Any] = {} if "b" in mode else {"encoding": encoding, "newline": newline, "errors": errors}
    with (
        atomic_path(path, durable=False) as temporary,
        open(temporary, mode, **text) as handle,
    ):
        yield handle
        handle.flush()
        if durable:
            os.fsync(handle.fileno())


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    with atomic_write(path, "wb", durable=durable) as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_write(path, "w") as handle:
        handle.write(text)


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """True for a regular file (after symlinks); False for devices, FIFOs, sockets, folders.

    Reading ``/dev/zero`` never ends and opening a FIFO waits for a writer, so the readers only
    ever open regular files.
    """
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def unique_files(paths: Iterable[str | os.PathLike[str]]) -> list[Any]:
    """``paths`` in order without repeats of the same file (by resolved path).

    A recursive ``**`` glob through a symlink loop lists one image under many names; each file
    is counted once, under the first name it was found by.
    """
    seen: set[str] = set()
    unique = []
    for path in paths:
        try:
            key = os.path.realpath(path)
        except (OSError, ValueError):
            key = os.path.abspath(path)
        if key in seen:
            continue
        seen.add(key)
        unique.append(path)
    return unique


def printable(text: str) -> str:
    """``text`` safe for a UTF-8 terminal: undecodable file-name bytes shown as ``\\xNN``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return (
            os.fsencode(text).decode("utf-8", "backslashreplace")
            if _is_fs_text(text)
            else text.encode("utf-8", "backslashreplace").decode("utf-8")
        )
    return text


def _is_fs_text(text: str) -> bool:
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def check_not_an_input(output: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> None:
    """``OutputError`` when ``output`` is one of the command's own inputs (an image, the model,
    the video): writing it would destroy what the command reads."""
    target = os.path.realpath(output)
    for source in inputs:
        if os.path.realpath(source) == target:
            raise OutputError(f"{output}: output is also an input of this command; choose another name")
