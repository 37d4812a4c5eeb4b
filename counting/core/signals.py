"""SIGTERM handled like Ctrl-C: the command stops where it is, keeps what it finished, says so.

``kill PID`` (and a service manager stopping a job) sends SIGTERM, whose default action ends
the process at once: temporary files stay behind, a streamed CSV is cut mid-row and nothing is
said. Raising :class:`Terminated` (a ``KeyboardInterrupt``) from the handler instead runs the
same ``finally``/``except KeyboardInterrupt`` paths as Ctrl-C. The exit status is then
128 + 15 = 143, what a shell reports for a process ended by SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["EXIT_TERMINATED", "Terminated", "sigterm_as_interrupt", "was_terminated"]

EXIT_TERMINATED = 128 + signal.SIGTERM

_received = threading.Event()


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives."""


def _raise_terminated(signum: int, frame: Any) -> None:
    _received.set()
    raise Terminated


def was_terminated() -> bool:
    """True once SIGTERM arrived under :func:`sigterm_as_interrupt` (a command that caught the
    interrupt and raised its own ``KeyboardInterrupt`` with a note is still known terminated)."""
    return _received.is_set()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated`; the previous handler is restored
    after. Only the main thread can set handlers: elsewhere the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
