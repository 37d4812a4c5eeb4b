"""Safe file output: whole files or nothing, output paths checked before any work starts.

Every file the project writes goes through :func:`atomic_write`: the content is written to a
temporary file in the target's folder, flushed to disk (``fsync``) and renamed over the target
with ``os.replace``, which is atomic on POSIX and Windows. A crash, a full disk or an exception
while writing therefore leaves the previous file untouched, never a truncated one.

Outputs that are not regular files (``/dev/null``, ``/dev/full``, a FIFO, a terminal) are written
straight into, never renamed onto: a rename would replace the device node with a plain file.
An output that names one of the process's open descriptors (``/dev/stdout``, ``/dev/stderr``,
``/dev/fd/N``, ``/proc/self/fd/N``, which ``>(cmd)`` and ``2>`` give) is written through that
descriptor, at its offset, as a shell's ``>`` does: whatever it is behind it (a pipe, a socket,
a terminal, the ``log.txt`` of ``> log.txt`` that already holds the table) is neither opened
again by name, nor truncated, nor replaced.
An output named by a symlink is written through it, into the file it points at (as ``>`` in a
shell, ``cp`` or an editor do): the link stays a link.

File names that are not valid UTF-8 (bytes from another locale, which Python decodes into lone
surrogates via ``os.fsdecode``) are written as valid UTF-8 with each undecodable byte shown as
``\\xNN`` (what Python's ``backslashreplace`` gives for bytes): a CSV, JSON or ``.files.txt``
stays readable by any UTF-8 tool, and the escaped name says which bytes the real one holds. The
same text is what :func:`printable` shows on screen.

:func:`check_outputs` is the one rule every command applies before any work: no output may be
one of the command's inputs (model, images, labels, cache), and nothing is written inside a
folder the command reads its data from.
"""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from counting.core.errors import CountingError

__all__ = [
    "OutputError",
    "atomic_path",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_writable",
    "check_outputs",
    "check_new_files",
    "check_writable_folder",
    "dumps_json",
    "flush_standard_streams",
    "is_regular_file",
    "open_descriptor",
    "printable",
    "reason",
    "shares_stdout",
    "unique_files",
]


