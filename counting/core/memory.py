"""Giving freed native memory back to the system between chunks of a long run.

A density-head model's chunk of pictures allocates some hundred MB of feature maps in the
decoding threads and the runtimes, and frees them when the chunk is reduced to counts. glibc
keeps freed blocks in its heaps (one per thread arena) for reuse; with blocks of many sizes
freed from several threads the heaps fragment, and the process's resident size crept up with
the number of pictures (issue 21 item 4). ``malloc_trim(0)`` returns the free pages of every
arena to the system (madvise), at the cost of faulting them in again on the next chunk
(milliseconds against seconds of network time per chunk).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["release_freed_memory"]


@functools.cache
def _trim() -> object | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function


def release_freed_memory() -> bool:
    """Return freed heap pages to the system where the C library can (glibc); True if it did."""
    trim = _trim()
    return bool(trim(0)) if trim is not None else False  # type: ignore[operator]
