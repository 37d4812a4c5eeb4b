"""Hostile use of the conv density head trained as an ensemble (``train --density-head --head-kind
conv``: one head per fold of the train images, all kept in one model file, format version 2).

Training is made quick by replacing ``conv_training.DEFAULT_SETTINGS`` (3 folds, 40 steps, 8 wide);
one tiny ensemble is trained once on Mall frames 1-48 through the CLI and then attacked: hand-edited
model files, too few train images, Ctrl-C in the middle of the heads, every command that reads it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import (
    assert_one_error,
    assert_process_one_error,
    assert_unchanged,
    model_parts,
    no_temporary_files,
    run_cli_process,
    snapshot,
    write_model,
)

from counting.heads.density.conv import training as conv_training
from counting.heads.density.conv.fitting import ConvSettings
from counting.heads.density.conv.head import ConvDensityHead, parameter_shapes
from counting.heads.density.conv.persistence import conv_head_from_document, conv_head_to_document
from counting.heads.density.persistence import DensityHeadError
from counting.model.counting_model import load_model

QUICK = ConvSettings(width=8, depth=1, batch=4, max_steps=40, eval_every=20, ema=0.9, keep="last", folds=3)
QUICK_SOURCE = (
    "from counting.heads.density.conv import training as conv_training\n"
    "from counting.heads.density.conv.fitting import ConvSettings\n"
    "conv_training.DEFAULT_SETTINGS = ConvSettings(width=8, depth=1, batch=4, max_steps={steps}, eval_every=20, "
    "ema=0.9, keep='last', folds=3)\n"
)
SPLIT = "train=1-48,test=49-56"


def train_arguments(root: Path, out: Path, cache: Path, split: str = SPLIT) -> list[object]:
    return [
        "train",
        "-d",
        "mall",
        "-r",
        root,
        "--split",
        split,
        "--input-size",
        160,
        "--centers",
        4,
        "--epochs",
        3,
        "--density-head",
        "--head-kind",
        "conv",
        "--cache-dir",
        cache,
        "--no-progress",
        "-o",
        out,
    ]


@pytest.fixture(scope="module")
def ensemble_file(mall_root: Path, session_cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-member conv ensemble trained through the CLI on Mall frames 1-48."""
    from typer.testing import CliRunner

    from counting.cli.app import app

    out = tmp_path_factory.mktemp("conv-ensemble") / "ensemble.npz"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv_training, "DEFAULT_SETTINGS", QUICK)
        result = CliRunner().invoke(app, [str(arg) for arg in train_arguments(mall_root, out, session_cache_dir)])
    assert result.exit_code == 0, result.output
    assert "3 heads, out-of-fold count MAE" in result.output
    return out


def head_section(path: Path) -> dict:
    return model_parts(path)[1]["user_metadata"]["density_head"]


def edited(source: Path, target: Path, change: Callable[[dict], object]) -> Path:
    arrays, document = model_parts(source)
    change(document["user_metadata"]["density_head"])
    return write_model(target, arrays, document)


def set_values(entry: dict, value: float) -> None:
    array = np.frombuffer(base64.b64decode(entry["float64_base64"]), "<f8").copy()
    array[:] = value
    entry["float64_base64"] = base64.b64encode(array.tobytes()).decode()


def first_value_nan(entry: dict) -> None:
    array = np.frombuffer(base64.b64decode(entry["float64_base64"]), "<f8").copy()
    array[0] = np.nan
    entry["float64_base64"] = base64.b64encode(array.tobytes()).decode()


def drop_members(head: dict) -> None:
    """What a single head (ConvSettings folds=1) writes: format version 1, no members."""
    head.pop("members")
    head["format_version"] = 1
    for name in [name for name in head["arrays"] if name.startswith("member")]:
        del head["arrays"][name]


# ---------------------------------------------------------------- the file section, no model


