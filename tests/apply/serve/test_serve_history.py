"""The SQLite history: rows, time ranges, server-side downsampling, retention, CSV, restarts."""

from __future__ import annotations

import csv
import io
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from counting.apply.serve.history import History, HistoryError, Row

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def history(tmp_path: Path):
    store = History(tmp_path / "h.sqlite", commit_interval=0.05)
    yield store
    store.close()


def frames(camera: str, start: float, n: int, step: float = 1.0) -> list[Row]:
    rows = []
    for k in range(n):
        rows.append(Row(start + k * step, camera, "", float(k), k - 1.0, k + 1.0))
        rows.append(Row(start + k * step, camera, "door", k / 2, None, None, 0.5))
    return rows


def test_rows_are_committed_in_wal_mode_and_read_by_range(history: History) -> None:
    history.add(frames("a", 1000.0, 10) + frames("b", 1000.0, 3))
    history.flush()
    connection = sqlite3.connect(history.path)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("SELECT COUNT(*) FROM counts").fetchone()[0] == 26
    connection.close()
    rows = history.query(camera="a", zone="", start=1002.0, end=1005.0)
    assert [row["time"] for row in rows] == [1002.0, 1003.0, 1004.0, 1005.0]
    assert [row["count"] for row in rows] == [2.0, 3.0, 4.0, 5.0]
    assert rows[0]["low"] == 1.0 and rows[0]["high"] == 3.0 and rows[0]["familiarity"] is None
    door = history.query(camera="a", zone="door", start=1009.0)
    assert door == [
        {
            "time": 1009.0,
            "camera": "a",
            "zone": "door",
            "count": 4.5,
            "low": None,
            "high": None,
            "familiarity": 0.5,
            "unfamiliar": None,
            "disputed": False,
        }
    ]


def test_a_resolution_averages_each_bucket_in_sql(history: History) -> None:
    history.add(frames("a", 1000.0, 10))  # counts 0..9 at 1000..1009
    history.flush()
    buckets = history.query(camera="a", zone="", resolution=4.0)
    # buckets of 4 s from t = 0: [1000, 1004) holds 0..3, [1004, 1008) 4..7, [1008, 1012) 8, 9
    assert [row["time"] for row in buckets] == [1000.0, 1004.0, 1008.0]
    assert [row["count"] for row in buckets] == [1.5, 5.5, 8.5]
    assert [row["frames"] for row in buckets] == [4, 4, 2]
    assert [row["low"] for row in buckets] == [0.5, 4.5, 7.5]


def test_a_long_range_is_thinned_to_at_most_the_point_limit(history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("counting.apply.serve.history.MAX_POINTS", 10)
    history.add(frames("a", 0.0, 200))
    history.flush()
    buckets = history.query(camera="a", zone="", resolution=1.0)
    assert len(buckets) <= 11
    assert sum(row["frames"] for row in buckets) == 200


def test_retention_deletes_only_old_rows(tmp_path: Path) -> None:
    store = History(tmp_path / "h.sqlite", retention_seconds=3600.0, commit_interval=0.05, prune_interval=0.0)
    import time

    now = time.time()
    store.add([Row(now - 7200, "a", "", 1.0), Row(now - 10, "a", "", 2.0)])
    store.flush()
    store.add([Row(now, "a", "", 3.0)])  # the next commit prunes
    store.flush()
    store.close()
    assert [row["count"] for row in History(tmp_path / "h.sqlite").query()] == [2.0, 3.0]


def test_the_history_survives_a_restart(tmp_path: Path) -> None:
    first = History(tmp_path / "h.sqlite", commit_interval=0.05)
    first.add(frames("a", 1000.0, 5))
    first.close()
    second = History(tmp_path / "h.sqlite", commit_interval=0.05)
    second.add(frames("a", 2000.0, 2))
    second.close()
    times = [row["time"] for row in second.query(zone="")]
    assert times == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0, 2000.0, 2001.0]


