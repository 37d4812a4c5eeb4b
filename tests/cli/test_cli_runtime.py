"""`--runtime` / `--threads` on the commands: the choice reaches the backbone, the cache and the model file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from counting.cli.app import app
from counting.features.backbones import configure_runtime
from counting.model.counting_model import CountingModel

FRAMES = (121, 122)
DESCRIPTOR_COMMANDS = ("features", "train", "evaluate", "report", "count", "video", "compare", "familiarize")


@pytest.fixture(autouse=True)
def _default_runtime_afterwards():
    """Commands set the process-wide runtime; later tests get the default back."""
    yield
    configure_runtime(None)


@pytest.mark.parametrize("command", DESCRIPTOR_COMMANDS)
def test_every_descriptor_command_offers_runtime_and_threads(runner, command: str) -> None:
    result = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "--runtime" in result.output and "onnxruntime" in result.output and "--threads" in result.output


def test_features_on_both_runtimes_agree_and_are_cached_apart(runner, mall_root: Path, tmp_path: Path) -> None:
    frames = [str(mall_root / "frames" / f"seq_{k:06d}.jpg") for k in FRAMES]
    outputs = {}
    for runtime in ("onnxruntime", "torch"):
        outputs[runtime] = tmp_path / f"{runtime}.npy"
        result = runner.invoke(
            app,
            [
                "features",
                *frames,
                "-o",
                str(outputs[runtime]),
                "--input-size",
                "96",
                "--cache-dir",
                str(tmp_path / "cache"),
                "--runtime",
                runtime,
                "--threads",
                "1",
                "--no-progress",
            ],
        )
        assert result.exit_code == 0, result.output
        assert "2 computed" in result.output  # nothing served from the other runtime's entries
    a, b = (np.load(outputs[name]) for name in ("onnxruntime", "torch"))
    assert a.shape == (2, 1000) and np.abs(a - b).max() <= 1e-4
    runtimes = sorted(json.loads(p.read_text())["runtime"] for p in (tmp_path / "cache").glob("*/settings.json"))
    assert runtimes == ["onnxruntime", "torch"]


def test_unknown_runtime_is_a_usage_error(runner, mall_root: Path) -> None:
    result = runner.invoke(app, ["features", str(mall_root / "frames" / "seq_000121.jpg"), "--runtime", "tensorrt"])
    assert result.exit_code == 2 and "tensorrt" in result.output


def test_model_trained_on_onnxruntime_counts_the_same_on_torch(
    trained, runner, mall_root: Path, tmp_path: Path
) -> None:
    model_path, _ = trained
    assert CountingModel.load(model_path).runtime == "onnxruntime"  # the default, recorded
    frames = [str(mall_root / "frames" / f"seq_{k:06d}.jpg") for k in FRAMES]
    counts = {}
    for runtime in ("onnxruntime", "torch"):
        out = tmp_path / f"{runtime}.csv"
        result = runner.invoke(
            app, ["count", *frames, "--model", str(model_path), "--csv", str(out), "--runtime", runtime]
        )
        assert result.exit_code == 0, result.output
        with out.open() as handle:
            counts[runtime] = np.array([float(row["count"]) for row in csv.DictReader(handle)])
    assert len(counts["torch"]) == len(FRAMES)
    np.testing.assert_allclose(counts["onnxruntime"], counts["torch"], atol=0.01)
