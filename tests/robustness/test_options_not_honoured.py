"""An option a command cannot honour for this dataset or model is refused in one line, never
dropped in silence (on ef8ebcc each of these ran, the option ignored). --cluster's cases are in
test_cluster_counting.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from robust_helpers import assert_one_error


@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_smoothing_a_dataset_of_separate_pictures_is_refused(
    cli, command: str, shared_data: Path, tmp_path: Path
) -> None:
    root = shared_data / "shanghaitech-B-train"
    out = ("--json", tmp_path / "e.json") if command == "evaluate" else ("-o", tmp_path / "report")
    result = cli(command, "-d", "shanghaitech", "-r", root, "--split", "random:0.02:0", "--smooth", "3", *out)
    assert_one_error(result, "--smooth", "shanghaitech", "separate pictures", code=2)
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "report").exists()


def test_compare_refuses_smoothing_separate_pictures(cli, shared_data: Path, tmp_path: Path) -> None:
    root = shared_data / "shanghaitech-B-train"
    result = cli("compare", "-d", "shanghaitech", "-r", root, "--smooth", "3", "--out", tmp_path / "c")
    assert_one_error(result, "--smooth", "shanghaitech", code=2)


@pytest.mark.parametrize("option", [("--grid", "2x2"), ("--tiled-methods", "ridge")])
def test_compare_on_voc_refuses_tiles(cli, shared_data: Path, tmp_path: Path, option: tuple[str, str]) -> None:
    """voc's photos have no per-tile counts: compare set the grid to none without a word."""
    result = cli("compare", "-d", "voc", "-r", shared_data / "voc2007-mini", *option, "--out", tmp_path / "c")
    assert_one_error(result, "voc", "--grid", "--tiled-methods", code=2)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("command", ["evaluate", "train"])
def test_a_counts_csv_for_a_dataset_with_its_own_labels_is_refused(
    cli, command: str, mall_root: Path, tmp_path: Path
) -> None:
    """--counts-csv on mall: mall's own labels were used, the CSV never read."""
    labels = tmp_path / "counts.csv"
    labels.write_text("image,count\nseq_000001.jpg,3\n")
    out = ("--json", tmp_path / "e.json") if command == "evaluate" else ("-o", tmp_path / "m.npz")
    result = cli(command, "-d", "mall", "-r", mall_root, "--split", "train=1-4,test=5-6", "--counts-csv", labels, *out)
    assert_one_error(result, "--counts-csv", "folder", "mall has its own labels", code=2)


@pytest.mark.parametrize("command", ["evaluate", "train", "familiarize"])
def test_include_difficult_for_a_dataset_without_difficult_objects_is_refused(
    cli, command: str, mall_root: Path, tmp_path: Path
) -> None:
    out = {"evaluate": ("--json", tmp_path / "e.json"), "train": ("-o", tmp_path / "m.npz")}.get(command, ())
    if command == "familiarize":
        model = tmp_path / "copy.npz"
        model.write_bytes((Path(__file__).resolve().parents[2] / "models" / "mall-sums.npz").read_bytes())
        out = ("-m", model, "-o", tmp_path / "f.npz")
    result = cli(command, "-d", "mall", "-r", mall_root, "--split", "train=1-4,test=5-6", "--include-difficult", *out)
    assert_one_error(result, "--include-difficult", "voc", code=2)


def test_show_above_reaches_the_annotated_legend(
    cli, coco_voc20_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """count --show-above filtered the table but the annotated photo's legend kept 0.5."""
    import counting.apply.detection_drawing as drawing

    seen: list[float] = []
    draw = drawing.draw_detections

    def spy(*args, legend_threshold: float = drawing.LEGEND_THRESHOLD, **kwargs):
        seen.append(legend_threshold)
        return draw(*args, legend_threshold=legend_threshold, **kwargs)

    monkeypatch.setattr(drawing, "draw_detections", spy)
    photo = sorted((coco_voc20_root / "JPEGImages").glob("*.jpg"))[0]
    model = Path(__file__).resolve().parents[2] / "models" / "voc20.npz"
    result = cli("count", photo, "-m", model, "--show-above", "0.2", "--annotated", tmp_path / "drawn")
    assert result.exit_code == 0, result.output
    assert seen == [0.2]
    assert (tmp_path / "drawn" / f"{photo.stem}.jpg").is_file()


def _photo(coco_voc20_root: Path) -> Path:
    return sorted((coco_voc20_root / "JPEGImages").glob("*.jpg"))[0]


@pytest.mark.parametrize("command", ["features", "count"])
def test_weights_for_the_detector_are_refused(cli, coco_voc20_root: Path, tmp_path: Path, command: str) -> None:
    """--weights with the COCO detector (voc20.npz, --descriptor detector) was ignored in silence."""
    fake = tmp_path / "weights.pth"
    fake.write_bytes(b"not a checkpoint")
    photo = _photo(coco_voc20_root)
    if command == "features":
        args = ("features", photo, "--descriptor", "detector", "--no-cache", "-o", tmp_path / "d.npy")
    else:
        args = ("count", photo, "-m", Path(__file__).resolve().parents[2] / "models" / "voc20.npz")
    assert_one_error(cli(*args, "--weights", fake), "--weights", "the COCO detector has its own weights")
    assert not (tmp_path / "d.npy").exists()


def test_an_input_size_for_the_detector_is_refused(cli, coco_voc20_root: Path, tmp_path: Path) -> None:
    """The detector reads pictures at its own size: --input-size 300 gave the same rows, recorded as 300."""
    args = ("features", _photo(coco_voc20_root), "--descriptor", "detector", "--input-size", "300")
    assert_one_error(cli(*args, "-o", tmp_path / "d.npy"), "--input-size", "own input size", code=2)


def test_smoothing_off_is_accepted_for_separate_pictures(cli, shared_data: Path, tmp_path: Path) -> None:
    """--smooth 1 is "off" (its help says so): what a dataset of separate pictures gets anyway."""
    root = shared_data / "shanghaitech-B-train"
    result = cli("compare", "-d", "shanghaitech", "-r", root, "--smooth", "1", "--methods", "nope")
    assert "--smooth" not in result.stderr and "nope" in result.stderr  # past the smoothing check
