"""Ctrl-C during `counting train`: the old model is kept, no half model is written, and the line says
whether the model was saved."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from robust_helpers import (
    DEFAULT_MODEL,
    assert_one_error,
    assert_process_one_error,
    assert_unchanged,
    run_cli_process,
    snapshot,
)

from counting.model.counting_model import load_model


# -- Ctrl-C during `counting train` -----------------------------------------------------------------
def _train(root: Path, out: Path) -> list:
    return ["train", "-d", "folder", "-r", root, "-o", out, "--input-size", "64", "--centers", "3",
            "--epochs", "2", "--no-progress"]  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_while_fitting_keeps_the_old_model_and_says_so(tmp_path: Path, folder_dataset: Path) -> None:
    # A real SIGINT in the middle of the fit. Was: exit 130 with a bare "interrupted".
    out = tmp_path / "model.npz"
    shutil.copy(DEFAULT_MODEL, out)
    before = snapshot(out)
    preamble = (
        "import os, signal, time, agp\n"
        "def fit(self, *args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "agp.AGPRegressor.fit = fit\n"
    )
    process = run_cli_process(*_train(folder_dataset, out), preamble=preamble)
    line = assert_process_one_error(process, "interrupted: no model written", f"{out} is unchanged", code=130)
    assert "feature cache" in line
    assert_unchanged(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "feature-cache", "model.npz"]


def test_ctrl_c_during_the_test_evaluation_writes_no_model(
    cli, tmp_path: Path, folder_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.evaluate.evaluation

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(counting.evaluate.evaluation, "evaluate_model", interrupted)
    out = tmp_path / "new.npz"
    result = cli(*_train(folder_dataset, out), "--no-cache")
    line = assert_one_error(result, "interrupted: no model written", f"{out} was not created", code=130)
    assert "cache" not in line
    assert not out.exists()


def test_ctrl_c_after_the_save_says_the_model_is_saved(
    cli, tmp_path: Path, folder_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.evaluate.plots

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(counting.evaluate.plots, "plot_loss", interrupted)
    out = tmp_path / "new.npz"
    assert_one_error(cli(*_train(folder_dataset, out)), f"interrupted: model saved to {out}", code=130)
    assert load_model(out).input_size == 64