def random_head(channels: int = 5, width: int = 4, depth: int = 1, seed: int = 0, members: int = 1) -> ConvDensityHead:
    rng = np.random.default_rng(seed)

    def weights() -> list[np.ndarray]:
        return [rng.normal(scale=0.3, size=shape) for shape in parameter_shapes(channels, width, depth)]

    return ConvDensityHead(
        layers=("block4",),
        width=width,
        depth=depth,
        x_mean=rng.normal(size=channels),
        x_scale=rng.uniform(0.5, 2.0, channels),
        weights=weights(),
        more_weights=[weights() for _ in range(members - 1)],
        output_scale=10.0,
    )


def test_an_ensemble_assembled_after_counting_counts_with_every_member() -> None:
    """conv_training and scripts/conv_density_study.py assign ``more_weights`` to the first
    member's head; the study counted with that head first, so its speed was one network's."""
    first, second = random_head(seed=0), random_head(seed=1)
    second.x_mean, second.x_scale = first.x_mean, first.x_scale
    maps = np.random.default_rng(2).normal(size=(2, 5, 6, 7))
    alone = first.density(maps)
    expected = (alone + second.density(maps)) / 2
    first.more_weights = [second.weights]
    assert len(first.networks()) == 2
    np.testing.assert_allclose(first.density(maps), expected, rtol=1e-6, atol=1e-9)
    # replacing a member's array (not only the list) is seen too
    first.weights = [array * 2 for array in first.weights]
    assert not np.allclose(first.density(maps), expected)
    first.more_weights = []
    assert len(first.networks()) == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format_version=True), "format version True"),
        (lambda d: d.update(format_version=1), "3 members need format version 2"),
        (lambda d: d.update(format_version=5), "format version 5"),
        (lambda d: set_values(d["arrays"]["member1_weight2"], 1e39), "member1_weight2 overflows float32"),
        (lambda d: set_values(d["arrays"]["x_scale"], 1e-300), "weight0 over x_scale and x_mean overflows float32"),
        (lambda d: set_values(d["arrays"]["x_mean"], 1e300), "weight1 over x_scale and x_mean overflows float32"),
        # Each array fits in float32; their product inside the network does not.
        (
            lambda d: [set_values(d["arrays"][f"member2_weight{n}"], 1e25) for n in (0, 2, 4)],
            "member 3 of 3: its weights overflow inside the network",
        ),
    ],
)
def test_sections_a_reader_would_misread_are_one_line_errors(edit, message: str) -> None:
    document = json.loads(json.dumps(conv_head_to_document(random_head(members=3))))
    edit(document)
    with pytest.raises(DensityHeadError, match=message) as caught:
        conv_head_from_document(document, "model.npz")
    assert str(caught.value).startswith("model.npz: conv density head:") and "\n" not in str(caught.value)


def test_a_single_head_section_with_members_1_still_reads() -> None:
    document = conv_head_to_document(random_head())
    assert document["format_version"] == 1
    assert len(conv_head_from_document(document | {"members": 1}, "m.npz").members) == 1
    assert len(conv_head_from_document(document | {"format_version": 2}, "m.npz").members) == 1


# ---------------------------------------------------------------- hand-edited model files, CLI


