"""The crowd network's training parts (counting.train.network): loss, crops, degradations,
resumable training, the network file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest
import torch
from PIL import Image

from counting.data.datasets.base import Sample
from counting.heads.density.network.head import NetworkDensityHead
from counting.heads.density.network.module import CrowdNetwork, normalise
from counting.heads.density.persistence import head_from_document, head_to_document
from counting.heads.density.sections import DensityHeadError, encode_array
from counting.train.network.crops import MAX_SCALE, TrainingPictures, _crop
from counting.train.network.degrade import DegradeShares, degrade, video_frame
from counting.train.network.loss import bayesian_loss, padded_points
from counting.train.network.training import (
    NetworkSettings,
    averaged_network,
    checkpoint_state,
    load_network,
    save_network,
    train_network,
)
from counting.train.network.validation import count_pictures, network_input

# -- the loss ---------------------------------------------------------------------------------


def test_padded_points_mark_the_real_points() -> None:
    padded, mask = padded_points([torch.ones(3, 2), torch.zeros(0, 2)])
    assert padded.shape == (2, 3, 2)
    assert mask.tolist() == [[True, True, True], [False, False, False]]


def test_a_head_counted_in_its_own_cell_costs_nothing() -> None:
    density = torch.zeros(1, 4, 4)
    density[0, 1, 1] = 1.0  # the cell whose centre is (12, 12)
    points, mask = padded_points([torch.tensor([[12.0, 12.0]])])
    assert float(bayesian_loss(density, points, mask, 8, 32.0)) == pytest.approx(0.0, abs=1e-6)


def test_the_loss_of_missed_and_invented_people() -> None:
    """Crop 0 holds one head and is predicted empty: its head expects 0 (loss 1). Crop 1 holds no
    one and is predicted 0.5 per cell (8 people): all background, loss 8. Mean over crops 4.5."""
    density = torch.zeros(2, 4, 4)
    density[1] = 0.5
    points, mask = padded_points([torch.tensor([[12.0, 12.0]]), torch.zeros(0, 2)])
    assert float(bayesian_loss(density, points, mask, 8, 32.0)) == pytest.approx(4.5)


def test_the_gradient_moves_people_towards_the_head() -> None:
    density = torch.full((1, 6, 6), 1.0 / 36, requires_grad=True)
    points, mask = padded_points([torch.tensor([[4.0, 4.0]])])
    bayesian_loss(density, points, mask, 8, 48.0).backward()
    gradient = density.grad[0]
    # Descending the gradient adds people at the head's cell and takes them from the far corner.
    assert gradient[0, 0] < 0
    assert gradient[5, 5] > 0


# -- crops ------------------------------------------------------------------------------------


def _picture_with_dots(width: int = 120, height: int = 90) -> tuple[np.ndarray, np.ndarray]:
    pixels = np.zeros((height, width, 3), dtype=np.uint8)
    dots = np.array([[10.0, 10.0], [60.0, 45.0], [110.0, 80.0]])
    for x, y in dots.astype(int):
        pixels[y - 1 : y + 2, x - 1 : x + 2] = 255
    return pixels, dots


def test_a_crop_keeps_its_dots_on_the_heads() -> None:
    pixels, dots = _picture_with_dots()
    rng = np.random.default_rng(3)
    for _ in range(20):
        window, heads = _crop(pixels, dots, 32, 0.5, rng)  # a 64-pixel window made 32
        assert window.shape == (32, 32, 3)
        for x, y in heads:
            assert window[int(y), int(x)].max() > 100  # each dot still marks its bright spot


def test_a_picture_smaller_than_the_window_is_padded_with_nothing() -> None:
    pixels, dots = _picture_with_dots()
    window, heads = _crop(pixels, dots, 64, 0.25, np.random.default_rng(0))  # a 256-pixel window
    assert len(heads) == 3
    assert window[-1, -1].tolist() == [127, 127, 127]


def _samples(tmp_path: Path, n: int) -> list[Sample]:
    samples = []
    for index in range(n):
        pixels, dots = _picture_with_dots()
        path = tmp_path / f"picture{index}.png"
        Image.fromarray(pixels).save(path)
        samples.append(Sample(path=path, count=3.0, split="train", dots=dots, index=index + 1))
    return samples


def test_draws_repeat_for_the_same_seed_and_follow_the_shares(tmp_path: Path) -> None:
    samples = _samples(tmp_path, 2)
    pictures = TrainingPictures({"a": samples[:1], "b": samples[1:], "none": []}, {"a": 1.0, "b": 0.0})
    assert pictures.names == ["a"] and len(pictures) == 1
    first = pictures.draw(np.random.default_rng([0, 5]), 4, 48, (0.7, 1.3), DegradeShares())
    again = pictures.draw(np.random.default_rng([0, 5]), 4, 48, (0.7, 1.3), DegradeShares())
    assert np.array_equal(first.pixels, again.pixels)
    assert all(np.array_equal(a, b) for a, b in zip(first.points, again.points, strict=True))
    assert first.pixels.shape == (4, 48, 48, 3)


def test_training_pictures_refuse_shares_without_pictures(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no train pictures in b"):
        TrainingPictures({"a": _samples(tmp_path, 1), "b": []}, {"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="shares name sets with no pictures: c"):
        TrainingPictures({"a": _samples(tmp_path, 1)}, {"a": 1.0, "c": 1.0})


def test_pictures_are_stored_at_the_largest_scale(tmp_path: Path) -> None:
    pictures = TrainingPictures({"a": _samples(tmp_path, 1)}, {"a": 1.0})
    stored = pictures.pixels["a"][0]
    assert min(stored.shape[:2]) == round(576 * MAX_SCALE)
    factor = min(stored.shape[:2]) / 90
    assert np.allclose(pictures.dots["a"][0], _picture_with_dots()[1] * factor, rtol=0.01)


# -- degradations -----------------------------------------------------------------------------


@pytest.mark.parametrize(("codec", "suffix"), [("MJPG", ".avi"), ("mp4v", ".mp4")])
def test_a_video_frame_is_the_crop_with_a_codecs_loss(codec: str, suffix: str) -> None:
    rng = np.random.default_rng(0)
    pixels = np.clip(rng.normal(128, 40, (63, 65, 3)), 0, 255).astype(np.uint8)  # odd sides
    frame = video_frame(pixels, codec, suffix)
    assert frame.shape == pixels.shape and frame.dtype == np.uint8
    difference = np.abs(frame.astype(float) - pixels).mean()
    assert 0.5 < difference < 40


def test_every_degradation_keeps_the_crop_shape() -> None:
    rng = np.random.default_rng(1)
    pixels = np.clip(rng.normal(128, 40, (40, 40, 3)), 0, 255).astype(np.uint8)
    kinds = {"photo": DegradeShares(1, 0, 0), "video": DegradeShares(0, 1, 0), "gray": DegradeShares(0, 0, 1)}
    for name, shares in kinds.items():
        out = degrade(pixels, rng, shares)
        assert out.shape == pixels.shape and out.dtype == np.uint8, name
    gray = degrade(pixels, rng, kinds["gray"])
    assert np.array_equal(gray[:, :, 0], gray[:, :, 2])
    assert degrade(pixels, rng, DegradeShares(0, 0, 0)) is pixels
    with pytest.raises(ValueError, match="sum to at most 1"):
        DegradeShares(0.6, 0.3, 0.2)


# -- the network ------------------------------------------------------------------------------


def test_the_network_trains_blocks_5_to_10_and_its_decoder_only() -> None:
    network = CrowdNetwork(width=8, depth=1)
    trained = {name for name, parameter in network.named_parameters() if parameter.requires_grad}
    assert trained and all(name.startswith(("upper.", "decoder.")) for name in trained)
    assert all(name.startswith(("upper.", "decoder.")) for name in network.trained_arrays())
    with torch.no_grad():
        density = network(normalise(torch.full((1, 3, 64, 96), 127.0)))
    assert density.shape == (1, 8, 12) and float(density.min()) > 0


def test_the_network_reads_the_backbones_own_block10() -> None:
    """Its frozen and trained parts start as the backbone the count runs (same ImageNet file)."""
    from counting.features.backbones import get_backbone

    network = CrowdNetwork(width=8, depth=1).eval()
    seen: dict[str, torch.Tensor] = {}
    network.upper[-1].register_forward_hook(lambda _m, _a, output: seen.__setitem__("block10", output))
    inputs = normalise(torch.rand(1, 3, 64, 80) * 255)
    with torch.no_grad():
        network(inputs)
    backbone = get_backbone("efficientnet-lite0")
    expected = backbone.feature_maps(inputs.numpy(), ["block10"])["block10"]
    assert np.allclose(seen["block10"].numpy(), expected, atol=1e-3)


# -- training, resuming, the file -------------------------------------------------------------

_TINY = NetworkSettings(steps=4, batch=2, crop=32, width=8, depth=1, warmup=2, ema=0.5, shares={"a": 1.0})


def _pictures(tmp_path: Path) -> TrainingPictures:
    return TrainingPictures({"a": _samples(tmp_path, 2)}, {"a": 1.0})


def test_a_stopped_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    torch.set_num_threads(1)  # one thread: the same sums in the same order both times
    pictures = _pictures(tmp_path)
    whole = train_network(_TINY, pictures, {}, tmp_path / "whole.ckpt", device="cpu", log=lambda _line: None)
    lines: list[str] = []
    stopped = train_network(_TINY, pictures, {}, tmp_path / "part.ckpt", device="cpu", stop_after=0.0, log=lines.append)
    assert stopped.step == 1 and "run again to resume" in lines[-1]
    resumed = train_network(_TINY, pictures, {}, tmp_path / "part.ckpt", device="cpu", log=lines.append)
    assert resumed.step == 4
    assert any(line.startswith("resumed") and "at step 1 of 4" in line for line in lines)
    for name, value in whole.average.items():
        assert torch.equal(value, resumed.average[name]), name
    assert [row["step"] for row in resumed.history] == [4.0]


def test_a_checkpoint_of_other_settings_or_a_damaged_one_is_refused(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    checkpoint = tmp_path / "run.ckpt"
    train_network(_TINY, pictures, {}, checkpoint, device="cpu", stop_after=0.0, log=lambda _line: None)
    with pytest.raises(ValueError, match=r"run.ckpt: a checkpoint of other settings \(crop differ\)"):
        train_network(replace(_TINY, crop=48), pictures, {}, checkpoint, device="cpu", log=lambda _line: None)
    checkpoint.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="run.ckpt: not a readable checkpoint"):
        train_network(_TINY, pictures, {}, checkpoint, device="cpu", log=lambda _line: None)


def test_the_saved_network_counts_as_the_trained_one(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    state = train_network(_TINY, pictures, {}, tmp_path / "run.ckpt", device="cpu", log=lambda _line: None)
    save_network(state, _TINY, tmp_path / "network.npz")
    loaded, settings = load_network(tmp_path / "network.npz")
    assert settings["crop"] == 32
    samples = _samples(tmp_path, 1)
    assert count_pictures(loaded, samples) == pytest.approx(count_pictures(averaged_network(state), samples), rel=1e-5)
    with np.load(tmp_path / "network.npz", allow_pickle=False) as file:  # plain arrays, no pickle
        assert "network/decoder.1.weight" in file.files and "network/decoder.0.scale" in file.files


def test_a_picture_is_counted_at_the_counts_input_size(tmp_path: Path) -> None:
    image = Image.new("RGB", (200, 100), (90, 120, 150))
    inputs = network_input(image)
    assert tuple(inputs.shape) == (1, 3, 576, 1152)
    assert float(inputs[0, 0, 0, 0]) == pytest.approx((90 - 127) / 128)


# -- the network as a density head of the count ------------------------------------------------


def _head() -> tuple[NetworkDensityHead, CrowdNetwork]:
    torch.manual_seed(1)
    network = CrowdNetwork(width=8, depth=1)
    network.calibrate(normalise(torch.rand(2, 3, 64, 64) * 255))
    return NetworkDensityHead.from_network(network, {"trained": "test"}), network


def test_the_head_on_the_backbones_block4_counts_as_the_network_on_pixels() -> None:
    """The count runs the frozen part as its backbone's block4 tap and the head runs the rest:
    together they give the network's own density."""
    from counting.features.backbones import get_backbone

    head, network = _head()
    inputs = normalise(torch.rand(2, 3, 96, 128) * 255)
    block4 = get_backbone("efficientnet-lite0").feature_maps(inputs.numpy(), ["block4"])["block4"]
    with torch.no_grad():
        expected = network.eval()(inputs).double().numpy()
    density = head.density(block4)
    assert density.shape == (2, 12, 16)
    assert np.allclose(density, expected, rtol=1e-3, atol=1e-5)
    sums = head.region_counts(block4, grid=(2, 2))
    assert sums.shape == (2, 5) and np.allclose(sums[:, 0], density.sum(axis=(1, 2)))
    assert np.allclose(sums[:, 1:].sum(axis=1), sums[:, 0])