def _escape_undecodable(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a file-name byte that was not UTF-8 (a lone surrogate U+DC80..U+DCFF
    from ``surrogateescape``) becomes ``\\xNN``; anything else unencodable becomes ``\\uXXXX``."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    pieces = []
    for character in error.object[error.start : error.end]:
        code = ord(character)
        pieces.append(f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}")
    return "".join(pieces), error.end


# Registered once under a name of our own: text outputs pass it as ``errors=``.
FILE_NAME_ERRORS = "counting.escape-undecodable"
codecs.register_error(FILE_NAME_ERRORS, _escape_undecodable)


class OutputError(CountingError, OSError):
    """An output file or folder cannot be written."""


def reason(error: OSError) -> str:
    """Why a write failed, in a few words for the error line."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.EROFS:
        return "read-only file system"
    if error.errno == errno.EPIPE:
        return "the reading end of the pipe was closed"
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
    _probe(existing, make_folder=existing != folder, target=target)


# Prefix of the entry :func:`_probe` makes and removes at once.
_PROBE_PREFIX = ".counting-probe."


def _probe(existing: Path, *, make_folder: bool, target: Path) -> None:
    """Make and remove at once the first entry the write will make in ``existing``: a file (the
    writers' temporary file) or, when folders are still missing, a folder. ``os.access`` says
    yes to root everywhere, and /proc, /sys or a bind mount refuse only when asked: without the
    probe those failed after all the work, some with a traceback. Nothing is left behind."""
    try:
        if make_folder:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=_PROBE_PREFIX))
        else:
            fd, name = tempfile.mkstemp(dir=existing, prefix=_PROBE_PREFIX)
            os.close(fd)
            os.unlink(name)
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT):
            why = reason(error)
        else:  # /proc answers ENOENT for a folder that exists: say what it means
            why = f"its file system takes no new {'folders' if make_folder else 'files'}"
        raise OutputError(f"{target}: cannot write here (folder {existing}: {why})") from None


def _through_link(target: Path) -> Path:
    """Where an output named ``target`` is written: the file a symlink points at (dangling or
    not), else ``target``. Replacing the link by a plain file would leave the file the user
    linked to with its old content and break a layout made on purpose; every shell redirection
    and editor writes through the link, and so do the writers here."""
    if not os.path.islink(target):
        return target
    real = Path(os.path.realpath(target))
    if os.path.islink(real):  # realpath stops inside a loop
        raise OutputError(f"{target}: is a symlink loop; nothing can be written through it")
    return real


# The names of the standard streams, whatever /dev holds (macOS has device nodes there, a
# container may have no /dev/stdout link at all): the descriptors a shell gives them.
_STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
# /proc/PID/fd/N and /proc/PID/task/TID/fd/N: /dev/fd, /proc/self and /proc/thread-self resolve to these.
_PROC_DESCRIPTOR = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd/(\d+)")
# Symlinks followed at most (the kernel's own limit is 40).
_MAX_LINKS = 40


def open_descriptor(path: str | os.PathLike[str]) -> int | None:
    """The file descriptor of this process that ``path`` names, else None.

    ``/dev/stdout``, ``/dev/stderr``, ``/dev/stdin``, ``/dev/fd/N``, ``/proc/self/fd/N``,
    ``/proc/thread-self/fd/N`` and ``/proc/PID/fd/N`` of this process, or a symlink to one. Such a
    path must not be resolved to what its link shows (``pipe:[123]`` opens nothing; ``log.txt``
    would be truncated or replaced, losing what the process already wrote there): the link is
    followed one step at a time, each folder resolved, until it names a descriptor or not.
    """
    try:
        current = os.path.abspath(os.path.expanduser(os.fspath(path)))
    except (TypeError, ValueError):
        return None
    own = {str(os.getpid()), os.path.basename(os.path.realpath("/proc/self"))}
    for _ in range(_MAX_LINKS):
        if current in _STANDARD_STREAMS:
            return _STANDARD_STREAMS[current]
        folder, name = os.path.split(current)
        current = os.path.join(os.path.realpath(folder), name)
        named = _PROC_DESCRIPTOR.fullmatch(current)
        if named is not None:
            return int(named[2]) if named[1] in own else None
        try:
            link = os.readlink(current)
        except (OSError, ValueError):  # not a symlink, or missing: a plain path
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return None


def shares_stdout(path: str | os.PathLike[str] | None) -> bool:
    """True when ``path`` writes into this process's stdout (``-``, ``/dev/stdout``, ``/dev/fd/N``
    of a copy of it): a command's other lines there would be mixed into that document."""
    if path is None:
        return False
    if is_stdout(path):
        return True
    descriptor = open_descriptor(path)
    if descriptor is None:
        return False
    try:
        first, second = os.fstat(descriptor), os.fstat(1)
    except OSError:
        return descriptor == 1
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _descriptor_problem(descriptor: int) -> str | None:
    """Why ``descriptor`` cannot take an output (not open, open for reading only), else None."""
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): the write itself says what is wrong
        return None
    try:
        flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
    except OSError:
        return f"file descriptor {descriptor} is not open"
    if flags & os.O_ACCMODE == os.O_RDONLY:
        return f"file descriptor {descriptor} is open for reading only"
    return None


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder ("character
    device", "FIFO", "block device", "socket"), or names an open descriptor of this process
    ("open file descriptor", :func:`open_descriptor`: written through, whatever is behind it);
    None otherwise (missing, file, folder)."""
    if open_descriptor(path) is not None:
        return _DESCRIPTOR
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, name in (
        (stat.S_ISCHR, "character device"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return None


# Written straight into (``--csv /dev/null``, a named FIFO); a block device is a disk, and
# writing a CSV over one destroys it, so it is refused like a socket (which cannot be opened).
_WRITABLE_SPECIAL = ("character device", "FIFO")
# What special_kind calls a path naming an open descriptor (``>(cmd)``, ``/dev/stdout``): written
# through the descriptor, whether a pipe, a socket, a terminal or a regular file is behind it.
_DESCRIPTOR = "open file descriptor"


# An output named "-" is standard output, as for most command-line tools (count --csv - | ...).
STDOUT_NAME = "-"


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """True for the output name ``-``: the command writes that output to standard output."""
    return path is not None and os.fspath(path) == STDOUT_NAME


def check_writable(path: str | os.PathLike[str], *, in_place: bool = False) -> Path:
    """Fail now, before any computing, if ``path`` could not be written later.

    Missing folders are fine (:func:`atomic_write` creates them) as long as the closest existing
    ancestor is a writable folder. ``in_place`` is for streams written straight into the file
    (video records): there an existing writable file is enough, whatever its folder allows.
    A character device or FIFO is written straight into, so only its own permission counts.
    Raises :class:`OutputError` naming the path and the problem.
    """
    if is_stdout(path):
        # Commands that can write to stdout handle "-" before this check; elsewhere it would
        # become a file named "-" in the current folder.
        raise OutputError(
            f"{STDOUT_NAME}: this output cannot go to stdout here; give a file name (./- for a file so named)"
        )
    target = Path(path).expanduser()
    descriptor = open_descriptor(target)
    if descriptor is not None:
        problem = _descriptor_problem(descriptor)
        if problem is not None:
            raise OutputError(f"{target}: cannot write ({problem})")
        return target
    if target.is_dir():
        raise OutputError(f"{target}: is a folder; give a file name")
    kind = special_kind(target)
    if kind is not None:
        if kind not in _WRITABLE_SPECIAL:
            raise OutputError(f"{target}: is a {kind}, not a file; nothing is written to it")
        if not os.access(target, os.W_OK):
            raise OutputError(f"{target}: cannot write here (permission denied)")
        return target
    if target.is_file() and not _file_writable(target):
        # A rename into the folder would replace it whatever its mode; a read-only file is one
        # its owner means to keep (the shell's `>` refuses it too).
        raise OutputError(f"{target}: is a read-only file; make it writable or choose another name")
    if in_place and os.path.exists(target):
        return target
    _check_folder_accepts(_through_link(target).parent, target)
    return target


def _file_writable(path: Path) -> bool:
    """Whether an existing file may be written: the system says so, and some write permission bit
    is set (root passes ``os.access`` on any file, yet a file with no write bit is one its owner
    marked read-only)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return True  # vanished or unreadable metadata: the write itself will say
    return os.access(path, os.W_OK) and bool(stat.S_IMODE(mode) & 0o222)


def check_writable_folder(path: str | os.PathLike[str]) -> Path:
    """Like :func:`check_writable` for an output folder (created later if missing)."""
    folder = Path(path).expanduser()
    descriptor = open_descriptor(folder)
    if descriptor is not None:
        raise OutputError(f"{folder}: is an open file descriptor ({descriptor}), not a folder; give a folder")
    if os.path.lexists(folder) and not folder.is_dir():
        kind = special_kind(folder)
        raise OutputError(f"{folder}: is {f'a {kind}' if kind else 'a file'}, not a folder")
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
    OpenCV); on success it is fsynced and renamed onto ``path``, on failure removed.

    A character device or FIFO at ``path`` is yielded itself: renaming onto it would replace the
    device node with a regular file (``/dev/null`` turned into a file when run as root). A
    symlink at ``path`` is written through (:func:`_through_link`): the file it points at is
    replaced, atomically, and the link is kept. A path naming an open descriptor
    (:func:`open_descriptor`: ``/dev/stdout``, ``>(cmd)``) gets a temporary file in the temporary
    folder, copied whole into the descriptor, at its offset, on success.
    """
    named = Path(path).expanduser()
    descriptor = open_descriptor(named)
    if descriptor is not None:
        with _through_descriptor(named, descriptor) as temporary:
            yield temporary
        return
    target = _through_link(named)
    kind = special_kind(target)
    if kind is not None:
        if kind not in _WRITABLE_SPECIAL:
            raise OutputError(f"{named}: is a {kind}, not a file; nothing is written to it")
        try:
            yield target
        except OSError as error:
            if isinstance(error, CountingError):
                raise
            raise OutputError(f"{named}: cannot write ({reason(error)})") from None
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(
            dir=target.parent,
            prefix=f".{target.name[:64]}.",
            suffix=target.suffix or ".tmp",
        )
        os.close(fd)
    except OSError as error:
        raise OutputError(f"{named}: cannot write ({reason(error)})") from None
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
            raise OutputError(f"{named}: cannot write ({reason(error)}); {kept}") from None
        raise


@contextmanager
def _through_descriptor(named: Path, descriptor: int) -> Iterator[Path]:
    """:func:`atomic_path` for an output naming an open descriptor: a temporary file in the
    temporary folder, copied on success into the descriptor in one go. The whole output or
    none of it is written, at the descriptor's offset; nothing is opened by name."""
    try:
        fd, name = tempfile.mkstemp(prefix="counting-output.", suffix=named.suffix or ".tmp")
        os.close(fd)
    except OSError as error:
        raise OutputError(f"{named}: cannot write ({reason(error)})") from None
    temporary = Path(name)
    try:
        yield temporary
        _copy_into_descriptor(temporary, descriptor, named)
    except OSError as error:
        if isinstance(error, CountingError):
            raise
        raise OutputError(f"{named}: cannot write ({reason(error)})") from None
    finally:
        temporary.unlink(missing_ok=True)


