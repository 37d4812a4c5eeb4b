"""An interrupted `counting count` keeps the rows it counted (issue 49).

Was: 800 frames stopped by Ctrl-C after 20 s (SIGTERM after 60 s) ended with "long2.csv was not
created", exit 130 (143): every row counted was lost, and count keeps no cache by default. Now
the rows counted so far are written to ``--csv`` and ``--json`` (whole, valid files of those
rows) with one line saying how many of how many pictures they hold; a file that existed before
is left as it was when nothing was counted yet.

The signal is real, sent to a real ``counting count`` process once it says (a line the test
adds after each ``count_paths`` call) that a first part of the pictures is counted.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import DEFAULT_MODEL, REPO_ROOT, make_image

from counting.apply.chunks import count_in_chunks, join_results
from counting.model.counting_model import CountResult

PICTURES = 400
BATCH = 16
MARK = "test: pictures counted before this part: "
# Says on stderr, as each count_paths call after the first starts, how many pictures the calls
# before it counted: by then the command has been handed their rows (the first call's own end
# would be too early: a signal sent at once can land before the hand-over).
MARK_EACH_PART = f"""
from counting.model.counting_model import CountingModel
_count_paths, _done = CountingModel.count_paths, [0]
def _marked(self, paths, *args, **kwargs):
    if _done[0]:
        sys.stderr.write("{MARK}%d\\n" % _done[0])
        sys.stderr.flush()
    result = _count_paths(self, paths, *args, **kwargs)
    _done[0] += len(result.sources)
    return result
CountingModel.count_paths = _marked
"""
# Ctrl-C at the start of the first count_paths call: nothing is counted yet.
INTERRUPT_FIRST_PART = """
import signal, time
from counting.model.counting_model import CountingModel
def _interrupted(self, paths, *args, **kwargs):
    signal.raise_signal(signal.SIGINT)
    time.sleep(60)  # not reached: KeyboardInterrupt is raised as the signal returns
CountingModel.count_paths = _interrupted
"""


def _start(args: list[object], preamble: str) -> subprocess.Popen:
    code = f"import sys\n{preamble}\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
    # Unbuffered bytes: the lines read before the signal are read one by one, so nothing the
    # process writes after them sits in a reader's buffer that communicate() would not see.
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        cwd=str(REPO_ROOT),
    )


def _interrupt_after_first_part(process: subprocess.Popen, signum: int) -> tuple[int, str, str]:
    """Send ``signum`` once the process says a first part is counted and handed over:
    ``(pictures counted by then, stdout, stderr)``."""
    seen = []
    for raw in process.stderr:  # blocks until a line, or the end (the process died)
        line = raw.decode("utf-8", "replace")
        seen.append(line)
        if line.startswith(MARK):
            counted = int(line[len(MARK) :])
            break
    else:
        process.wait(timeout=60)
        pytest.fail(f"the run ended before a first part was counted: {''.join(seen)[-2000:]}")
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=300)
    return counted, stdout.decode(), "".join(seen) + stderr.decode()


@pytest.fixture
def many_pictures(tmp_path: Path) -> Path:
    folder = tmp_path / "pictures"
    folder.mkdir()
    for index in range(PICTURES):
        make_image(folder / f"p{index:04d}.png", seed=index)
    return folder


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "status", "how"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_an_interrupted_count_keeps_the_rows_it_counted(
    tmp_path: Path, many_pictures: Path, signum: int, status: int, how: str
) -> None:
    out_csv, out_json = tmp_path / "long.csv", tmp_path / "long.json"
    out_csv.write_text("an earlier run\n")
    args = ["count", many_pictures, "-m", DEFAULT_MODEL, "--no-cache", "--batch-size", BATCH]
    process = _start([*args, "--csv", out_csv, "--json", out_json, "-q"], MARK_EACH_PART)
    counted, _, stderr = _interrupt_after_first_part(process, signum)

    assert process.returncode == status, stderr
    assert "Traceback" not in stderr
    with open(out_csv, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert reader.fieldnames[:2] == ["image", "count"]
    assert counted <= len(rows) < PICTURES  # what was counted before the signal, and not more than asked
    names = [Path(row["image"]).name for row in rows]
    assert names == [f"p{index:04d}.png" for index in range(len(rows))]  # the first pictures, in order
    assert all(np.isfinite(float(row["count"])) for row in rows)
    document = json.loads(out_json.read_text())
    assert [Path(row["image"]).name for row in document["images"]] == names
    assert document["incomplete"] == {"counted": len(rows), "pictures": PICTURES}
    assert _error_lines(stderr) == [
        f"error: {how}: {out_csv} and {out_json} hold {len(rows)} of {PICTURES} pictures (incomplete)"
    ]
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


@pytest.mark.slow
def test_an_interrupt_before_any_row_keeps_the_earlier_file(tmp_path: Path, many_pictures: Path) -> None:
    out_csv, out_json = tmp_path / "long.csv", tmp_path / "long.json"
    out_csv.write_text("an earlier run\n")
    args = ["count", many_pictures, "-m", DEFAULT_MODEL, "--no-cache", "--csv", out_csv, "--json", out_json]
    process = _start(args, INTERRUPT_FIRST_PART)
    stderr = process.communicate(timeout=300)[1].decode()
    assert process.returncode == 130, stderr
    assert _error_lines(stderr) == [f"error: interrupted: {out_csv} is unchanged; {out_json} was not created"]
    assert out_csv.read_text() == "an earlier run\n"
    assert not out_json.exists()


@pytest.mark.slow
def test_an_interrupted_count_in_zones_keeps_the_zone_columns(tmp_path: Path, mall_root: Path) -> None:
    frames = sorted((mall_root / "frames").glob("seq_*.jpg"))[:40]
    out_csv = tmp_path / "zones.csv"
    args = ["count", *frames, "-m", REPO_ROOT / "models" / "mall-accurate.npz", "--no-cache", "--batch-size", 4]
    drawn = tmp_path / "drawn"  # drawn once the counting ends: the line says none was
    process = _start(
        [*args, "--zone", "left:0,0,0.5,0,0.5,1,0,1", "--csv", out_csv, "--annotated", drawn, "-q"], MARK_EACH_PART
    )
    counted, _, stderr = _interrupt_after_first_part(process, signal.SIGINT)

    assert process.returncode == 130, stderr
    with open(out_csv, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert {"count", "zone_left", "zone_left_low", "zone_left_high"} <= set(reader.fieldnames)
    assert counted <= len(rows) < len(frames)
    assert [row["image"] for row in rows] == [str(frame) for frame in frames[: len(rows)]]
    assert all(0 <= float(row["zone_left"]) <= float(row["count"]) + 1e-3 for row in rows)
    assert _error_lines(stderr) == [
        f"error: interrupted: {out_csv} holds {len(rows)} of {len(frames)} pictures (incomplete); "
        f"no photo was drawn into {drawn}"
    ]


# -- the chunks a kept run is counted in ---------------------------------------------------------
class _Counter:
    """count_paths of a fake model: the count of ``img-K.jpg`` is K; records each call's size."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def count_paths(self, paths: list[str], **options: object) -> CountResult:
        self.calls.append(len(paths))
        counts = np.array([float(Path(path).stem.split("-")[1]) for path in paths])
        ok = np.ones(len(paths), dtype=bool)
        return CountResult(sources=list(paths), counts=counts, low=counts - 1, high=counts + 1, ok=ok, errors={})


