"""An output named like one of the command's inputs (the model, a picture, a listed video, a file a
dataset links to) is refused before any work, and the input is kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from robust_helpers import assert_one_error, assert_unchanged, make_image, snapshot

from counting.model.counting_model import default_model_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def model_copy(tmp_path: Path) -> Path:
    return Path(shutil.copy(default_model_path(), tmp_path / "model.npz"))


def _linked_dataset(folder_dataset: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The dataset with its counts.csv, an image and a folder of images moved elsewhere and
    linked back: the command reads them through the links."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    labels = elsewhere / "labels.csv"
    os.replace(folder_dataset / "counts.csv", labels)
    (folder_dataset / "counts.csv").symlink_to(labels)
    image = elsewhere / "img00.png"
    os.replace(folder_dataset / "img00.png", image)
    (folder_dataset / "img00.png").symlink_to(image)
    return labels, image, elsewhere


@pytest.mark.parametrize("target", ["labels", "image", "beside"])
def test_train_and_evaluate_refuse_files_the_dataset_links_to(
    cli, folder_dataset: Path, tmp_path: Path, model_copy: Path, target: str
) -> None:
    from robust_helpers import assert_one_error

    labels, image, elsewhere = _linked_dataset(folder_dataset, tmp_path)
    if target == "beside":  # a folder the dataset links to as a whole
        (folder_dataset / "more").symlink_to(elsewhere, target_is_directory=True)
        output = elsewhere / "model.npz"
    else:
        output = labels if target == "labels" else image
    before = {path: path.read_bytes() for path in (labels, image)}
    common = ["-d", "folder", "-r", folder_dataset, "--no-cache"]
    assert_one_error(cli("train", *common, "--epochs", "1", "-o", output), "reads it through a symlink")
    assert_one_error(cli("evaluate", *common, "-m", model_copy, "--json", output), "reads it through a symlink")
    assert_one_error(cli("evaluate", *common, "-m", model_copy, "--csv", output), "reads it through a symlink")
    assert {path: path.read_bytes() for path in (labels, image)} == before
    assert not (elsewhere / "model.npz").exists()


def test_video_sources_refuse_a_counts_file_onto_the_list_or_a_listed_video(cli, tmp_path: Path) -> None:
    """``video --sources`` wrote stream 1's counts over the list file itself (exit 0)."""
    from robust_helpers import assert_one_error, make_video

    folder = tmp_path / "vs"
    folder.mkdir()
    make_video(folder / "v.avi", n_frames=3)
    listing = folder / "01-v.csv"  # the name stream 1's counts file gets
    listing.write_text(f"{folder / 'v.avi'}\n")
    before = listing.read_bytes()
    result = cli("video", "--sources", listing, "--counts-dir", folder, "--max-frames", "2", "-q")
    assert_one_error(result, "01-v.csv", "is also an input of this command")
    assert listing.read_bytes() == before


def test_report_refuses_a_model_named_like_one_of_its_plots(cli, tmp_path: Path, model_copy: Path) -> None:
    """``report -o DIR`` checked report.md/html/json but not the PNGs it writes beside them."""
    from robust_helpers import assert_one_error

    folder = tmp_path / "rep"
    folder.mkdir()
    model = Path(shutil.copy(model_copy, folder / "loss.png"))
    before = model.read_bytes()
    assert_one_error(cli("report", "-o", folder, "--model", model), "loss.png", "is also an input of this command")
    assert model.read_bytes() == before


def test_count_json_onto_the_model_refused_and_model_kept(cli, tmp_path: Path) -> None:
    model = tmp_path / "mine.npz"
    shutil.copyfile(REPO / "models" / "default.npz", model)
    image = make_image(tmp_path / "a.png")
    before = snapshot(model)
    assert_one_error(cli("count", image, "-m", model, "--json", model), "mine.npz", "is also an input of this command")
    assert_unchanged(before)


def test_count_csv_onto_an_image_of_a_folder_refused(cli, tmp_path: Path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    image = make_image(folder / "a.png")
    before = snapshot(image)
    assert_one_error(cli("count", folder, "--csv", image), "a.png", "is also an input of this command")
    assert_unchanged(before)


def test_features_out_onto_an_input_refused(cli, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    make_image(inputs / "a.png")
    listed = inputs / "b.csv"  # not an image suffix: the folder does not list it ...
    listed.write_text("keep\n")
    before = snapshot(listed)
    # ... but named explicitly it is an input, and the CSV output must not replace it.
    assert_one_error(
        cli("features", inputs / "a.png", listed, "-o", listed, "--no-cache"), "is also an input of this command"
    )
    assert_unchanged(before)


def test_video_annotated_onto_its_source_refused(cli, tmp_path: Path) -> None:
    from robust_helpers import make_video

    clip = make_video(tmp_path / "clip.avi", n_frames=4)
    before = snapshot(clip)
    assert_one_error(cli("video", clip, "--annotated", clip), "clip.avi", "is also an input of this command")
    assert_unchanged(before)
