"""Column names of per-class counts, one scheme for every file the commands write.

A single-count model writes ``count``, ``low``, ``high`` (and ``smoothed`` in video); a per-class
model writes the same names suffixed with the class: ``count_person``, ``low_person``,
``high_person``, ``smoothed_person``. The prefix keeps a class from ever taking the name of a fixed
column (``image``, ``total``, ``frame``, ``time_s``, ``low``, ``high``), whatever it is called.

A zone (counting.apply.zones) adds ``zone_NAME``, ``zone_NAME_low`` and ``zone_NAME_high``: the
``zone_`` prefix keeps it apart from the fixed and the per-class columns; zone names whose
columns would clash with each other are refused where the zones are read.
"""

from __future__ import annotations

__all__ = ["class_column", "zone_column"]


def class_column(kind: str, class_name: str) -> str:
    """``"count_person"`` for ``("count", "person")``; ``kind`` is count, low, high or smoothed."""
    return f"{kind}_{class_name}"


def zone_column(kind: str, zone_name: str) -> str:
    """``"zone_door"`` for ``("count", "door")``, ``"zone_door_low"`` for ``("low", "door")``."""
    return f"zone_{zone_name}" if kind == "count" else f"zone_{zone_name}_{kind}"
