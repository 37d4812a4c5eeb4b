"""`counting report` describes a model from its own file: what head counts, on which layers, the
sparse gate, and the AGP's kernel and centres only where the AGP is what counts; the loss curve
only where the model has the loss history of what counts, with its best epoch.

The shipped crowd model (the default) counts by its conv density heads (the AGP correction has
weight 0): its report described "a univariate AGP with 25 centres" and drew that unused AGP's
loss curve, "best epoch 0".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from robust_helpers import REPO_ROOT

MODELS = REPO_ROOT / "models"


def stored_report(cli: Callable[..., Any], model: str, folder: Path) -> tuple[str, dict, list[str]]:
    """(report.md, report.json, files written) of a report of ``model``'s stored figures."""
    arguments = ("report", "-o", folder) if model == "" else ("report", "-m", MODELS / model, "-o", folder)
    result = cli(*arguments)
    assert result.exit_code == 0, result.output
    markdown = (folder / "report.md").read_text()
    figures = json.loads((folder / "report.json").read_text())
    return markdown, figures, sorted(path.name for path in folder.iterdir())


@pytest.mark.parametrize("model", ["", "crowd.npz"], ids=["default", "crowd"])
def test_crowd_model_is_described_by_its_density_heads_and_gate(
    cli: Callable[..., Any], tmp_path: Path, model: str
) -> None:
    markdown, figures, files = stored_report(cli, model, tmp_path / "report")
    description = figures["model_description"]
    assert description in markdown
    assert "conv density heads on block4, block7, block10 (4 in the ensemble" in description
    assert "specialists shanghaitech-B, mall" in description
    assert "input short side 576 px" in description
    assert "the AGP correction in the file has weight 0 and is not used" in description
    assert "sparse gate sends sparse pictures to the COCO detector" in description
    assert "centres" not in description
    # No loss curve of an AGP that does not count, and the report says why there is none.
    assert "loss.png" not in files and "loss.png" not in markdown and figures["loss_curve"] is False
    assert "No training loss curve: the counts come from the density heads" in markdown
    assert "best epoch" not in markdown


def test_descriptor_model_is_described_by_its_agp_with_its_loss_curve(cli: Callable[..., Any], tmp_path: Path) -> None:
    markdown, figures, files = stored_report(cli, "default.npz", tmp_path / "report")
    assert figures["model_description"].endswith(
        "default.npz` gives one count on efficientnet-lite0 (input short side 224 px, ROI off, "
        "grid whole frame): a univariate AGP with 25 centres on efficientnet-lite0 class scores. "
        "Trained on mall (600 images, split train=1-600,test=601-800)."
    )
    assert "density" not in figures["model_description"]
    assert "loss.png" in files and figures["loss_curve"] is True
    assert "![Training and validation loss per epoch of the AGP (best epoch 30)](loss.png)" in markdown


def test_voc_model_is_described_by_its_per_class_agp_on_detector_descriptors(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    _, figures, _ = stored_report(cli, "voc20.npz", tmp_path / "report")
    description = figures["model_description"]
    assert "per-class counts of 20 classes" in description
    assert "univariate AGP with 50 centres on COCO detector descriptors (detector-letterbox)" in description
    assert "fitted on the sqrt of the counts" in description
    assert "input short side" not in description  # the detector reads its own input size


def test_density_model_with_an_agp_correction_says_its_weight(cli: Callable[..., Any], tmp_path: Path) -> None:
    markdown, figures, files = stored_report(cli, "mall-accurate.npz", tmp_path / "report")
    description = figures["model_description"]
    assert "input short side 720 px, ROI on" in description
    assert "the sum of its conv density heads on block4, block7, block10" in description
    assert "plus 0.5 x the correction of a univariate AGP with 25 centres" in description
    assert "sparse gate" not in description
    # The AGP's correction is part of the count: its loss curve is the model's.
    assert "loss.png" in files and "(best epoch 27)" in markdown
