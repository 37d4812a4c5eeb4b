"""`counting models list` (issue 49; it answered "unknown action"): the shipped models, what each
is for, its kind and the figures measured on it with the data they were measured on, read from
each file's metadata and, for held-out figures a file does not record, from the README's table.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import counting.cli.models as models_command
from agp.persistence import read_model_file
from counting.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"


def metadata_of(name: str) -> dict:
    return read_model_file(MODELS / f"{name}.npz")[1]["user_metadata"]


def readme_measured(name: str) -> str:
    """The 'measured' cell of the README's model table on the row naming ``models/NAME.npz`` first."""
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if f"| `models/{name}.npz`" in line)
    return row.strip().strip("|").split("|")[2].strip().replace("`", "")


def test_list_shows_every_shipped_model_with_its_figures(runner) -> None:
    result = runner.invoke(app, ["models", "list"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.replace("│", " ").split())  # the table's cells, unwrapped
    for path in sorted(MODELS.glob("*.npz")):
        assert f" {path.stem} " in text
    # Figures from the files themselves, with the data they were measured on.
    test = metadata_of("mall-accurate")["test_metrics"]
    assert f"test: MAE {test['per_frame']['mae']:.2f}" in text
    assert f"on {test['per_frame']['n']} test images (mall, split {test['split']})" in text
    voc = metadata_of("voc20")["validation_metrics"]
    assert f"validation: mRMSE {voc['mrmse']:.3f}, m-relRMSE {voc['m_rel_rmse']:.3f}" in text
    assert "per-class counts (20 classes)" in text and "conv density head" in text
    # The crowd model's file records out-of-fold figures only: the held-out ones from the README.
    assert readme_measured("crowd")[:80] in text
    assert result.stderr == ""


def test_list_as_json_on_stdout(runner) -> None:
    result = runner.invoke(app, ["models", "list", "--json", "-"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    names = [model["name"] for model in document["models"]]
    assert names == sorted(path.stem for path in MODELS.glob("*.npz"))
    default = next(model for model in document["models"] if model["name"] == "default")
    assert default["test_metrics"] == metadata_of("default")["test_metrics"]
    assert default["for"] == "the Mall camera" and default["kind"].startswith("one count:")
    voc = next(model for model in document["models"] if model["name"] == "voc20")
    assert len(voc["classes"]) == 20


def test_a_damaged_file_is_listed_with_why_and_the_others_still(
    runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(MODELS / "default.npz", folder / "mine.npz")
    (folder / "broken.npz").write_bytes(b"not a zip")
    monkeypatch.setattr(models_command, "default_model_path", lambda: folder / "crowd.npz")
    result = runner.invoke(app, ["models", "list", "--json", "-"])
    assert result.exit_code == 0, result.output
    found = {model["name"]: model for model in json.loads(result.stdout)["models"]}
    assert "not an .npz archive" in found["broken"]["problem"]
    mine = found["mine"]
    # No README beside this folder: the file's own figures, and what it was trained on.
    assert mine["for"] == metadata_of("default")["dataset"]["trained_on"]
    assert any(figure.startswith("test: MAE") for figure in mine["figures"])
    assert not any(figure.startswith("README.md") for figure in mine["figures"])


def test_models_help_names_both_actions(runner) -> None:
    result = runner.invoke(app, ["models", "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    assert "list: the shipped models" in text and "fetch: download" in text
    assert "counting models list" in text and "counting models fetch" in text
