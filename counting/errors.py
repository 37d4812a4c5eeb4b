"""User-facing errors: each one is a single line that names the file and the problem.

The CLI catches ``CountingError`` and prints its message (no traceback) with a non-zero exit.
"""

from __future__ import annotations


class CountingError(Exception):
    """Base class for errors shown to the user as one line."""


class DatasetError(CountingError, ValueError):
    """A dataset file is missing, unreadable or inconsistent."""


class ImageError(CountingError, ValueError):
    """An image cannot be read (missing, empty, truncated, not an image)."""


class BackboneError(CountingError):
    """A backbone or its weights cannot be loaded."""


class ModelFileError(CountingError, ValueError):
    """A model file is missing, of the wrong kind, or of an unsupported version."""


class StreamError(CountingError):
    """A video source cannot be opened or read."""