def test_the_head_round_trips_through_a_model_document() -> None:
    head, _ = _head()
    document = json.loads(json.dumps(head_to_document(head)))
    assert document["head_kind"] == "network" and document["layers"] == ["block4"]
    back = head_from_document(document, "m.npz")
    maps = np.random.default_rng(0).normal(0, 3, (1, 40, 6, 7))
    assert np.allclose(back.density(maps), head.density(maps), rtol=1e-5)
    assert back.settings == {"trained": "test"} and back.stride == 8 and back.specialists == {}


def _edit_width(document: dict) -> None:
    document["width"] = 16


def _edit_drop(document: dict) -> None:
    del document["arrays"]["decoder.1.weight"]


def _edit_nan(document: dict) -> None:
    document["arrays"]["decoder.1.bias"] = encode_array(np.full(8, np.nan))


def _edit_shape(document: dict) -> None:
    document["arrays"]["decoder.1.bias"] = encode_array(np.zeros(9))


def _edit_scale(document: dict) -> None:
    document["arrays"]["decoder.0.scale"] = encode_array(np.zeros((1, 232, 1, 1)))


def _edit_layers(document: dict) -> None:
    document["layers"] = ["block7"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_edit_width, r"array 'decoder.1.weight' has shape \(8, 232, 1, 1\), expected \(16, 232, 1, 1\)"),
        (_edit_drop, r"arrays do not match a network of width 8, depth 1 \(missing \['decoder.1.weight'\]"),
        (_edit_nan, "array 'decoder.1.bias' must hold finite floats"),
        (_edit_shape, r"array 'decoder.1.bias' has shape \(9,\), expected \(8,\)"),
        (_edit_scale, "the decoder.s standardisation scale must be positive"),
        (_edit_layers, "layers must be \\['block4'\\] at stride 8"),
    ],
)
def test_a_tampered_network_section_is_one_line(edit, message: str) -> None:
    head, _ = _head()
    document = json.loads(json.dumps(head_to_document(head)))
    edit(document)
    with pytest.raises(DensityHeadError, match=f"^m.npz: network density head: {message}"):
        head_from_document(document, "m.npz")


