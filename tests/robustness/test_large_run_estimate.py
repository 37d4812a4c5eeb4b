"""A large `count` run says near its start how long it will take (issue 49).

Ten thousand 16x16 pictures took over 15 minutes with the default model and no word: each is one
pass at the model's input size. The run now says "counting 10,000 pictures: about 16 min at 10 a
second" on stderr, from the rate of its own parts after the first (which also loads the network).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from robust_helpers import make_image

import counting.cli.run_estimate as run_estimate
from counting.cli.run_estimate import RunEstimate, duration_text, estimate_line


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def part(pictures: int) -> SimpleNamespace:
    return SimpleNamespace(sources=[f"{k}.png" for k in range(pictures)])


def test_the_estimate_is_the_rate_after_the_first_part() -> None:
    said: list[str] = []
    clock = Clock()
    parts: list[int] = []
    on_part = RunEstimate(10_000, said.append, clock).wrap(lambda result, records: parts.append(len(result.sources)))
    clock.now = 9.0  # the first batch: 16 pictures and the network's loading
    on_part(part(16), None)
    assert said == []
    clock.now = 15.4  # 64 more in 6.4 s: 10 a second
    on_part(part(64), None)
    assert said == ["counting 10,000 pictures: about 17 min at 10 a second"]
    clock.now = 100.0
    on_part(part(256), None)
    assert len(said) == 1  # once a run
    assert parts == [16, 64, 256]  # the run's own callback still gets every part


def test_small_or_short_runs_say_nothing() -> None:
    for total, seconds in ((999, 1000.0), (5000, 0.5)):
        said: list[str] = []
        clock = Clock()
        estimate = RunEstimate(total, said.append, clock)
        estimate.add(16)
        clock.now = seconds
        estimate.add(64)
        clock.now += 1000
        estimate.add(64)
        assert said == [], (total, seconds)


def test_durations_read_as_estimates() -> None:
    assert [duration_text(s) for s in (0.2, 45, 89.6, 960, 7140, 7500)] == [
        "1 s",
        "45 s",
        "90 s",
        "16 min",
        "119 min",
        "2 h 5 min",
    ]
    assert estimate_line(10_000, 10.4) == "counting 10,000 pictures: about 16 min at 10 a second"
    assert estimate_line(2_000, 0.74) == "counting 2,000 pictures: about 45 min at 0.74 a second"


def test_count_of_a_folder_says_its_estimate_on_stderr(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    for k in range(12):
        make_image(folder / f"{k:02d}.png", size=(16, 16), seed=k)
    # This folder stands in for a large one: the thresholds are lowered, not the pictures multiplied.
    monkeypatch.setattr(run_estimate, "ESTIMATE_MIN_PICTURES", 10)
    monkeypatch.setattr(run_estimate, "ESTIMATE_MIN_SECONDS", 0.0)
    result = cli("count", folder, "--batch-size", "4", "--csv", tmp_path / "counts.csv", "--no-progress")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("counting 12 pictures: about ")]
    assert len(lines) == 1 and lines[0].endswith(" a second"), result.stderr
    assert "counting 12 pictures" not in result.stdout
    quiet = cli("count", folder, "--batch-size", "4", "--csv", tmp_path / "again.csv", "--no-progress", "-q")
    assert quiet.exit_code == 0 and "pictures: about" not in quiet.stderr
