"""Column names of per-class counts, one scheme for every file the commands write.

A single-count model writes ``count``, ``low``, ``high`` (and ``smoothed`` in video); a per-class
model writes the same names suffixed with the class: ``count_person``, ``low_person``,
``high_person``, ``smoothed_person``. The prefix keeps a class from ever taking the name of a fixed
column (``image``, ``total``, ``frame``, ``time_s``, ``low``, ``high``), whatever it is called.
"""

from __future__ import annotations

__all__ = ["class_column"]


def class_column(kind: str, class_name: str) -> str:
    """``"count_person"`` for ``("count", "person")``; ``kind`` is count, low, high or smoothed."""
    return f"{kind}_{class_name}"
