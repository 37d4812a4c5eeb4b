"""What a zone is: a named polygon in pixels or fractions of the frame, from ``--zone`` texts
and TOML/JSON zone files, validated (names, points, crossing edges, area); where the counting
happens: counting.apply.zones."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import shapely

from counting.core.columns import zone_column
from counting.core.errors import CountingError

__all__ = [
    "Zone",
    "ZoneError",
    "check_zone_names",
    "combined_zones",
    "load_zones",
    "parse_zone",
    "zones_from_entries",
]

# A zone's name becomes part of column names (zone_NAME, zone_NAME_low) and of metric labels:
# letters, digits, '_' and '-' only, so that no CSV reader, shell or Prometheus label trips on it.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
# More vertices than any hand-drawn zone needs; bounds the work a hostile file can ask for.
MAX_POINTS = 1000
MAX_ZONES = 100
# Zone files are a few lines; anything larger is not one.
MAX_FILE_BYTES = 1 << 20


class ZoneError(CountingError, ValueError):
    """A zone is malformed, lies outside the frame, or the model cannot count zones."""


@dataclass(frozen=True)
class Zone:
    """A named polygon. ``points`` are ``(x, y)`` vertices: pixels from the top-left corner,
    or, when ``relative``, fractions of the frame's width and height (0 to 1)."""

    name: str
    points: tuple[tuple[float, float], ...]
    relative: bool

    def __post_init__(self) -> None:
        # Checked here too, so a Zone built in Python is as valid as a parsed one.
        _check_zone(self.name, self.points, self.relative, where=f"zone {self.name!r}")

    def polygon(self, frame_size: tuple[int, int]) -> shapely.Polygon:
        """The zone in pixel coordinates of a ``(height, width)`` frame, clipped to the frame."""
        height, width = frame_size
        points = np.asarray(self.points, dtype=float)
        if self.relative:
            points = points * (width, height)
        clipped = shapely.Polygon(points).intersection(shapely.box(0, 0, width, height))
        if clipped.area <= 0:
            raise ZoneError(f"zone {self.name!r} lies outside the {width}x{height} frame")
        return clipped

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what :func:`load_zones` reads back."""
        return {"name": self.name, "points": [list(point) for point in self.points], "relative": self.relative}


def _check_zone(name: Any, points: Any, relative: Any, where: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ZoneError(
            f"{where}: zone name {name!r:.70} must be 1-64 letters, digits, '_' or '-' (it names output columns)"
        )
    if not isinstance(relative, bool):
        raise ZoneError(f"{where}: 'relative' must be true or false, got {relative!r:.40}")
    if len(points) < 3:
        raise ZoneError(f"{where}: a zone needs at least 3 points, got {len(points)}")
    if len(points) > MAX_POINTS:
        raise ZoneError(f"{where}: {len(points)} points; a zone takes at most {MAX_POINTS}")
    array = np.asarray(points, dtype=float)
    if not np.isfinite(array).all():
        raise ZoneError(f"{where}: coordinates must be finite numbers")
    if relative and ((array < 0) | (array > 1)).any():
        raise ZoneError(f"{where}: relative coordinates must lie between 0 and 1")
    if np.linalg.matrix_rank(array - array.mean(axis=0)) < 2:
        raise ZoneError(f"{where}: the polygon has no area (its points lie on a line)")
    if not shapely.LinearRing(array).is_simple:
        raise ZoneError(f"{where}: the polygon's edges cross each other (list the points in order around it)")


def parse_zone(text: str) -> Zone:
    """``NAME:x1,y1,x2,y2,...`` -> :class:`Zone` (the ``--zone`` option).

    Coordinates all between 0 and 1 are fractions of the frame (``door:0,0,0.5,0,0.5,1,0,1`` is
    the left half); otherwise pixels. A trailing ``%`` on every number gives percentages
    (``door:0%,0%,50%,0%,50%,100%,0%,100%``). Errors are one line naming the text.
    """
    where = f"--zone {text!r:.80}"
    name, colon, coordinates = str(text).partition(":")
    name = name.strip()
    if not colon or not coordinates.strip():
        raise ZoneError(f"{where}: expected NAME:x1,y1,x2,y2,... (at least 3 points)")
    items = [item.strip() for item in coordinates.split(",")]
    percent = [item.endswith("%") for item in items]
    if any(percent) and not all(percent):
        raise ZoneError(f"{where}: give every coordinate in % or none")
    try:
        numbers = [float(item.removesuffix("%")) for item in items]
    except ValueError:
        raise ZoneError(f"{where}: coordinates must be numbers separated by commas") from None
    if len(numbers) % 2:
        raise ZoneError(f"{where}: {len(numbers)} numbers; expected x,y pairs")
    if all(percent):
        numbers = [value / 100 for value in numbers]
    points = tuple(zip(numbers[0::2], numbers[1::2]))
    relative = all(percent) or all(0.0 <= value <= 1.0 for value in numbers)
    if not relative and all(abs(value) < 2.0 for value in numbers) and any(not value.is_integer() for value in numbers):
        # Fractions with a value past 0-1 (-0.1, 1.2): read as pixels they made a zone within two
        # pixels of the corner, counted 0 in silence.
        outside = next(value for value in numbers if not 0.0 <= value <= 1.0)
        raise ZoneError(
            f"{where}: {outside:g} lies outside 0-1, so these would be pixels and the zone would lie within "
            "2 pixels of the corner; give fractions between 0 and 1, percentages or pixels"
        )
    try:
        return Zone(name=name, points=points, relative=relative)
    except ZoneError as error:
        raise ZoneError(f"{where}: {str(error).split(': ', 1)[1]}") from None


def load_zones(path: str | Path) -> list[Zone]:
    """Zones from a TOML or JSON file (``--zones FILE``); every error names the file.

    TOML::

        [[zone]]
        name = "door"
        points = [[0, 0], [320, 0], [320, 480], [0, 480]]   # pixels
        [[zone]]
        name = "counter"
        points = [[0.5, 0.5], [1, 0.5], [1, 1], [0.5, 1]]
        relative = true                                      # fractions of width and height

    JSON: ``{"zones": [{"name": ..., "points": [[x, y], ...], "relative": false}, ...]}`` or the
    bare list. Without ``relative``, points all between 0 and 1 are relative, as on the command line.
    """
    source = Path(path)
    try:
        if not source.is_file():
            raise ZoneError(f"{source}: zones file not found" if not source.exists() else f"{source}: not a file")
        if source.stat().st_size > MAX_FILE_BYTES:
            raise ZoneError(f"{source}: larger than {MAX_FILE_BYTES // 1024} KiB, not a zones file")
        text = source.read_text(encoding="utf-8")
    except PermissionError:
        raise ZoneError(f"{source}: permission denied") from None
    except UnicodeDecodeError:
        raise ZoneError(f"{source}: not UTF-8 text, not a zones file") from None
    except OSError as error:
        raise ZoneError(f"{source}: cannot read ({error.strerror or error})") from None
    document: Any
    try:
        if source.suffix.lower() == ".json":
            document = json.loads(text)
        elif source.suffix.lower() == ".toml":
            document = tomllib.loads(text)
        else:
            raise ZoneError(f"{source}: expected a .toml or .json zones file")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ZoneError(f"{source}: not valid {source.suffix[1:].upper()} ({str(error).splitlines()[0]})") from None
    if isinstance(document, dict):
        entries = document.get("zone", document.get("zones"))
        if entries is None:
            raise ZoneError(f'{source}: no zones (expected [[zone]] tables or a "zones" list)')
    else:
        entries = document
    if not isinstance(entries, list) or not entries:
        raise ZoneError(f"{source}: expected a non-empty list of zones")
    return zones_from_entries(entries, str(source))


def zones_from_entries(entries: Sequence[Any], where: str) -> list[Zone]:
    """Zones from parsed tables (``{"name", "points", "relative"?}`` each), as a zones file or a
    configuration file holds them; errors start with ``where`` (the file) and the zone's number."""
    if not isinstance(entries, (list, tuple)):
        raise ZoneError(f"{where}: zones must be a list of tables with name and points")
    zones = [_zone_entry(entry, f"{where}: zone {number}") for number, entry in enumerate(entries, 1)]
    check_zone_names(zones, where)
    return zones