def test_a_kept_run_hands_each_chunk_over_as_it_is_counted() -> None:
    model, parts = _Counter(), []
    paths = [f"img-{k}.jpg" for k in range(200)]  # fits one call: a kept run is chunked all the same
    result = count_in_chunks(model, paths, batch_size=BATCH, on_part=lambda part, records: parts.append(part))
    assert model.calls[0] == BATCH  # the first chunk is one batch: a Ctrl-C soon after keeps it
    assert all(size % BATCH == 0 for size in model.calls[:-1]) and sum(model.calls) == len(paths)
    assert [len(part.sources) for part in parts] == model.calls
    assert result.sources == paths
    np.testing.assert_array_equal(result.counts, np.arange(200.0))
    np.testing.assert_array_equal(join_results(parts).high, np.arange(200.0) + 1)


def test_join_of_no_part_is_an_empty_result() -> None:
    empty = join_results([])
    assert empty.sources == [] and len(empty.counts) == 0 and len(empty.ok) == 0 and empty.low is None


@pytest.mark.slow
def test_a_kept_run_counts_what_one_call_counts(mall_root: Path) -> None:
    """Chunks of any length are whole batches and whole density chunks: each picture goes through
    the network and a density model's heads in the company one call gives it, to the last bit."""
    from counting.model.counting_model import load_model

    model = load_model(REPO_ROOT / "models" / "mall-accurate.npz")
    frames = [str(frame) for frame in sorted((mall_root / "frames").glob("seq_*.jpg"))[:28]]
    whole = model.count_paths(frames, batch_size=4)
    parts: list[CountResult] = []
    kept = count_in_chunks(model, frames, batch_size=4, on_part=lambda part, records: parts.append(part))
    assert len(parts[0].sources) == 8  # one unit: two batches of 4, one density chunk of 8
    assert all(len(part.sources) % 8 == 0 for part in parts[:-1])
    assert kept.sources == whole.sources
    np.testing.assert_array_equal(kept.counts, whole.counts)
    np.testing.assert_array_equal(kept.low, whole.low)
    np.testing.assert_array_equal(kept.high, whole.high)
