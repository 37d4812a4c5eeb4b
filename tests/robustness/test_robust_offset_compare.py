"""Hostile use of the count offset (``count_offset`` / ``correction_weight`` in a model file), of
conv density head sections that overflow, and of ``compare --model FILE``.

The model files are made in a second, not trained: a random conv head on block4 (40 channels)
whose AGP learnt a correction of its whole-ROI sum, saved as ``counting train`` saves a conv model
(format version 3, ``count_offset`` 'head_sum'). The compare cases run on a few Mall frames at
input size 64 with one method.
"""

from __future__ import annotations

import base64
import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from robust_helpers import assert_one_error, model_parts, write_model

from agp import AGPRegressor
from counting.core.errors import CountingError
from counting.evaluate.comparison.data import ComparisonData
from counting.evaluate.comparison.models import run_model
from counting.heads.density.conv.head import ConvDensityHead, parameter_shapes
from counting.heads.density.conv.persistence import conv_head_from_document, conv_head_to_document
from counting.heads.density.persistence import DensityHeadError
from counting.model.counting_model import CountingModel, load_model

CHANNELS = 40  # block4 of efficientnet-lite0
TRAIN_SPLIT = "train=1-20,test=21-40"


def random_head(channels: int = CHANNELS, width: int = 4, seed: int = 0) -> ConvDensityHead:
    rng = np.random.default_rng(seed)
    return ConvDensityHead(
        layers=("block4",),
        width=width,
        depth=1,
        x_mean=rng.normal(size=channels),
        x_scale=rng.uniform(0.5, 2.0, channels),
        weights=[rng.normal(scale=0.3, size=shape) for shape in parameter_shapes(channels, width, 1)],
        output_scale=100.0,
    )


def offset_model(path: Path, mall_root: Path, weight: float = 0.5, split: str = TRAIN_SPLIT) -> Path:
    """A conv-head model trained (on paper) on Mall frames 1-20, as `counting train` writes it."""
    rng = np.random.default_rng(0)
    sums = rng.uniform(5, 40, (40, 1))
    corrections = 0.1 * sums[:, 0] + rng.normal(size=40)
    regressor = AGPRegressor(n_centers=4, max_epochs=2, validation_fraction=10, random_state=0).fit(sums, corrections)
    model = CountingModel(
        regressor=regressor,
        input_size=64,
        density_head=random_head(),
        count_offset="head_sum",
        correction_weight=weight,
        dataset={"name": "mall", "root": str(mall_root), "split": split, "n_train": 20},
        training={"density_kind": "conv", "count_offset": "head_sum", "correction_weight": weight},
    )
    return model.save(path)


@pytest.fixture(scope="module")
def model_file(mall_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return offset_model(tmp_path_factory.mktemp("offset") / "conv.npz", mall_root)


def edited(source: Path, target: Path, change: Callable[[dict], object]) -> Path:
    arrays, document = model_parts(source)
    change(document["user_metadata"])
    return write_model(target, arrays, document)


def frame(mall_root: Path, number: int = 25) -> Path:
    return mall_root / "frames" / f"seq_{number:06d}.jpg"


def test_the_offset_model_counts(model_file: Path, mall_root: Path, tmp_path: Path, cli) -> None:
    assert model_parts(model_file)[1]["user_metadata"]["format_version"] == 3
    out = tmp_path / "counts.json"
    result = cli("count", "-m", model_file, frame(mall_root), "--json", out)
    assert result.exit_code == 0, result.output
    assert np.isfinite(json.loads(out.read_text())["images"][0]["count"])


# ---------------------------------------------------------------- count_offset / correction_weight edits

OFFSET_EDITS = {
    # Each of these counted, silently wrong: the regressor's corrections taken for counts, or
    # the correction weighted 1 instead of the trained 0.5, or a bool / negative version read.
    "weight removed": (lambda u: u.pop("correction_weight"), "count offset 'head_sum' without its correction_weight"),
    "offset removed": (lambda u: u.pop("count_offset"), "a correction weight other than 1 needs the count offset"),
    "offset and weight removed": (
        lambda u: [u.pop("count_offset"), u.pop("correction_weight")],
        "format version 3 records a count_offset, this file has none",
    ),
    "offset none": (
        lambda u: u.update(count_offset="none", correction_weight=1.0),
        "count offset 'none' differs from the one it was trained with ('head_sum')",
    ),
    "version 2": (lambda u: u.update(format_version=2), "count offset 'head_sum' needs format version 3"),
    "version 1": (lambda u: u.update(format_version=1), "count offset 'head_sum' needs format version 3"),
    "version bool": (lambda u: u.update(format_version=True), "format_version: expected an integer"),
    "version 0": (lambda u: u.update(format_version=0), "format_version: 0 is outside the allowed range"),
    "version negative": (lambda u: u.update(format_version=-1), "format_version: -1 is outside the allowed range"),
    # These were refused, with a message about the weight instead of the offset's value.
    "offset false": (lambda u: u.update(count_offset=False), "count offset False is not one of none, head_sum"),
    "offset 0": (lambda u: u.update(count_offset=0), "count offset 0 is not one of none, head_sum"),
    "offset empty": (lambda u: u.update(count_offset=""), "count offset '' is not one of none, head_sum"),
    "offset null": (lambda u: u.update(count_offset=None), "count offset None is not one of none, head_sum"),
    # Refused before too: kept so they stay refused.
    "weight NaN": (lambda u: u.update(correction_weight=float("nan")), "correction weight must be a number from 0"),
    "weight string": (lambda u: u.update(correction_weight="0.5"), "correction weight must be a number from 0"),
    "weight bool": (lambda u: u.update(correction_weight=True), "correction weight must be a number from 0"),
    "weight huge": (lambda u: u.update(correction_weight=1e308), "correction weight must be a number from 0"),
    "weight negative": (lambda u: u.update(correction_weight=-0.5), "correction weight must be a number from 0"),
    "no density head": (lambda u: u.pop("density_head"), "count offset 'head_sum' needs a density head"),
}


@pytest.mark.parametrize("case", sorted(OFFSET_EDITS))
def test_edited_offset_records_are_one_line_errors(
    case: str, model_file: Path, mall_root: Path, tmp_path: Path, cli
) -> None:
    change, message = OFFSET_EDITS[case]
    bad = edited(model_file, tmp_path / "bad offset.npz", change)
    out = tmp_path / "counts.json"
    result = cli("count", "-m", bad, frame(mall_root), "--json", out)
    line = assert_one_error(result, str(bad), message)
    assert line.startswith("error:")
    assert not out.exists()


def test_a_hand_set_weight_in_range_still_counts(model_file: Path, mall_root: Path, tmp_path: Path, cli) -> None:
    for weight in (0, 2):
        good = edited(model_file, tmp_path / f"w{weight}.npz", lambda u, w=weight: u.update(correction_weight=w))
        assert load_model(good).correction_weight == weight
        result = cli("count", "-m", good, frame(mall_root))
        assert result.exit_code == 0, result.output


# ---------------------------------------------------------------- conv head sections giving NaN counts


def _values(entry: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(entry["float64_base64"]), "<f8").copy()


def _scale(entry: dict, factor: float) -> None:
    entry["float64_base64"] = base64.b64encode((_values(entry) * factor).tobytes()).decode()


def shrink_standardisation(section: dict) -> None:
    """x_scale shrunk by 1e66 and the first weights by 1e30: every folded weight is a finite
    float32 and typical inputs (by that x_scale) stay tiny, but any real map overflows."""
    arrays = section["arrays"]
    _scale(arrays["x_mean"], 0.0)
    _scale(arrays["x_scale"], 1e-66)
    _scale(arrays["weight0"], 1e-30)
    _scale(arrays["weight4"], 1e6)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(output_scale=5e-324), "output_scale must be a positive number"),
        (lambda d: d.update(output_scale=1e-300), "output_scale must be a positive number"),
        (shrink_standardisation, "the network: its weights overflow inside the network"),
    ],
)
def test_conv_sections_that_count_nan_are_refused(edit, message: str) -> None:
    document = json.loads(json.dumps(conv_head_to_document(random_head())))
    edit(document)
    with pytest.raises(DensityHeadError, match=message):
        conv_head_from_document(document, "model.npz")


def test_a_conv_head_that_overflows_on_real_maps_is_refused_at_load(
    model_file: Path, mall_root: Path, tmp_path: Path, cli
) -> None:
    bad = edited(model_file, tmp_path / "bad.npz", lambda u: shrink_standardisation(u["density_head"]))
    out = tmp_path / "counts.json"
    result = cli("count", "-m", bad, frame(mall_root), "--json", out)  # was: exit 0, "count": NaN
    assert_one_error(result, str(bad), "conv density head", "overflow inside the network")
    assert not out.exists()


# ---------------------------------------------------------------- compare --model: no CLI


def _data(paths: list[Path]) -> ComparisonData:
    n = len(paths)
    return ComparisonData(
        dataset="mall",
        split="train=1-2,test=3-4",
        train_paths=[],
        test_paths=paths,
        train_counts=np.zeros(2),
        test_counts=np.arange(n, dtype=float),
        train_features=np.zeros((2, 3)),
        test_features=np.zeros((n, 3)),
        test_indices=np.arange(n) + 3,
    )


def _fake_model(count_paths: Callable) -> SimpleNamespace:
    return SimpleNamespace(
        input_size=64,
        density_head=None,
        class_density_head=None,
        descriptor=None,
        grid=None,
        layout="frame",
        class_names=None,
        dataset={},
        count_paths=count_paths,
    )


def test_a_model_counting_nan_is_a_failed_row_not_nan_figures(tmp_path: Path) -> None:
    paths = [tmp_path / "a.jpg", tmp_path / "b.jpg"]

    def count_paths(paths, **_):
        return SimpleNamespace(counts=np.array([1.0, np.nan]), ok=[True, True], errors={})

    result = run_model(_data(paths), tmp_path / "m.npz", model=_fake_model(count_paths))
    assert result.status == "failed" and not result.metrics
    assert result.note == f"1 test images counted NaN or infinite, e.g. {paths[1]}"


def test_a_model_failing_while_counting_is_a_failed_row(tmp_path: Path) -> None:
    def count_paths(paths, **_):
        raise CountingError("m.npz: trained with other backbone weights")

    result = run_model(_data([tmp_path / "a.jpg"]), tmp_path / "m.npz", model=_fake_model(count_paths))
    assert result.status == "failed" and result.note == "m.npz: trained with other backbone weights"


# ---------------------------------------------------------------- compare --model: the CLI


def _compare(cli, root: Path, out: Path, *models: Path, split: str = "train=1-20,test=21-26"):
    arguments = ["compare", "-d", "mall", "-r", root, "--split", split, "--input-size", 64, "--grid", "2x2"]
    arguments += ["--methods", "ridge", "--tiled-methods", "", "--out", out]
    for model in models:
        arguments += ["--model", model]
    return cli(*arguments)


def _model_rows(out: Path) -> list[dict]:
    with (out / "compare-mall.csv").open() as handle:
        return [row for row in csv.DictReader(handle) if row["method"] == "model"]


def test_a_copy_of_the_dataset_does_not_hide_the_train_images(
    model_file: Path, mall_root: Path, tmp_path: Path, cli
) -> None:
    """The model learnt frames 1-20 at mall_root; the same frames copied elsewhere are the same images."""
    copy = tmp_path / "mall copy"
    (copy / "frames").mkdir(parents=True)
    for name in ("mall_gt.mat", "perspective_roi.mat"):
        shutil.copy(mall_root / name, copy / name)
    for number in range(1, 27):
        shutil.copy(frame(mall_root, number), copy / "frames")
    result = _compare(cli, copy, tmp_path / "out", model_file, split="train=1-14,test=15-26")
    assert result.exit_code == 0, result.output
    (row,) = _model_rows(tmp_path / "out")
    assert row["status"] == "failed" and row["mae"] == ""
    assert row["note"] == f"trained on 6 of the 12 test images (split {TRAIN_SPLIT!r})"


def test_bad_model_files_are_refused_before_any_work(model_file: Path, mall_root: Path, tmp_path: Path, cli) -> None:
    """A bad second file was read after every method had run: one line, and nothing written."""
    truncated = tmp_path / "cut short.npz"
    truncated.write_bytes(model_file.read_bytes()[:3000])
    out = tmp_path / "out"
    result = _compare(cli, mall_root, out, model_file, truncated)
    assert_one_error(result, str(truncated), "not a counting model file")
    assert "Ridge" not in result.output and not out.exists()

    voc = Path(__file__).resolve().parents[2] / "models" / "voc20.npz"
    result = _compare(cli, mall_root, out, model_file, voc)
    assert_one_error(result, str(voc), "counts 20 classes; this comparison counts one")
    assert "Ridge" not in result.output and not out.exists()

    result = _compare(cli, mall_root, out, model_file, model_file.parent / "." / model_file.name)
    assert_one_error(result, str(model_file), "given twice to --model")
    assert not out.exists()


def test_model_rows_whose_train_images_are_unknown_are_refused(
    model_file: Path, mall_root: Path, tmp_path: Path, cli
) -> None:
    """Dataset records edited so the old check passed the row (in sample) or raised a traceback
    after every method had run; and two files alike kept one set of predictions."""
    files = {
        "renamed": edited(model_file, tmp_path / "renamed.npz", lambda u: u["dataset"].update(name="folder")),
        "no split": edited(model_file, tmp_path / "no split.npz", lambda u: u["dataset"].pop("split")),
        "bad split": edited(
            model_file, tmp_path / "bad.npz", lambda u: u["dataset"].update(split="train=1-9,test=1-2")
        ),
        "root number": edited(model_file, tmp_path / "root.npz", lambda u: u["dataset"].update(root=5)),
    }
    other = tmp_path / "other"
    other.mkdir()
    # Trained on frames 41-60: not in sample, and alike in every column but its predictions.
    twin_a = offset_model(other / "conv.npz", mall_root, weight=0.5, split="train=41-60,test=61-70")
    twin_b = offset_model(tmp_path / "conv.npz", mall_root, weight=2.0, split="train=41-60,test=61-70")
    out = tmp_path / "out"
    result = _compare(cli, mall_root, out, *files.values(), twin_a, twin_b, split="train=1-14,test=15-26")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    rows = _model_rows(out)
    notes = {row["label"]: row["note"] for row in rows}
    assert notes["model renamed.npz"].startswith("cannot tell which images it was trained on: it records dataset")
    assert notes["model no split.npz"] == "cannot tell which images it was trained on: it records no split (found None)"
    assert notes["model bad.npz"].startswith("cannot tell which images it was trained on: its split")
    assert notes["model root.npz"] == f"trained on 6 of the 12 test images (split {TRAIN_SPLIT!r})"
    twins = [row for row in rows if row["status"] == "ok"]
    assert len(twins) == 2 and len({row["label"] for row in twins}) == 2
    predictions = json.loads((out / "compare-mall.json").read_text())["predictions"]
    kept = [values for key, values in predictions.items() if key.startswith("model|")]
    assert len(kept) == 2 and kept[0] != kept[1]