DAMAGE = {
    "members too many": (lambda d: d.update(members=4), "missing or unknown"),
    "members too few": (lambda d: d.update(members=2), "missing or unknown"),
    "members negative": (lambda d: d.update(members=-1), "members must be an integer from 1 to 64"),
    "members huge": (lambda d: d.update(members=10**30), "members must be an integer from 1 to 64"),
    "members bool": (lambda d: d.update(members=True), "members must be an integer from 1 to 64"),
    "members string": (lambda d: d.update(members="3"), "members must be an integer from 1 to 64"),
    "members removed": (lambda d: d.pop("members"), "missing or unknown"),
    "member array missing": (lambda d: d["arrays"].pop("member2_weight0"), "['member2_weight0'] missing"),
    "member array extra": (
        lambda d: d["arrays"].update(member3_weight0=d["arrays"]["weight0"]),
        "['member3_weight0'] missing or unknown",
    ),
    "member array NaN": (lambda d: first_value_nan(d["arrays"]["member1_weight2"]), "must hold finite floats"),
    "member array wrong shape": (
        lambda d: d["arrays"].update(member2_weight1=d["arrays"]["weight2"]),
        "member2_weight1 has shape",
    ),
    "member array damaged": (
        lambda d: d["arrays"]["member1_weight1"].update(float64_base64="!!"),
        "array 'member1_weight1' is damaged",
    ),
    "version 1 with members": (lambda d: d.update(format_version=1), "3 members need format version 2"),
    "version 5": (lambda d: d.update(format_version=5), "format version 5 is not one this version reads"),
    "version bool": (lambda d: d.update(format_version=True), "format version True"),
    "member overflows float32": (
        lambda d: set_values(d["arrays"]["member1_weight4"], 1e39),
        "member1_weight4 overflows float32",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_hand_edited_ensemble_files_are_one_line_errors(
    case: str, ensemble_file: Path, tmp_path: Path, cli, mall_root: Path
) -> None:
    change, message = DAMAGE[case]
    bad = edited(ensemble_file, tmp_path / "bad.npz", change)
    out = tmp_path / "counts.json"
    result = cli("count", "-m", bad, mall_root / "frames" / "seq_000050.jpg", "--json", out)
    line = assert_one_error(result, str(bad), "conv density head", message)
    assert line.startswith("error:")
    assert not out.exists()


# ---------------------------------------------------------------- an ensemble in every command


def test_an_ensemble_model_file_keeps_its_members(ensemble_file: Path) -> None:
    section = head_section(ensemble_file)
    assert section["format_version"] == 2 and section["members"] == 3
    assert section["settings"]["members"] == 3 and section["settings"]["training"]["folds"] == 3
    model = load_model(ensemble_file)
    assert len(model.density_head.members) == 3
    assert model.dataset["n_train"] == 48  # the AGP learns from every train frame's out-of-fold sums


def test_an_ensemble_counts_evaluates_reports_and_annotates(
    ensemble_file: Path, mall_root: Path, session_cache_dir: Path, tmp_path: Path, cli
) -> None:
    frames = [mall_root / "frames" / f"seq_{index:06d}.jpg" for index in (50, 51)]
    counts = tmp_path / "counts.json"
    result = cli("count", "-m", ensemble_file, *frames, "--json", counts, "--cache-dir", session_cache_dir)
    assert result.exit_code == 0, result.output
    rows = json.loads(counts.read_text())["images"]
    assert len(rows) == 2 and all(np.isfinite(row["count"]) and row["low"] <= row["high"] for row in rows)

    metrics = tmp_path / "evaluation.json"
    dataset = ["-d", "mall", "-r", mall_root, "--split", SPLIT]
    result = cli("evaluate", "-m", ensemble_file, *dataset, "--json", metrics, "--cache-dir", session_cache_dir)
    assert result.exit_code == 0, result.output
    assert metrics.exists()

    report = tmp_path / "report"
    result = cli("report", "-m", ensemble_file, "-o", report, *dataset, "--cache-dir", session_cache_dir)
    assert result.exit_code == 0, result.output
    assert (report / "report.html").exists() and (report / "density.png").exists()

    import cv2

    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5, (640, 480))
    for index in range(49, 53):
        writer.write(cv2.imread(str(mall_root / "frames" / f"seq_{index:06d}.jpg")))
    writer.release()
    annotated = tmp_path / "annotated.avi"
    result = cli("video", "-m", ensemble_file, video, "--annotated", annotated, "-q")
    assert result.exit_code == 0, result.output
    capture = cv2.VideoCapture(str(annotated))
    read = 0
    while capture.read()[0]:
        read += 1
    assert read == 4


def test_a_version_1_single_head_file_still_counts(ensemble_file: Path, mall_root: Path, tmp_path: Path, cli) -> None:
    single = edited(ensemble_file, tmp_path / "single.npz", drop_members)
    assert "members" not in head_section(single) and head_section(single)["format_version"] == 1
    assert len(load_model(single).density_head.members) == 1
    out = tmp_path / "counts.json"
    result = cli("count", "-m", single, mall_root / "frames" / "seq_000050.jpg", "--json", out)
    assert result.exit_code == 0, result.output
    assert np.isfinite(json.loads(out.read_text())["images"][0]["count"])


# ---------------------------------------------------------------- training that must not start or must stop


def test_too_few_train_frames_for_the_folds_is_one_line_and_keeps_the_old_model(
    ensemble_file: Path, mall_root: Path, session_cache_dir: Path, tmp_path: Path, cli, monkeypatch
) -> None:
    monkeypatch.setattr(conv_training, "DEFAULT_SETTINGS", QUICK)
    out = tmp_path / "model.npz"
    out.write_bytes(ensemble_file.read_bytes())
    before = snapshot(out)
    # 11 train frames: fewer than 16, and fewer than 4 per fold of 3
    result = cli(*train_arguments(mall_root, out, session_cache_dir, split="train=1-11,test=49-56"))
    assert_one_error(result, str(mall_root), "needs at least 16 train images", "11 given, 3 folds")
    assert_unchanged(before)
    assert no_temporary_files(tmp_path)


@pytest.mark.slow
def test_ctrl_c_between_ensemble_members_exits_130_and_keeps_the_model(
    ensemble_file: Path, mall_root: Path, session_cache_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "model.npz"
    out.write_bytes(ensemble_file.read_bytes())
    before = snapshot(out)
    # A real SIGINT, sent while the second member trains.
    preamble = QUICK_SOURCE.format(steps=400) + (
        "import os, signal\n"
        "from counting.heads.density.conv import fitting as conv_fitting\n"
        "calls = []\n"
        "def interrupting(*args, **kwargs):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 2:\n"
        "        kwargs['log'] = lambda line: os.kill(os.getpid(), signal.SIGINT) if 'step 20:' in line else None\n"
        "    return fit(*args, **kwargs)\n"
        "fit = conv_fitting.fit_conv_head\n"
        "conv_fitting.fit_conv_head = interrupting\n"
    )
    process = run_cli_process(*train_arguments(mall_root, out, session_cache_dir), preamble=preamble, timeout=600)
    assert_process_one_error(process, "interrupted", str(out), code=130)
    assert_unchanged(before)
    assert no_temporary_files(tmp_path)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("bogus", "count offset 'bogus' is not one of none, head_sum"),
        (["head_sum"], "count offset ['head_sum'] is not one of none, head_sum"),
    ],
)
def test_an_edited_count_offset_is_a_one_line_error(
    value: object, message: str, ensemble_file: Path, tmp_path: Path, cli, mall_root: Path
) -> None:
    arrays, document = model_parts(ensemble_file)
    assert document["user_metadata"]["count_offset"] == "head_sum"
    document["user_metadata"]["count_offset"] = value
    bad = write_model(tmp_path / "bad.npz", arrays, document)
    result = cli("count", "-m", bad, mall_root / "frames" / "seq_000050.jpg")
    assert_one_error(result, str(bad), message)


def test_a_count_offset_without_a_density_head_is_refused(tmp_path: Path, cli, mall_root: Path) -> None:
    arrays, document = model_parts()  # the shipped default: class scores, no density head
    document["user_metadata"]["count_offset"] = "head_sum"
    bad = write_model(tmp_path / "bad.npz", arrays, document)
    result = cli("count", "-m", bad, mall_root / "frames" / "seq_000050.jpg")
    assert_one_error(result, str(bad), "count offset 'head_sum' needs a density head")