def test_csv_export_has_a_header_and_every_row(history: History) -> None:
    history.add(frames("a", 1000.0, 3))
    history.flush()
    text = "".join(history.export_csv(camera="a"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == [
        "time",
        "camera",
        "zone",
        "count",
        "low",
        "high",
        "familiarity",
        "unfamiliar",
        "disputed",
    ]
    assert len(rows) == 6 and rows[0]["zone"] == "" and rows[1]["zone"] == "door"
    assert float(rows[4]["count"]) == 2.0 and rows[1]["low"] == ""
    downsampled = list(csv.DictReader(io.StringIO("".join(history.export_csv(camera="a", resolution=10.0)))))
    assert [(row["zone"], float(row["count"]), row["frames"]) for row in downsampled] == [
        ("", 1.0, "3"),
        ("door", 0.5, "3"),
    ]


def test_points_sizes_the_buckets_to_the_rows_in_range(history: History) -> None:
    history.add(frames("a", 1000.0, 100))  # 99 s of rows
    history.flush()
    buckets = history.query(camera="a", zone="", points=10)
    assert 10 <= len(buckets) <= 11 and sum(row["frames"] for row in buckets) == 100
    assert len(history.query(camera="a", zone="", start=1090.0, points=300)) == 10  # a short range: every row
    assert len(history.query(camera="a", zone="", points=10, resolution=50.0)) == 2  # never finer than asked


def test_json_queries_stop_at_their_limit_and_the_csv_export_streams_every_row(history: History) -> None:
    history.add(frames("a", 0.0, 2500))  # 5000 rows
    history.flush()
    assert len(history.query(limit=1200)) == 1200
    lines = "".join(history.export_csv()).splitlines()
    assert len(lines) == 5001 and lines[-1].startswith("2499.0,a,door,1249.5")


def test_a_frames_marks_are_kept_read_back_as_booleans_and_averaged_as_shares(history: History) -> None:
    marked = [
        Row(1000.0, "a", "", 500.0, 300.0, 900.0, 0.004, unfamiliar=True, disputed=True),
        Row(1001.0, "a", "", 510.0, 310.0, 910.0, 0.02, unfamiliar=False, disputed=False),
        Row(1002.0, "a", "", 12.0),  # a model without familiarity: unfamiliar unknown
    ]
    history.add(marked)
    history.flush()
    rows = history.query(camera="a")
    assert [(row["unfamiliar"], row["disputed"]) for row in rows] == [(True, True), (False, False), (None, False)]
    (bucket,) = history.query(camera="a", resolution=10.0)
    assert bucket["disputed"] == pytest.approx(1 / 3) and bucket["unfamiliar"] == pytest.approx(1 / 2)
    text = "".join(history.export_csv(camera="a"))
    assert [(row["unfamiliar"], row["disputed"]) for row in csv.DictReader(io.StringIO(text))] == [
        ("True", "True"),
        ("False", "False"),
        ("", "False"),
    ]


def test_a_database_written_before_the_marks_gains_their_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    connection = sqlite3.connect(path)  # the schema of the history before it kept the marks
    connection.execute(
        "CREATE TABLE counts (time REAL NOT NULL, camera TEXT NOT NULL, zone TEXT NOT NULL, count REAL NOT NULL, "
        "low REAL, high REAL, familiarity REAL)"
    )
    connection.execute("INSERT INTO counts VALUES (1000.0, 'a', '', 7.0, 5.0, 9.0, 0.3)")
    connection.commit()
    connection.close()
    store = History(path, commit_interval=0.05)
    try:
        store.add([Row(1001.0, "a", "", 8.0, 6.0, 10.0, 0.003, unfamiliar=True, disputed=False)])
        store.flush()
        rows = store.query(camera="a")
    finally:
        store.close()
    assert [(row["count"], row["unfamiliar"], row["disputed"]) for row in rows] == [
        (7.0, None, None),
        (8.0, True, False),
    ]


def test_a_table_of_another_shape_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE counts (time REAL, camera TEXT, zone TEXT, count REAL, note TEXT NOT NULL)")
    connection.execute("INSERT INTO counts VALUES (1.0, 'a', '', 3.0, 'kept')")  # 1970: the retention's prey
    connection.commit()
    connection.close()
    with pytest.raises(
        HistoryError, match=r"other\.sqlite: its counts table has the columns time, camera, zone, count, note"
    ):
        History(path, retention_seconds=60.0)
    connection = sqlite3.connect(path)
    columns = [row[1] for row in connection.execute("PRAGMA table_info(counts)")]
    assert columns == ["time", "camera", "zone", "count", "note"]
    assert connection.execute("SELECT note FROM counts").fetchall() == [("kept",)]
    connection.close()


def test_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a file, not a folder\n")
    with pytest.raises(HistoryError, match=r"notes\.txt/h\.sqlite: cannot make its folder"):
        History(tmp_path / "notes.txt" / "h.sqlite")


def test_a_read_only_database_is_refused_at_start_not_found_empty_at_the_end(tmp_path: Path) -> None:
    """Its table already right, nothing at start wrote to it: it was accepted, and every count lost."""
    store = History(tmp_path / "h.sqlite", commit_interval=0.05)
    store.add(frames("a", 1000.0, 2))
    store.close()
    for name in ("h.sqlite", "h.sqlite-wal", "h.sqlite-shm"):
        if (tmp_path / name).exists():
            (tmp_path / name).chmod(0o444)
    code = (
        "import sys\n"
        "from counting.apply.serve.history import History, HistoryError\n"
        "try:\n    History(sys.argv[1])\nexcept HistoryError as error:\n    print(error)\n"
    )
    command = [sys.executable, "-c", code, str(tmp_path / "h.sqlite")]
    if os.geteuid() == 0:  # root writes read-only files: drop the capabilities that let it
        if shutil.which("setpriv") is None:
            pytest.skip("root ignores file permissions and setpriv is missing")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", *command]
    process = subprocess.run(
        command, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert process.returncode == 0, process.stderr
    assert "h.sqlite: cannot open the history database (attempt to write a readonly database)" in process.stdout


def test_rows_that_could_not_be_written_are_counted(tmp_path: Path) -> None:
    store = History(tmp_path / "h.sqlite", commit_interval=0.05)
    store.add(frames("a", 1000.0, 1))
    store.flush()
    assert store.unwritten == 0
    connection = sqlite3.connect(store.path)
    connection.execute("DROP TABLE counts")  # the database goes wrong under the server
    connection.commit()
    connection.close()
    store.add(frames("a", 2000.0, 3))
    store.close(timeout=1.0)
    assert store.unwritten == 6 and "cannot write the history" in (store.error or "")
    assert not store._thread.is_alive()  # the writer gave up after its last try, not kept retrying
