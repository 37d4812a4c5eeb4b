"""The count history of `counting serve`: SQLite in WAL mode, one row per camera, zone and frame.

Rows are queued by the camera threads and written by one writer thread that commits at least
every ``commit_interval`` seconds (0.25 s by default), so a process killed with ``kill -9``
loses at most the rows of the last commit interval: WAL keeps every committed transaction even
when the process dies (``synchronous=NORMAL`` risks only the last ones on a power cut, not on a
crash). The same thread deletes rows older than the retention. Readers open their own
connections (WAL lets them read while the writer writes).

The whole frame's count is the row with zone ``""``; ``familiarity`` is NULL where the model
gives none. ``unfamiliar`` and ``disputed`` are the frame's marks (count's table marks them "unlike
training" and "disputed"), on its zones' rows too: 0 or 1, read back as false or true; ``unfamiliar``
is NULL where the model gives no familiarity, and both are NULL in rows written before the history
kept them (an older database gains the two columns when it is opened). Averaged per time bucket,
a mark is the share of the bucket's frames that carry it.
"""

from __future__ import annotations

import csv
import io
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from counting.core.errors import CountingError

FRAME_ZONE = ""  # the zone name of the whole frame's row
COLUMNS = ("time", "camera", "zone", "count", "low", "high", "familiarity", "unfamiliar", "disputed")
# The marks: stored 0 or 1, read back as booleans (a row) or as the share of frames (a bucket).
MARKS = ("unfamiliar", "disputed")
# A history query returns at most this many buckets per series (the resolution is raised to fit).
MAX_POINTS = 5000
# And at most this many rows as JSON (the API says when it cut); the CSV export streams them all.
ROW_LIMIT = 50_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counts (
    time REAL NOT NULL,          -- Unix time (seconds) when the frame was counted
    camera TEXT NOT NULL,
    zone TEXT NOT NULL,          -- '' for the whole frame
    count REAL NOT NULL,
    low REAL,                    -- the calibrated interval, NULL for an uncalibrated model
    high REAL,
    familiarity REAL,            -- NULL where the model gives none
    unfamiliar INTEGER,          -- 1: below the model's familiarity threshold; NULL: no familiarity
    disputed INTEGER             -- 1: the crowd model's gate disputes the count
);
CREATE INDEX IF NOT EXISTS counts_by_camera_time ON counts (camera, zone, time);
CREATE INDEX IF NOT EXISTS counts_by_time ON counts (time);
"""


class HistoryError(CountingError):
    """The history database cannot be opened or written."""


@dataclass(frozen=True)
class Row:
    time: float
    camera: str
    zone: str
    count: float
    low: float | None = None
    high: float | None = None
    familiarity: float | None = None
    unfamiliar: bool | None = None
    disputed: bool = False


class History:
    """Append-only count history with retention; thread-safe ``add``, a writer thread commits."""

    def __init__(
        self,
        path: str | Path,
        retention_seconds: float | None = None,
        commit_interval: float = 0.25,
        prune_interval: float = 60.0,
    ) -> None:
        self.path = Path(path)
        self.retention_seconds = retention_seconds
        self.commit_interval = commit_interval
        self.prune_interval = prune_interval
        self.rows_written = 0
        self._pending: list[tuple] = []
        self._added = 0  # rows handed to add(), and rows committed: flush waits for them to meet
        self._committed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flushed = threading.Condition(self._lock)
        self._error: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a file where a folder should be, /proc, a full disk
            raise HistoryError(f"{self.path}: cannot make its folder ({error.strerror or error})") from None
        try:
            connection = self._connect()
            try:
                _prepare(connection, self.path)
            finally:
                connection.close()
        except sqlite3.Error as error:
            raise HistoryError(f"{self.path}: cannot open the history database ({error})") from None
        self._thread = threading.Thread(target=self._write_loop, name="history-writer", daemon=True)
        self._thread.start()

    def _connect(self, readonly: bool = False) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        if readonly:
            connection.execute("PRAGMA query_only=ON")
        return connection

    # ------------------------------------------------------------------ writing
    def add(self, rows: Sequence[Row]) -> None:
        with self._lock:
            self._pending.extend(
                (
                    r.time,
                    r.camera,
                    r.zone,
                    r.count,
                    r.low,
                    r.high,
                    r.familiarity,
                    None if r.unfamiliar is None else int(r.unfamiliar),
                    int(r.disputed),
                )
                for r in rows
            )
            self._added += len(rows)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every row added so far is committed."""
        deadline = time.monotonic() + timeout
        with self._lock:
            target = self._added
            while self._committed < target and self._thread.is_alive() and time.monotonic() < deadline:
                self._flushed.wait(timeout=0.05)

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is pending (waiting at most ``timeout`` seconds) and stop the writer; rows
        it could not write by then are lost, and counted in :attr:`unwritten`."""
        self.flush(timeout)
        self._stop.set()
        self._thread.join(timeout=10.0)

    @property
    def unwritten(self) -> int:
        """Rows handed to :meth:`add` that are not committed (after :meth:`close`: lost)."""
        with self._lock:
            return self._added - self._committed

    @property
    def error(self) -> str | None:
        """The last write error, if any (shown by the API; the writer keeps trying)."""
        return self._error

    def _write_loop(self) -> None:
        connection = self._connect()
        last_prune = 0.0
        try:
            while True:
                stopping = self._stop.wait(self.commit_interval)
                with self._lock:
                    batch, self._pending = self._pending, []
                failed = False
                if batch:
                    try:
                        with connection:  # one transaction, committed on leaving
                            connection.executemany(
                                f"INSERT INTO counts ({', '.join(COLUMNS)}) VALUES ({_PLACES})", batch
                            )
                        self.rows_written += len(batch)
                        self._error = None
                        with self._lock:
                            self._committed += len(batch)
                    except sqlite3.Error as error:
                        self._error = f"{self.path}: cannot write the history ({error})"
                        failed = True
                        with self._lock:  # kept for the next attempt, in order
                            self._pending[:0] = batch
                with self._lock:
                    self._flushed.notify_all()
                now = time.time()
                if self.retention_seconds is not None and now - last_prune >= self.prune_interval:
                    last_prune = now
                    try:
                        self.prune(now - self.retention_seconds, connection)
                    except sqlite3.Error as error:
                        self._error = f"{self.path}: cannot prune the history ({error})"
                if stopping:
                    with self._lock:
                        # Stopped: done once all is written, or when the last try after the
                        # stop failed too (the rows left are counted in `unwritten`).
                        if not self._pending or failed:
                            break
        finally:
            connection.close()

    def prune(self, before: float, connection: sqlite3.Connection | None = None) -> int:
        """Delete the rows counted before Unix time ``before``; the number deleted."""
        own = connection is None
        connection = connection or self._connect()
        try:
            with connection:
                return connection.execute("DELETE FROM counts WHERE time < ?", (before,)).rowcount
        finally:
            if own:
                connection.close()

    # ------------------------------------------------------------------ reading
    def query(
        self,
        camera: str | None = None,
        zone: str | None = None,
        start: float | None = None,
        end: float | None = None,
        resolution: float | None = None,
        points: int | None = None,
        limit: int | None = ROW_LIMIT,
    ) -> list[dict[str, Any]]:
        """Rows between ``start`` and ``end`` (Unix seconds), oldest first, at most ``limit``; with
        ``resolution`` (seconds) the means per camera, zone and time bucket, computed in SQL, each
        with its number of frames. ``points``: buckets wide enough for about that many per series
        over the rows actually in the range (a chart's width), never narrower than ``resolution``."""
        return list(self.rows(camera, zone, start, end, resolution, points, limit))

    def rows(
        self,
        camera: str | None = None,
        zone: str | None = None,
        start: float | None = None,
        end: float | None = None,
        resolution: float | None = None,
        points: int | None = None,
        limit: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """:meth:`query`'s rows one at a time from an open cursor (a CSV export of any length)."""
        where, params = _conditions(camera, zone, start, end)
        connection = self._connect(readonly=True)
        connection.row_factory = sqlite3.Row
        try:
            if points is not None:
                first, last = connection.execute(f"SELECT MIN(time), MAX(time) FROM counts{where}", params).fetchone()
                span = (last - first) if first is not None else 0.0
                resolution = max(resolution or 0.0, span / max(points, 1), 1e-3)
            if resolution is None:
                sql = f"SELECT {', '.join(COLUMNS)} FROM counts{where} ORDER BY time, camera, zone"
                arguments = list(params)
            else:
                resolution = self._fitting_resolution(connection, where, params, resolution)
                sql = (
                    "SELECT CAST(time / ? AS INTEGER) * ? AS time, camera, zone, AVG(count) AS count, "
                    "AVG(low) AS low, AVG(high) AS high, AVG(familiarity) AS familiarity, "
                    "AVG(unfamiliar) AS unfamiliar, AVG(disputed) AS disputed, COUNT(*) AS frames "
                    f"FROM counts{where} GROUP BY camera, zone, CAST(time / ? AS INTEGER) ORDER BY time, camera, zone"
                )
                arguments = [resolution, resolution, *params, resolution]
            if limit is not None:
                sql += " LIMIT ?"
                arguments.append(limit)
            cursor = connection.execute(sql, arguments)
            read = dict if resolution is not None else _with_marks
            while batch := cursor.fetchmany(1000):
                yield from (read(row) for row in batch)
        finally:
            connection.close()

    @staticmethod
    def _fitting_resolution(connection: sqlite3.Connection, where: str, params: list, resolution: float) -> float:
        """``resolution``, raised so that the query gives at most about MAX_POINTS buckets per series."""
        first, last = connection.execute(f"SELECT MIN(time), MAX(time) FROM counts{where}", params).fetchone()
        if first is None:
            return resolution
        return max(resolution, (last - first) / MAX_POINTS)

    def count_rows(self, camera: str | None = None) -> int:
        where, params = _conditions(camera, None, None, None)
        connection = self._connect(readonly=True)
        try:
            return int(connection.execute(f"SELECT COUNT(*) FROM counts{where}", params).fetchone()[0])
        finally:
            connection.close()

    def export_csv(self, **query: Any) -> Iterator[str]:
        """Every row of :meth:`query` (no limit) as CSV text, header first, 1000 lines at a time."""
        rows = self.rows(**query)
        downsampled = query.get("resolution") is not None or query.get("points") is not None
        fields = list(COLUMNS) + (["frames"] if downsampled else [])
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for k, row in enumerate(rows):
            writer.writerow(row)
            if k % 1000 == 999:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()


_PLACES = ", ".join("?" * len(COLUMNS))


def _prepare(connection: sqlite3.Connection, path: Path) -> None:
    """Make the table (or check the one there), and make sure the database can be written: a
    server that starts must be able to keep what it counts.

    A table of another shape is refused before anything in it changes (the retention would delete
    its rows). A database written before the history kept the marks gains their columns (NULL in
    its rows): a restart after an upgrade keeps every row and goes on writing."""
    present = tuple(row[1] for row in connection.execute("PRAGMA table_info(counts)"))
    if present and present not in (COLUMNS, COLUMNS[: -len(MARKS)]):
        raise HistoryError(
            f"{path}: its counts table has the columns {', '.join(present)}, not the history's "
            f"({', '.join(COLUMNS)}): another program's database? name a new file"
        )
    connection.executescript(_SCHEMA)
    with connection:
        for column in MARKS:
            if present and column not in present:  # a new table has them already
                connection.execute(f"ALTER TABLE counts ADD COLUMN {column} INTEGER")
    # Nothing above writes to a database whose table is already right; a read-only one would then
    # be accepted and every count lost. One write, rolled back, says so at once.
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("CREATE TABLE counting_write_probe (x)")
    finally:
        connection.rollback()


def _with_marks(row: sqlite3.Row) -> dict[str, Any]:
    """A stored row, its marks as booleans (None where the row has none)."""
    record = dict(row)
    for column in MARKS:
        if record[column] is not None:
            record[column] = bool(record[column])
    return record


def _conditions(camera: str | None, zone: str | None, start: float | None, end: float | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    for clause, value in (("camera = ?", camera), ("zone = ?", zone), ("time >= ?", start), ("time <= ?", end)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params