def _copy_into_descriptor(source: Path, descriptor: int, named: Path) -> None:
    """Write the bytes of ``source`` into ``descriptor`` through a duplicate of it, which shares
    its offset: ``--csv /dev/stdout > log.txt`` puts the CSV after the table already in
    ``log.txt``, as two writes of one shell command do. A write that fails half-way into a
    regular file is cut back to where it started (a reader never sees half a CSV)."""
    problem = _descriptor_problem(descriptor)
    if problem is not None:
        raise OutputError(f"{named}: cannot write ({problem})")
    flush_standard_streams()  # what Python still holds for the descriptor goes first
    duplicate = os.dup(descriptor)
    try:
        start = _end_of_regular_file(duplicate)
        try:
            with open(source, "rb") as handle:
                while block := handle.read(1 << 20):
                    view = memoryview(block)
                    while view:
                        view = view[os.write(duplicate, view) :]
        except OSError:
            if start is not None:
                try:
                    os.ftruncate(duplicate, start)
                except OSError:
                    pass
            raise
    finally:
        os.close(duplicate)


def flush_standard_streams() -> None:
    """Write out what Python holds for stdout and stderr, before bytes go to their descriptors
    another way (a duplicate of /dev/stdout): what was printed first stays first. A closed or
    failed stream is left to its own writer to report."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _end_of_regular_file(descriptor: int) -> int | None:
    """Where a write into ``descriptor`` starts when it is a regular file written at its end
    (``>>``, or ``>`` after the table), else None: only then can a failed write be cut back
    without touching what others wrote."""
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None
        position = os.lseek(descriptor, 0, os.SEEK_CUR)
        appends = _appends(descriptor)
    except OSError:
        return None
    if appends:
        return info.st_size
    return position if position >= info.st_size else None


def _appends(descriptor: int) -> bool:
    try:
        import fcntl
    except ImportError:
        return False
    return bool(fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_APPEND)


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
        if durable and special_kind(temporary) is None:  # a device or pipe has nothing to sync
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
    """``text`` safe for a UTF-8 terminal: undecodable file-name bytes shown as ``\\xNN``, the same
    text the CSV and JSON outputs hold."""
    return text.encode("utf-8", FILE_NAME_ERRORS).decode("utf-8")


def dumps_json(document: Any, *, indent: int | None = 2) -> str:
    """``json.dumps`` for files people open: every string through :func:`printable`, so an
    undecodable file-name byte is the text ``\\xNN`` (not ``\\udcNN``, which decodes to a lone
    surrogate no UTF-8 tool can write), and non-ASCII names stay readable (``ensure_ascii=False``).
    A number that is not finite (an unbounded interval's end) is ``null``: JSON has no Infinity
    or NaN, and browsers and ``jq`` refuse a file holding them."""

    def text(value: Any) -> Any:
        if isinstance(value, str):
            return printable(value)
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {text(key) if isinstance(key, str) else key: text(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [text(item) for item in value]
        return value

    return json.dumps(text(document), indent=indent, ensure_ascii=False, allow_nan=False)


def _same_file(first: str, second: str) -> bool:
    """One file under two names: equal after symlinks and ``..``, or the same inode (a hard link)."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False


def _inside(path: str, folder: str) -> bool:
    real_path, real_folder = os.path.realpath(path), os.path.realpath(folder)
    return real_path == real_folder or real_path.startswith(real_folder.rstrip(os.sep) + os.sep)


Paths = Iterable[str | os.PathLike[str] | None]


def _symlinks_out_of(folder: str) -> list[tuple[str, bool]]:
    """``(real target, is a folder)`` of every symlink inside ``folder`` (not followed): a
    dataset's ``counts.csv`` or images may be links to files elsewhere, which an output written
    by rename there would replace."""
    links: list[tuple[str, bool]] = []
    for parent, folders, files in os.walk(folder, onerror=lambda _error: None):
        for name in folders + files:
            entry = os.path.join(parent, name)
            if os.path.islink(entry):
                links.append((os.path.realpath(entry), os.path.isdir(entry)))
    return links


def check_outputs(outputs: Paths, *, inputs: Paths = (), input_folders: Paths = (), cache_folders: Paths = ()) -> None:
    """The one rule, applied by every command before any work: ``OutputError`` when an output
    would destroy or change what the command reads.

    ``outputs`` are the files (or folders) the command will write, side files included;
    ``inputs`` the files it reads (model, images, labels CSV, weights, features, video);
    ``input_folders`` the folders it reads data from (a dataset's root); ``cache_folders`` the
    feature cache, refused for outputs like a data folder but not searched for symlinks (it
    holds none of its own, and may hold 100 000 files that every start would walk).
    Paths are compared after symlinks and ``..``, and hard links count as the same file. An
    output inside a data folder is refused even when it is a new name: a model, loss curve or
    report there is read as data by the next run (a folder dataset lists every image in it);
    so is an output that a symlink inside a data folder points at (a linked ``counts.csv``).
    Character devices and FIFOs are written straight into and cannot change an input. An open
    descriptor (``/dev/stdout``) is written through at its offset, never replaced: only the file
    behind it, when a regular one, is checked, against the inputs and the other outputs, which
    would replace it by rename (two descriptors on one file, ``> log 2>&1``, both write into it).
    """
    sources = [os.fspath(path) for path in inputs if path is not None]
    folders = [os.fspath(path) for path in input_folders if path is not None]
    caches = [os.fspath(path) for path in cache_folders if path is not None]
    written: list[tuple[str, bool]] = []  # (output, is an open descriptor)
    links: dict[str, list[tuple[str, bool]]] = {}  # walked once, on the first output
    for output in outputs:
        if output is None:
            continue
        target = os.fspath(Path(output).expanduser())
        if special_kind(target) in _WRITABLE_SPECIAL:
            continue
        descriptor = open_descriptor(target) is not None
        if descriptor and not is_regular_file(target):  # a pipe, socket or terminal behind it
            continue
        if any(_same_file(target, other) for other, both in written if not (descriptor and both)):
            raise OutputError(f"{output}: named for two outputs of this command; give each its own name")
        written.append((target, descriptor))
        for source in sources:
            if _same_file(target, source):
                named = "" if os.path.realpath(source) == os.path.realpath(target) else f" ({source})"
                raise OutputError(f"{output}: is also an input of this command{named}; choose another name")
        if descriptor:  # opened by the shell before the command ran: no new file in any folder
            continue
        real_target = os.path.realpath(target)
        for folder in folders + caches:
            if _inside(target, folder):
                raise OutputError(
                    f"{output}: is inside {folder}, which this command reads its data from; write outputs outside it"
                )
        for folder in folders:
            if folder not in links:
                links[folder] = _symlinks_out_of(folder)
            for linked, is_folder in links[folder]:
                if real_target == linked or (is_folder and _inside(real_target, linked)):
                    raise OutputError(
                        f"{output}: {folder} reads it through a symlink (its data); write outputs elsewhere"
                    )


def cache_among_inputs(
    cache_folder: str | os.PathLike[str], input_folders: Paths, picture_folders: Paths = ()
) -> str | None:
    """The input folder a feature cache would write into, else None (compared after symlinks and
    ``..``): one of ``input_folders`` (a dataset root, a folder named on the command line: read
    whole) that holds it at any depth, or one of ``picture_folders`` (the folders of pictures
    named one by one or by a glob) that it is. A cache below the folder of a single named photo
    is allowed (``count ~/photo.jpg`` with the cache in ``~/.cache``)."""
    cache = os.fspath(Path(cache_folder).expanduser())
    for folder in input_folders:
        if folder is not None and _inside(cache, os.fspath(Path(folder).expanduser())):
            return os.fspath(folder)
    for folder in picture_folders:
        if folder is not None and os.path.realpath(cache) == os.path.realpath(Path(folder).expanduser()):
            return os.fspath(folder)
    return None


def check_not_an_input(output: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> None:
    """``OutputError`` when ``output`` is one of the command's own inputs (an image, the model,
    the video): writing it would destroy what the command reads."""
    check_outputs([output], inputs=inputs)


def check_new_files(
    targets: Sequence[str | os.PathLike[str]],
    *,
    outputs: Iterable[str | os.PathLike[str] | None] = (),
    inputs: Iterable[str | os.PathLike[str]] = (),
    what: str = "output",
) -> None:
    """``OutputError`` unless every one of ``targets`` (files a command will create in a folder
    it was given, named by it, never replacing one) is a new name: none is one of the command's
    other ``outputs``, none is an ``inputs`` file, and none exists yet. ``what`` names them in
    the error ("annotated photo"). Paths are compared after symlinks and ``..``; the cost is a
    few system calls per target, whatever the number of inputs."""
    if not targets:
        return
    by_real = {os.path.realpath(os.fspath(target)) for target in targets}
    for output in outputs:
        if output is None or is_stdout(output) or special_kind(output) in (*_WRITABLE_SPECIAL, _DESCRIPTOR):
            continue
        if os.path.realpath(os.fspath(Path(output).expanduser())) in by_real:
            raise OutputError(
                f"{output}: named for two outputs of this command (also the name of an {what}); give each its own name"
            )
    existing = [os.fspath(target) for target in targets if os.path.lexists(target)]
    if not existing:
        return
    sources = [os.fspath(source) for source in inputs]
    real_sources = {os.path.realpath(source) for source in sources}
    inodes = {_inode(source) for source in sources} - {None}
    for target in existing:
        if os.path.realpath(target) in real_sources or _inode(target) in inodes:
            raise OutputError(f"{target}: is also an input of this command; write the {what}s elsewhere")
    more = f" (and {len(existing) - 1} more of the {len(targets)})" if len(existing) > 1 else ""
    them = "them" if len(existing) > 1 else "it"
    raise OutputError(
        f"{existing[0]}: already exists{more}; an {what} never replaces a file: choose a new or empty folder, "
        f"or move {them} away"
    )


def _inode(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path`` after symlinks (one file under two names), None when absent."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino
