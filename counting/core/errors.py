"""User-facing errors: each one is a single line that names the file and the problem.

The CLI catches ``CountingError`` and prints its message (no traceback) with a non-zero exit.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator


class CountingError(Exception):
    """Base class for errors shown to the user as one line."""


class DatasetError(CountingError, ValueError):
    """A dataset file is missing, unreadable or inconsistent."""


class ImageError(CountingError, ValueError):
    """An image cannot be read (missing, empty, truncated, not an image)."""


class BackboneError(CountingError):
    """A backbone or its weights cannot be loaded."""


class TrainingError(CountingError, ValueError):
    """The regressor cannot be fitted with these settings on this data (e.g. too few rows)."""


class ModelFileError(CountingError, ValueError):
    """A model file is missing, of the wrong kind, or of an unsupported version."""


class StreamError(CountingError):
    """A video source cannot be opened or read."""


@contextlib.contextmanager
def one_line_warnings(show: Callable[[str], None]) -> Iterator[None]:
    """Show each Python warning (PIL, torch, NumPy, ...) as one line through ``show``, once.

    The default display is two or more lines (file, line number, source line) meant for
    developers; a user needs the message only. Repeats of the same message are dropped.
    """
    seen: set[str] = set()

    def display(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        text = str(message).strip()
        line = text.splitlines()[0] if text else category.__name__
        if line not in seen:
            seen.add(line)
            show(line)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = display  # restored by catch_warnings on exit
        yield
