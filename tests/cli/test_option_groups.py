"""Options declared once as a group (counting/cli/option_groups.py): evaluate, report and
familiarize read pictures with one PictureRun; evaluate and report evaluate one EvaluationSplit."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest

from counting.cli.option_groups import EvaluationSplit, PictureRun, with_groups
from counting.core.errors import CountingError


@dataclass(frozen=True)
class Pair:
    first: int = 1
    second: str = "b"


def command(name: str, pair: Pair = Pair(), last: int = 0) -> tuple:
    return name, pair, last


def clashing(first: int = 0, pair: Pair = Pair()) -> None:
    return None


def test_a_group_is_spread_in_place_and_handed_back_as_one_object() -> None:
    grouped = with_groups(command)
    parameters = inspect.signature(grouped).parameters
    assert list(parameters) == ["name", "first", "second", "last"]
    assert parameters["second"].default == "b" and parameters["first"].annotation is int
    assert grouped(name="n", first=7, second="z", last=3) == ("n", Pair(7, "z"), 3)


def test_an_option_named_twice_is_refused_when_the_command_is_declared() -> None:
    with pytest.raises(TypeError, match="clashing"):
        with_groups(clashing)


def test_the_groups_hold_the_shared_run_and_split_options() -> None:
    assert [name for name in inspect.signature(PictureRun).parameters] == [
        "cache_dir",
        "no_cache",
        "batch_size",
        "progress",
        "quiet",
        "runtime",
        "threads",
    ]
    assert PictureRun(progress=True, quiet=True).shows_progress is False
    assert PictureRun().shows_progress is True
    assert EvaluationSplit().split == "standard" and EvaluationSplit().smooth == 5


def test_evaluate_and_report_evaluate_the_same_split_the_same_way(runner, monkeypatch, tmp_path: Path) -> None:
    import counting.cli.evaluate
    import counting.cli.report
    from counting.cli.app import app

    seen = {}

    def capture(name: str):
        def evaluate_on_test_split(model, dataset, root, test, run, cache):
            seen[name] = (dataset, root, test, run)
            raise CountingError("stopped by the test")

        return evaluate_on_test_split

    root = tmp_path / "data"
    root.mkdir()
    options = ["-d", "mall", "-r", str(root), "--split", "train=1-10,test=11-20", "--smooth", "3"]
    options += ["--batch-size", "4", "--no-cache", "--threads", "1", "-q"]
    for module in (counting.cli.evaluate, counting.cli.report):
        monkeypatch.setattr(module, "load_model_option", lambda path: object())
        monkeypatch.setattr(module, "evaluate_on_test_split", capture(module.__name__.rsplit(".", 1)[1]))
    assert runner.invoke(app, ["evaluate", *options]).exit_code == 1
    assert runner.invoke(app, ["report", "-o", str(tmp_path / "report"), *options]).exit_code == 1
    assert seen["evaluate"] == seen["report"]
    dataset, given_root, test, run = seen["evaluate"]
    assert (dataset, given_root) == ("mall", root)
    assert test == EvaluationSplit(split="train=1-10,test=11-20", smooth=3)
    assert run == PictureRun(no_cache=True, batch_size=4, quiet=True, threads=1)