def _zone_entry(entry: Any, where: str) -> Zone:
    if not isinstance(entry, dict):
        raise ZoneError(f"{where}: expected a table with name and points")
    unknown = sorted(set(entry) - {"name", "points", "relative"})
    if unknown:
        raise ZoneError(f"{where}: unknown key {unknown[0]!r:.40} (zones take name, points, relative)")
    if "name" not in entry or "points" not in entry:
        raise ZoneError(f"{where}: needs a name and points")
    name, raw = entry["name"], entry["points"]
    where = f"{where} ({name!r:.40})"
    if not isinstance(raw, list) or not all(
        isinstance(point, list)
        and len(point) == 2
        and all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in point)
        for point in raw
    ):
        raise ZoneError(f"{where}: points must be a list of [x, y] number pairs")
    points = tuple((float(x), float(y)) for x, y in raw)
    relative = entry.get("relative", all(0.0 <= value <= 1.0 for point in points for value in point))
    try:
        return Zone(name=name, points=points, relative=relative)
    except ZoneError as error:
        raise ZoneError(f"{where}: {str(error).split(': ', 1)[1]}") from None


def check_zone_names(zones: Sequence[Zone], where: str = "zones") -> None:
    """ZoneError on a repeated name, or two zones whose output columns would be the same
    (a zone ``a_low`` and a zone ``a``'s interval column ``zone_a_low``)."""
    if len(zones) > MAX_ZONES:
        raise ZoneError(f"{where}: {len(zones)} zones; at most {MAX_ZONES}")
    seen: dict[str, str] = {}
    for zone in zones:
        for kind in ("count", "low", "high"):
            column = zone_column(kind, zone.name)
            if column in seen:
                other = seen[column]
                problem = "is given twice" if other == zone.name else f"clashes with zone {other!r} ({column})"
                raise ZoneError(f"{where}: zone name {zone.name!r} {problem}")
            seen[column] = zone.name


def combined_zones(zones_file: str | Path | None, zone_texts: Iterable[str] | None) -> list[Zone]:
    """The zones of ``--zones FILE`` and of each ``--zone`` together, names checked once."""
    zones = [] if zones_file is None else load_zones(zones_file)
    zones += [parse_zone(text) for text in zone_texts or ()]
    check_zone_names(zones, "--zones/--zone")
    return zones