def test_training_leaves_the_frozen_blocks_as_the_backbone_has_them(tmp_path: Path) -> None:
    """Batch norms move their running statistics on any pass in training mode: the frozen blocks
    (and the trained blocks' statistics) must keep the ImageNet file's, or the count's backbone
    would feed the trained part other maps than it trained on."""
    pristine = CrowdNetwork(width=8, depth=1).state_dict()
    state = train_network(_TINY, _pictures(tmp_path), {}, tmp_path / "run.ckpt", device="cpu", log=lambda _line: None)
    trained = state.network.state_dict()
    statistics = [name for name in pristine if "running_" in name]
    assert statistics
    for name in statistics:
        assert torch.equal(pristine[name], trained[name]), name
    for name in pristine:
        if name.startswith(("stem.", "lower.")):
            assert torch.equal(pristine[name], trained[name]), name


def test_a_stopped_runs_network_can_be_written_from_its_checkpoint(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    stopped = train_network(
        _TINY, pictures, {}, tmp_path / "run.ckpt", device="cpu", stop_after=0.0, log=lambda _line: None
    )
    state = checkpoint_state(_TINY, tmp_path / "run.ckpt")
    assert state.step == stopped.step == 1
    for name, value in stopped.average.items():
        assert torch.equal(value, state.average[name]), name
    save_network(state, _TINY, tmp_path / "network.npz")
    with np.load(tmp_path / "network.npz", allow_pickle=False) as file:
        assert int(file["step"]) == 1
    with pytest.raises(ValueError, match="other.ckpt: no checkpoint there"):
        checkpoint_state(_TINY, tmp_path / "other.ckpt")


def test_a_run_can_start_from_a_finished_runs_network(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    first = train_network(_TINY, pictures, {}, tmp_path / "one.ckpt", device="cpu", log=lambda _line: None)
    save_network(first, _TINY, tmp_path / "one.npz")
    settings = replace(_TINY, init=str(tmp_path / "one.npz"), steps=1)
    started = train_network(
        settings, pictures, {}, tmp_path / "two.ckpt", device="cpu", stop_after=0.0, log=lambda _line: None
    )
    # Its weights began as the first run's average: after one step they are near it, not ImageNet's.
    change = max(
        float((started.network.trained_arrays()[name] - value).abs().max())
        for name, value in first.average.items()
        if value.dtype.is_floating_point
    )
    assert change < 0.01
    assert torch.equal(started.network.trained_arrays()["decoder.0.scale"], first.average["decoder.0.scale"])
    with pytest.raises(ValueError, match="missing.npz: network file not found"):
        train_network(
            replace(_TINY, init=str(tmp_path / "missing.npz")), pictures, {}, tmp_path / "three.ckpt", device="cpu"
        )


def test_a_bfloat16_run_trains_and_its_network_counts_in_float32(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    settings = replace(_TINY, precision="bfloat16")
    state = train_network(settings, pictures, {}, tmp_path / "run.ckpt", device="cpu", log=lambda _line: None)
    start = CrowdNetwork(width=8, depth=1).trained_arrays()
    moved = [name for name, value in state.network.trained_arrays().items() if not torch.equal(value, start[name])]
    assert any(name.startswith("upper.") for name in moved) and any(name.startswith("decoder.") for name in moved)
    assert all(value.dtype != torch.bfloat16 for value in state.average.values())  # the weights stay float32
    save_network(state, settings, tmp_path / "network.npz")
    loaded, recorded = load_network(tmp_path / "network.npz")
    assert recorded["precision"] == "bfloat16"
    counts = count_pictures(loaded, _samples(tmp_path, 1))
    assert np.isfinite(counts).all() and counts[0] >= 0


def test_a_checkpoint_from_before_a_setting_existed_resumes_with_its_default(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    checkpoint = tmp_path / "run.ckpt"
    train_network(_TINY, pictures, {}, checkpoint, device="cpu", stop_after=0.0, log=lambda _line: None)
    payload = torch.load(checkpoint, weights_only=True)
    older = json.loads(payload["settings"])
    del older["precision"]  # as written before the setting was added
    payload["settings"] = json.dumps(older)
    torch.save(payload, checkpoint)
    lines: list[str] = []
    assert train_network(_TINY, pictures, {}, checkpoint, device="cpu", log=lines.append).step == 4
    assert any("resumed" in line for line in lines)
    with pytest.raises(ValueError, match=r"a checkpoint of other settings \(precision differ\)"):
        train_network(replace(_TINY, precision="bfloat16"), pictures, {}, checkpoint, device="cpu")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": 0}, "steps must be at least 1"),
        ({"batch": 0}, "batch must be at least 1"),
        ({"crop": 100}, "crop must be a multiple of 8"),
        ({"learning_rate": float("nan")}, "learning rate must be a positive number"),
        ({"precision": "float16"}, "precision must be 'float32' or 'bfloat16'"),
        ({"loss": "mse"}, "loss must be 'density' or 'bayesian'"),
    ],
)
def test_settings_that_cannot_train_are_refused(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NetworkSettings(**change)


def test_a_damaged_network_file_is_one_line(tmp_path: Path) -> None:
    pictures = _pictures(tmp_path)
    state = train_network(_TINY, pictures, {}, tmp_path / "run.ckpt", device="cpu", log=lambda _line: None)
    good = tmp_path / "network.npz"
    save_network(state, _TINY, good)
    (tmp_path / "random.npz").write_bytes(np.random.default_rng(0).bytes(3000))
    (tmp_path / "cut.npz").write_bytes(good.read_bytes()[:5000])
    with np.load(good, allow_pickle=False) as file:
        arrays = dict(file)
    arrays["network/decoder.1.weight"] = np.full_like(arrays["network/decoder.1.weight"], np.nan)
    np.savez(tmp_path / "nan.npz", **arrays)
    arrays = {name: value for name, value in arrays.items() if name != "network/decoder.1.weight"}
    np.savez(tmp_path / "short.npz", **arrays)
    for name, message in [
        ("random.npz", "random.npz: not a crowd network file"),
        ("cut.npz", "cut.npz: not a crowd network file"),
        ("nan.npz", "nan.npz: array decoder.1.weight holds values that are not finite"),
        ("short.npz", "short.npz: network arrays do not match: missing \\['decoder.1.weight'\\]"),
    ]:
        with pytest.raises(ValueError, match=message) as caught:
            load_network(tmp_path / name)
        assert "\n" not in str(caught.value)


def test_a_checkpoint_that_cannot_be_written_keeps_the_one_before(tmp_path: Path, monkeypatch) -> None:
    pictures = _pictures(tmp_path)
    checkpoint = tmp_path / "run.ckpt"
    train_network(_TINY, pictures, {}, checkpoint, device="cpu", stop_after=0.0, log=lambda _line: None)
    before = checkpoint.read_bytes()

    def full_disk(payload: object, file: BinaryIO) -> None:
        file.write(b"half a checkpoint")
        raise RuntimeError("[enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="run.ckpt: checkpoint not written .* the one before it, if any, is kept"):
        train_network(_TINY, pictures, {}, checkpoint, device="cpu", log=lambda _line: None)
    assert checkpoint.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir() if "ckpt" in path.name) == ["run.ckpt"]


@pytest.mark.slow  # a subprocess per case
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["-o", "run.npz", "--init", "run.npz"], "run.npz: is also an input of this command; choose another name"),
        (["-o", "data/run.npz"], "which this command reads its data from"),
        (["-o", "run.npz", "--init", "junk.npz"], "junk.npz: not a crowd network file (not an .npz archive)"),
        (["-o", "run.npz", "--steps", "0"], "steps must be at least 1, got 0"),
        (["-o", "run.npz", "--export"], "run.npz.ckpt: no checkpoint there"),
    ],
)
def test_the_training_script_refuses_bad_input_in_one_line_before_reading_pictures(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "data").mkdir()
    (tmp_path / "junk.npz").write_bytes(b"\x80\x04not an archive")
    (tmp_path / "run.npz").write_bytes(b"kept")
    result = subprocess.run(
        [sys.executable, str(root / "scripts" / "train_crowd_network.py"), "--data", "data", *arguments],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("train_crowd_network.py: ") and message in lines[0], lines
    assert (tmp_path / "run.npz").read_bytes() == b"kept"  # nothing that existed is touched
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data", "junk.npz", "run.npz"]


def test_the_crowd_parts_are_the_fixed_ones_without_the_mislabelled_photo(shared_data: Path) -> None:
    from counting.data import read_crowd
    from counting.train import crowd_parts

    train, validation = crowd_parts(read_crowd(shared_data))
    sizes = {name: len(samples) for name, samples in validation.items()}
    assert sizes == {"shanghaitech-A": 75, "shanghaitech-B": 100, "mall": 200, "coco-voc20": 133}
    assert {name: len(samples) for name, samples in train.items()} == {
        "shanghaitech-A": 225,
        "shanghaitech-B": 300,
        "mall": 600,
        "coco-voc20": 400,
    }
    everything = [sample for part in (train, validation) for samples in part.values() for sample in samples]
    assert "000000002299" not in {sample.path.stem for sample in everything}
    assert len({str(sample.path) for sample in everything}) == len(everything)  # no picture in both
    assert [sample.path.stem for sample in validation["mall"][:2]] == ["seq_000601", "seq_000602"]
