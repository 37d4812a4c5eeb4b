"""Cases found by the hostile-user review of the merged tree: an output named like an input,
a 'video' that gives no frame, absurd thread counts, an exported network that gives NaN."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import assert_one_error, assert_unchanged, make_image, snapshot

from counting.core.errors import BackboneError

REPO = Path(__file__).resolve().parents[2]


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


def test_video_that_gives_no_frame_is_an_error_and_keeps_the_counts_file(cli, tmp_path: Path) -> None:
    fake = tmp_path / "clip.avi"
    fake.write_text("not a video\n")
    counts = tmp_path / "counts.csv"
    counts.write_text("precious\n")
    before = snapshot(counts)
    result = cli("video", fake, "--csv", counts, "--quiet")
    assert result.exit_code == 1, result.output
    assert "clip.avi" in result.stderr and "Traceback" not in result.output
    assert_unchanged(before)


def test_video_annotated_onto_its_source_refused(cli, tmp_path: Path) -> None:
    from robust_helpers import make_video

    clip = make_video(tmp_path / "clip.avi", n_frames=4)
    before = snapshot(clip)
    assert_one_error(cli("video", clip, "--annotated", clip), "clip.avi", "is also an input of this command")
    assert_unchanged(before)


@pytest.mark.parametrize("threads", ["100000", "0"])
def test_absurd_thread_counts_are_one_line(cli, tmp_path: Path, threads: str) -> None:
    image = make_image(tmp_path / "a.png")
    result = cli("features", image, "--threads", threads, "--no-cache")
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and "threads" in result.stderr


def test_exported_network_giving_nan_stops_with_the_file_named(tmp_path: Path) -> None:
    from counting.features.backbones.onnx_export import OnnxTrunk

    class _NanSession:
        def run(self, names, feeds):
            return [np.full((1, 4, 2, 2), np.nan, dtype=np.float32)]

    trunk = OnnxTrunk(session=_NanSession(), outputs=("final",), path=tmp_path / "net.onnx", max_abs_diff=0.0)
    with pytest.raises(BackboneError, match="net.onnx: the exported network gives non-finite outputs"):
        trunk.run(np.zeros((1, 3, 8, 8), dtype=np.float32))
