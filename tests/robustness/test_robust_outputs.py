"""Points 2, 5, 7: outputs are whole or absent, checked before the work, and any file name works."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import (
    DEFAULT_MODEL,
    assert_one_error,
    assert_process_one_error,
    assert_unchanged,
    file_size_limit,
    make_image,
    needs_non_root,
    run_cli_process,
    snapshot,
)

from counting.cli.app import app
from counting.core.errors import CountingError
from counting.core.files import atomic_write, atomic_write_text, check_writable
from counting.model.counting_model import load_model


def train_args(root: Path, out: Path) -> list:
    return ["train", "--dataset", "folder", "--root", root, "--out", out, "--input-size", "64",
            "--centers", "3", "--epochs", "2", "--no-progress", "--no-cache"]  # fmt: skip


# -- point 2: a failed `train -o` never destroys the model already there -----------------------
@pytest.mark.slow
def test_full_disk_during_train_keeps_the_old_model(tmp_path: Path, folder_dataset: Path) -> None:
    out = tmp_path / "models" / "good.npz"
    out.parent.mkdir()
    shutil.copy(DEFAULT_MODEL, out)
    before = snapshot(out)
    # Writes beyond 20 kB fail with EFBIG, as on a full disk; the new model is about 60 kB.
    process = run_cli_process(*train_args(folder_dataset, out), preamble=file_size_limit(20_000))
    line = assert_process_one_error(process, str(out), "cannot write (File too large)")
    assert "previous file is unchanged" in line
    assert_unchanged(before)
    assert load_model(out).backbone == "efficientnet-lite0"  # still the good, loadable model
    assert sorted(p.name for p in out.parent.iterdir()) == ["good.npz"]  # no temporary left


def test_train_out_under_a_file_fails_before_training(cli, tmp_path: Path, folder_dataset: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    result = cli(*train_args(folder_dataset, blocker / "m.npz"))
    assert_one_error(result, str(blocker / "m.npz"), "is a file, not a folder")
    assert "model saved" not in result.output and "loss" not in result.output.lower()


def test_train_out_is_a_folder(cli, tmp_path: Path, folder_dataset: Path) -> None:
    assert_one_error(cli(*train_args(folder_dataset, tmp_path)), str(tmp_path), "is a folder")


def test_interrupted_save_keeps_the_old_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "good.npz"
    shutil.copy(DEFAULT_MODEL, out)
    before = snapshot(out)
    model = load_model(DEFAULT_MODEL)

    def half_written(path, metadata=None):
        Path(path).write_bytes(b"PK\x03\x04 half a model")
        raise KeyboardInterrupt

    monkeypatch.setattr(model.regressor, "save", half_written)
    with pytest.raises(KeyboardInterrupt):
        model.save(out)
    assert_unchanged(before)
    assert [p.name for p in tmp_path.iterdir()] == ["good.npz"]


def test_train_writes_a_loadable_model_and_replaces_the_old(cli, tmp_path: Path, folder_dataset: Path) -> None:
    out = tmp_path / "m.npz"
    shutil.copy(DEFAULT_MODEL, out)
    result = cli(*train_args(folder_dataset, out))
    assert result.exit_code == 0, result.output
    assert load_model(out).input_size == 64


# -- point 5: output paths are checked before any work ------------------------------------------
@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_count_output_under_a_file_fails_before_counting(cli, tmp_path: Path, option: str) -> None:
    image = make_image(tmp_path / "a.png")
    blocker = tmp_path / "blocker"
    blocker.write_text("keep me")
    before = snapshot(blocker)
    result = cli("count", image, option, blocker / "out")
    assert_one_error(result, str(blocker / "out"), "is a file, not a folder")
    assert "Counts by" not in result.output  # nothing was counted first
    assert_unchanged(before)


def test_count_output_that_is_a_folder(cli, tmp_path: Path) -> None:
    image = make_image(tmp_path / "a.png")
    assert_one_error(cli("count", image, "--csv", tmp_path), str(tmp_path), "is a folder")


def test_count_output_into_missing_folders_creates_them(cli, tmp_path: Path) -> None:
    image = make_image(tmp_path / "a.png")
    out = tmp_path / "new" / "deeper" / "c.json"
    result = cli("count", image, "--json", out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["images"][0]["image"].endswith("a.png")


def test_evaluate_json_checked_before_evaluating(cli, tmp_path: Path, folder_dataset: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    result = cli("evaluate", "--dataset", "folder", "--root", folder_dataset, "--json", blocker / "e.json",
                 "--no-progress")  # fmt: skip
    assert_one_error(result, str(blocker / "e.json"), "is a file")
    assert "MAE" not in result.output


def test_evaluate_predictions_into_a_folder(cli, tmp_path: Path, folder_dataset: Path) -> None:
    result = cli("evaluate", "--dataset", "folder", "--root", folder_dataset, "--csv", tmp_path,
                 "--no-progress")  # fmt: skip
    assert_one_error(result, str(tmp_path), "is a folder")


def test_report_out_dir_that_is_a_file(cli, tmp_path: Path) -> None:
    blocker = tmp_path / "report"
    blocker.write_text("not a folder")
    before = snapshot(blocker)
    # The option is declared folder-only: the command line parser refuses it (usage error, 2).
    assert_one_error(cli("report", "-o", blocker), str(blocker), "is a file", code=2)
    assert_unchanged(before)


def test_features_output_under_a_file(cli, tmp_path: Path) -> None:
    image = make_image(tmp_path / "a.png")
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    result = cli("features", image, "-o", blocker / "f.npy", "--no-progress", "--no-cache")
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(blocker / "f.npy") in lines[0] and "is a file" in lines[0]


@needs_non_root
def test_read_only_folder_is_refused_before_work(cli, tmp_path: Path) -> None:
    image = make_image(tmp_path / "a.png")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert_one_error(cli("count", image, "--csv", locked / "c.csv"), "not writable")
    finally:
        locked.chmod(0o755)


def test_a_read_only_output_file_is_refused_and_kept(cli, tmp_path: Path) -> None:
    # As root too: root may write any file, but a file with no write bit is one its owner keeps.
    image = make_image(tmp_path / "a.png")
    kept = tmp_path / "c.csv"
    kept.write_text("earlier counts\n")
    kept.chmod(0o444)
    try:
        assert_one_error(cli("count", image, "--csv", kept), "is a read-only file")
        assert kept.read_text() == "earlier counts\n"
        kept.chmod(0o644)  # writable again: replaced as before
        result = cli("count", image, "--csv", kept)
        assert result.exit_code == 0 and kept.read_text() != "earlier counts\n"
    finally:
        kept.chmod(0o644)


def test_check_writable_and_atomic_write_library(tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write("new but never finished")
        raise RuntimeError("boom")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    with pytest.raises(CountingError, match="is a folder"):
        check_writable(tmp_path)
    with pytest.raises(CountingError, match="is a file, not a folder"):
        check_writable(target / "below" / "x.csv")


# -- point 7: non-UTF-8 file names ----------------------------------------------------------------
@pytest.fixture
def latin1_image(tmp_path: Path) -> Path:
    name = os.fsdecode(b"caf\xe9.png")  # Latin-1 bytes: not valid UTF-8
    return make_image(tmp_path / name)


def test_count_csv_and_json_with_a_non_utf8_name(runner, tmp_path: Path, latin1_image: Path) -> None:
    """Outputs are valid UTF-8 (issue 24): the undecodable byte is written as the text ``\\xe9``,
    the same text the table shows, in the CSV and in the JSON (not ``\\udce9``)."""
    out_csv, out_json = tmp_path / "c.csv", tmp_path / "c.json"
    # A terminal wide enough for the whole path on one line: at 80 columns the table wraps the
    # image cell, and where the wrap falls depends on the length of pytest's temporary folder.
    arguments = ["count", latin1_image, "--csv", out_csv, "--json", out_json]
    result = runner.invoke(app, [str(argument) for argument in arguments], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "caf\\xe9.png" in result.output  # shown escaped on screen
    data = out_csv.read_bytes()
    text = data.decode("utf-8")  # raises on the raw byte the old writer put there
    assert "caf\\xe9.png," in text and data.count(b"\n") == 2
    raw_json = out_json.read_bytes()
    assert b"\\udce9" not in raw_json
    document = json.loads(raw_json.decode("utf-8"))
    assert document["images"][0]["image"].endswith("caf\\xe9.png")


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_features_listing_with_a_non_utf8_name(cli, tmp_path: Path, latin1_image: Path, suffix: str) -> None:
    good = make_image(tmp_path / "plain.png", seed=3)
    out = tmp_path / f"f{suffix}"
    result = cli("features", latin1_image, good, "-o", out, "--no-progress", "--no-cache")
    assert result.exit_code == 0, result.output
    listing = out.with_suffix(".files.txt").read_bytes() if suffix == ".npy" else out.read_bytes()
    names = listing.decode("utf-8")  # valid UTF-8
    assert "caf\\xe9.png" in names and "plain.png" in names
    if suffix == ".npy":
        assert np.load(out).shape == (2, 1000)
        assert len(names.splitlines()) == 2
