"""Training maps kept on disk and read back a window at a time.

A conv head trains on random crops of every training picture's stride-8 maps. Held in memory,
those maps made the crowd model's training peak at 11.2 GB (1,125 pictures at 576 px, float16),
and the memory grew with every picture a user added. A :class:`MapStore` writes each picture's
map to one ``.npy`` file in a private temporary folder as soon as it is made; a
:class:`StoredMap` reads back only the window a crop asks for, through a memory map opened for
that read and closed after it. The pages stay in the kernel's page cache (fast, and given back
under pressure) but not in the process's resident memory, so the training's peak RSS no longer
grows with the number of pictures.

``numpy.load(mmap_mode="r")`` does the reading; a store is a plain folder of ``.npy`` files a
person can open. It is removed when the store is closed, when it is garbage collected, or at
interpreter exit (``tempfile.TemporaryDirectory``), Ctrl-C included.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from counting.core.errors import CountingError
from counting.core.terminal import on_terminal
from counting.features.extract import _progress_bar

__all__ = ["MAP_CHUNK", "MapStore", "StoredMap", "maps_in_chunks"]

# Pictures whose maps are made (and held in memory) at once before they go to the store.
MAP_CHUNK = 32


class StoredMap:
    """One picture's ``(C, h, w)`` map in a ``.npy`` file: indexing reads only the window asked
    for; ``np.asarray`` reads it whole."""

    __slots__ = ("dtype", "offset", "path", "shape")

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype, offset: int) -> None:
        self.path = path
        self.shape = shape
        self.dtype = dtype
        self.offset = offset  # bytes of the .npy header: the data follow it, C order

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def __getitem__(self, key: Any) -> np.ndarray:
        # The map is unmapped when ``mapped`` goes (reference counting: at return), which keeps
        # its pages out of this process's resident memory.
        # The header is known from the write, so the file is mapped directly (np.load would parse
        # it again on every crop).
        mapped = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=self.shape)
        return np.array(mapped[key])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[...]
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self, dtype=dtype)

    def reshape(self, *shape: Any) -> np.ndarray:
        return np.asarray(self).reshape(*shape)

    def __repr__(self) -> str:
        return f"StoredMap({self.path.name}, shape={self.shape}, dtype={self.dtype})"


class MapStore(Sequence[StoredMap]):
    """Maps written one picture at a time to a private temporary folder (``directory``: where to
    make it; default the system's temporary folder), in the order appended."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, dtype: Any = np.float16) -> None:
        try:
            if directory is not None:
                Path(directory).mkdir(parents=True, exist_ok=True)
            self._folder = tempfile.TemporaryDirectory(prefix="counting-maps-", dir=directory)
        except OSError as error:
            where = directory if directory is not None else tempfile.gettempdir()
            raise CountingError(
                f"{where}: cannot make a folder for the training maps ({error.strerror or error}); "
                "set TMPDIR to a writable folder"
            ) from None
        self.dtype = np.dtype(dtype)
        self._maps: list[StoredMap] = []

    @property
    def folder(self) -> Path:
        return Path(self._folder.name)

    def append(self, array: np.ndarray) -> None:
        path = self.folder / f"{len(self._maps):06d}.npy"
        data = np.ascontiguousarray(array, dtype=self.dtype)
        try:
            np.save(path, data)
        except OSError as error:  # a full disk, mostly: one line, not numpy's traceback
            reason = error.strerror or str(error)
            raise CountingError(
                f"{self.folder}: cannot write the training maps ({reason}) after {len(self._maps)} pictures "
                f"({self.nbytes / 1e6:.0f} MB); set TMPDIR to a folder with room for them"
            ) from None
        offset = path.stat().st_size - data.nbytes
        self._maps.append(StoredMap(path, data.shape, self.dtype, offset))

    def __len__(self) -> int:
        return len(self._maps)

    def __getitem__(self, index: Any) -> Any:
        return self._maps[index]

    def __iter__(self) -> Iterator[StoredMap]:
        return iter(self._maps)

    @property
    def nbytes(self) -> int:
        return sum(item.nbytes for item in self._maps)

    def close(self) -> None:
        """Remove the folder and every map in it."""
        self._maps = []
        self._folder.cleanup()

    def __enter__(self) -> MapStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def maps_in_chunks(
    paths: Sequence[str],
    make: Callable[[list[str], bool], list[np.ndarray]],
    *,
    dtype: Any = np.float16,
    progress: bool = False,
    label: str = "maps",
) -> MapStore:
    """A :class:`MapStore` of the maps ``make(chunk, progress)`` gives for ``paths``,
    ``MAP_CHUNK`` pictures at a time, each chunk's written before the next is made. One progress
    bar over the chunks when there are several; ``make`` shows its own for one. The store is
    removed if anything fails half-way."""
    store = MapStore(dtype=dtype)
    chunks = [list(paths[first : first + MAP_CHUNK]) for first in range(0, len(paths), MAP_CHUNK)]
    try:
        console = Console(stderr=True)
        with _progress_bar(console, progress and on_terminal(console) and len(chunks) > 1) as bar:
            task = bar.add_task(label, total=len(paths)) if bar else None
            for chunk in chunks:
                for item in make(chunk, progress and len(chunks) == 1):
                    store.append(item)
                if bar is not None and task is not None:
                    bar.advance(task, len(chunk))
    except BaseException:
        store.close()
        raise
    return store
