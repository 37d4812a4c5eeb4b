"""Backbones: real ImageNet weights, preprocessing, trace == eager, grids, ResNet-50 weight loading."""

from __future__ import annotations

import functools
import hashlib
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from counting.core.errors import BackboneError, ImageError
from counting.data.imaging import load_image
from counting.features.backbones import BACKBONES, Preprocessing, configure_runtime, get_backbone, stack_prepared
from counting.features.backbones.base import Backbone
from counting.features.backbones.efficientnet import packaged_weights_path
from counting.features.backbones.resnet import IMAGENET_NORMALISATION, ResNet50
from counting.features.backbones.weights import RESNET50_HUB_FILES, resolve_resnet50_weights

PALACE = 698  # ImageNet class of scikit-learn's china.jpg (the Summer Palace)


@pytest.fixture(autouse=True, scope="module")
def _torch_runtime():
    """These tests are about the torch networks, traces and weight files (the onnxruntime layer
    has tests/counting/test_onnx_runtime.py): no ONNX export of every test checkpoint."""
    configure_runtime("torch")
    yield
    configure_runtime(None)


@pytest.fixture(scope="session")
def effnet() -> Backbone:
    backbone = get_backbone("efficientnet-lite0", runtime="torch")
    # Tests run each shape a few times only: stay eager (tracing has its own test below).
    backbone.trace_after = 1_000_000
    return backbone


@pytest.fixture(scope="session")
def china() -> Image.Image:
    from sklearn.datasets import load_sample_image

    return Image.fromarray(load_sample_image("china.jpg"))


def _centre_crop_224(image: Image.Image) -> Image.Image:
    """The ImageNet evaluation crop, used only to prove the weights are the real ones."""
    scale = 256 / min(image.size)
    resized = image.resize((round(image.width * scale), round(image.height * scale)), Image.BILINEAR)
    left, top = (resized.width - 224) // 2, (resized.height - 224) // 2
    return resized.crop((left, top, left + 224, top + 224))


# -- efficientnet-lite0: real weights ------------------------------------------------------------
def test_efficientnet_has_real_imagenet_weights(effnet: Backbone, china: Image.Image) -> None:
    batch = effnet.prepare(_centre_crop_224(china), Preprocessing(input_size=None))[None]
    scores = effnet.forward(batch)
    assert scores.shape == (1, 1000) and scores.dtype == np.float32
    assert int(scores[0].argmax()) == PALACE


def test_whole_frame_preprocessing_keeps_palace_among_top5(effnet: Backbone, china: Image.Image) -> None:
    tensor = effnet.prepare(china, Preprocessing(input_size=224))
    # Whole 640x427 frame, short side 224, aspect kept: nothing cropped away.
    assert tuple(tensor.shape) == (3, 224, round(640 * 224 / 427))
    top5 = np.argsort(-effnet.forward(tensor[None])[0])[:5]
    assert PALACE in top5


def test_efficientnet_identity(effnet: Backbone) -> None:
    expected = hashlib.sha256(packaged_weights_path().read_bytes()).hexdigest()
    assert effnet.name == "efficientnet-lite0" and "efficientnet-lite0" in BACKBONES
    assert effnet.weights_sha256 == expected
    assert effnet.feature_dim == 1000 and effnet.pooled_dim == 1280


# -- preprocessing ---------------------------------------------------------------------------------
def test_input_size_is_short_side_with_aspect_kept(effnet: Backbone) -> None:
    portrait = Image.new("RGB", (300, 500), (127, 127, 127))
    assert tuple(effnet.prepare(portrait, Preprocessing(input_size=120)).shape) == (3, 200, 120)
    assert tuple(effnet.prepare(portrait, Preprocessing(input_size=None)).shape) == (3, 500, 300)


def test_backbone_normalisations() -> None:
    effnet_grey = get_backbone("efficientnet-lite0").prepare(
        np.full((8, 8, 3), 127, np.uint8), Preprocessing(input_size=None)
    )
    assert torch.count_nonzero(effnet_grey) == 0  # (127 - 127) / 128
    white = get_backbone("efficientnet-lite0").prepare(np.full((8, 8), 255, np.uint8), Preprocessing(None))
    torch.testing.assert_close(white, torch.full((3, 8, 8), 1.0))  # grayscale -> 3 channels
    mean_pixel = np.array(IMAGENET_NORMALISATION.mean, dtype=np.float32)
    from counting.features.backbones.preprocessing import prepare_image

    near_mean = prepare_image(
        np.broadcast_to(np.round(mean_pixel).astype(np.uint8), (4, 4, 3)).copy(),
        Preprocessing(None),
        IMAGENET_NORMALISATION,
    )
    assert float(near_mean.abs().max()) < 0.01


def test_roi_mask_blanks_outside_and_only_outside(effnet: Backbone, mall_root: Path) -> None:
    frame = load_image(mall_root / "frames" / "seq_000001.jpg").resize((160, 120))
    mask = np.zeros((120, 160), bool)
    mask[30:90, 40:120] = True
    plain = effnet.prepare(frame, Preprocessing(input_size=None))
    masked = effnet.prepare(frame, Preprocessing(input_size=None, roi_mask=mask))
    assert torch.count_nonzero(masked[:, ~torch.from_numpy(mask)]) == 0
    torch.testing.assert_close(masked[:, torch.from_numpy(mask)], plain[:, torch.from_numpy(mask)])

    # What lies outside the ROI no longer matters to the descriptor.
    scribbled = np.array(frame)
    scribbled[~mask] = np.random.default_rng(0).integers(0, 256, size=(int((~mask).sum()), 3))
    with_roi = Preprocessing(input_size=None, roi_mask=mask)
    a = effnet.forward(effnet.prepare(frame, with_roi)[None])
    b = effnet.forward(effnet.prepare(scribbled, with_roi)[None])
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert np.abs(effnet.forward(plain[None]) - a).max() > 0.1  # and the ROI did change it


def test_roi_mask_is_resized_with_the_image(effnet: Backbone) -> None:
    mask = np.zeros((100, 200), bool)
    mask[:, :100] = True  # left half
    tensor = effnet.prepare(np.full((100, 200, 3), 200, np.uint8), Preprocessing(input_size=50, roi_mask=mask))
    assert tuple(tensor.shape) == (3, 50, 100)
    assert bool((tensor[:, :, :49] != 0).all()) and torch.count_nonzero(tensor[:, :, 51:]) == 0


def test_roi_mask_of_wrong_shape_names_the_image(effnet: Backbone) -> None:
    prep = Preprocessing(input_size=64, roi_mask=np.ones((48, 64), bool))
    with pytest.raises(ImageError, match=r"^frames/seq_9\.jpg: ROI mask is 64x48 \(WxH\) but the image is 80x60$"):
        effnet.prepare(np.zeros((60, 80, 3), np.uint8), prep, source="frames/seq_9.jpg")


def test_preprocessing_compares_by_settings() -> None:
    mask = np.zeros((4, 6), bool)
    mask[1:3, 2:5] = True
    same = Preprocessing(96, roi_mask=mask.copy())
    assert Preprocessing(96, roi_mask=mask) == same and hash(Preprocessing(96, roi_mask=mask)) == hash(same)
    assert Preprocessing(96, roi_mask=~mask) != same and Preprocessing(97, roi_mask=mask) != same
    assert Preprocessing(96).fingerprint() == {
        "input_size": 96,
        "roi_mask_sha256": None,
        "resize": "pil-bilinear-reducing-gap-1.05",
    }
    assert Preprocessing(None).fingerprint() == {"input_size": None, "roi_mask_sha256": None}
    assert len(same.fingerprint()["roi_mask_sha256"]) == 64


def test_preprocessing_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="input_size"):
        Preprocessing(input_size=0)
    with pytest.raises(ValueError, match="roi_mask"):
        Preprocessing(roi_mask=np.ones(5, bool))


# -- inference paths -------------------------------------------------------------------------------
def test_frozen_trace_matches_eager_for_several_shapes(effnet: Backbone, mall_root: Path, monkeypatch) -> None:
    monkeypatch.setattr(effnet, "trace_after", 1)
    frames = [load_image(mall_root / "frames" / f"seq_00000{i}.jpg") for i in (1, 2)]
    for size in (64, 97):  # 64x85 and an odd 97x129: "same" padding must follow the shape
        batch = torch.stack([effnet.prepare(frame, Preprocessing(input_size=size)) for frame in frames])
        reference = effnet.eager_forward(batch)
        runs = effnet.trace_after + 2  # eager runs, then the trace is made, then reused
        outputs = [effnet.forward(batch) for _ in range(runs)]
        assert tuple(batch.shape) in effnet._traces
        for output in outputs:
            np.testing.assert_allclose(output, reference, rtol=1e-4, atol=1e-3)
    # Different frames give different descriptors (the network is not ignoring its input).
    assert np.abs(reference[0] - reference[1]).max() > 1e-3


def test_a_trace_that_disagrees_with_eager_is_not_used(effnet: Backbone, monkeypatch) -> None:
    monkeypatch.setattr(effnet, "trace_after", 0)
    monkeypatch.setattr(effnet, "_trace", lambda example: lambda inputs: effnet._eager(inputs) * 2)
    batch = torch.from_numpy(np.random.default_rng(2).normal(size=(1, 3, 40, 48)).astype(np.float32))
    reference = effnet.eager_forward(batch)
    with pytest.warns(RuntimeWarning, match="frozen trace differs from eager"):
        first = effnet.forward(batch)
    second = effnet.forward(batch)  # that shape now stays eager, without warning again
    np.testing.assert_allclose(first, reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, reference, rtol=1e-5, atol=1e-5)


def test_grid_one_by_one_equals_forward_and_cells_average_to_whole(effnet: Backbone, mall_root: Path) -> None:
    frame = load_image(mall_root / "frames" / "seq_000010.jpg")
    batch = effnet.prepare(frame, Preprocessing(input_size=160))[None]  # 160x213 -> 5x7 map
    assert tuple(effnet.feature_map(batch).shape) == (1, 1280, 5, 7)
    whole = effnet.forward(batch)
    np.testing.assert_allclose(effnet.forward_grid(batch, (1, 1))[:, 0], whole, rtol=1e-5, atol=1e-5)
    # Cells that split the 5x7 map evenly average back to the whole frame (pool and fc are linear).
    cells = effnet.forward_grid(batch, (5, 7))
    assert cells.shape == (1, 35, 1000)
    np.testing.assert_allclose(cells.mean(axis=1), whole, rtol=1e-4, atol=1e-4)
    assert np.abs(cells[0, 0] - cells[0, -1]).max() > 0.1  # corners see different things
    pooled = effnet.forward_pooled(batch)
    assert pooled.shape == (1, 1280)
    np.testing.assert_allclose(effnet.forward_grid_pooled(batch, (5, 1)).mean(axis=1), pooled, rtol=1e-4, atol=1e-5)


def test_stack_prepared_gives_a_channels_last_batch(effnet: Backbone) -> None:
    rng = np.random.default_rng(3)
    images = [effnet.prepare(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8), Preprocessing(None)) for _ in range(3)]
    batch = stack_prepared(images)
    assert batch.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(batch, torch.stack(images), rtol=0, atol=0)
    with pytest.raises(ValueError, match="share a shape"):
        stack_prepared([images[0], effnet.prepare(np.zeros((10, 10, 3), np.uint8), Preprocessing(None))])


def test_unknown_backbone_is_a_one_line_error() -> None:
    with pytest.raises(
        BackboneError,
        match=r"^vgg16: unknown backbone \(choose from efficientnet-lite0, resnet50, centernet, centernet-letterbox\)$",
    ):
        get_backbone("vgg16")


# -- resnet50 --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def resnet_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-init ResNet-50 state dict saved like torchvision's files."""
    torch.manual_seed(0)
    network = ResNet50()
    for module in network.modules():  # non-trivial BN statistics so eval mode is exercised
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("resnet") / "random-resnet50.pth"
    torch.save(network.state_dict(), path)
    return path


def test_resnet50_has_torchvision_layout() -> None:
    state = ResNet50().state_dict()
    assert len(state) == 320
    assert sum(p.numel() for p in ResNet50().parameters()) == 25_557_032  # torchvision's count
    for key in (
        "conv1.weight",
        "bn1.running_var",
        "layer1.0.downsample.0.weight",
        "layer1.0.downsample.1.bias",
        "layer3.5.conv3.weight",
        "layer4.2.bn3.num_batches_tracked",
        "fc.weight",
        "fc.bias",
    ):
        assert key in state
    assert tuple(state["layer2.0.conv2.weight"].shape) == (128, 128, 3, 3)  # stride on the 3x3 (V1.5)


def test_resnet50_from_explicit_file(resnet_checkpoint: Path) -> None:
    backbone = get_backbone("resnet50", weights=resnet_checkpoint)
    assert backbone.name == "resnet50" and backbone.pooled_dim == 2048
    assert backbone.weights_sha256 == hashlib.sha256(resnet_checkpoint.read_bytes()).hexdigest()
    reference = ResNet50()
    reference.load_state_dict(torch.load(resnet_checkpoint, weights_only=True))
    reference.eval()
    pixels = np.random.default_rng(1).integers(0, 256, size=(70, 90, 3), dtype=np.uint8)
    batch = backbone.prepare(pixels, Preprocessing(input_size=64))[None]
    assert tuple(batch.shape) == (1, 3, 64, 82)
    mean = torch.tensor(IMAGENET_NORMALISATION.mean).view(3, 1, 1)
    std = torch.tensor(IMAGENET_NORMALISATION.std).view(3, 1, 1)
    resized = torch.from_numpy(np.array(Image.fromarray(pixels).resize((82, 64), Image.BILINEAR))).permute(2, 0, 1)
    with torch.no_grad():
        expected = reference(((resized.float() - mean) / std)[None]).numpy()
    backbone.trace_after = 1
    for _ in range(3):  # eager, then frozen trace (made), then frozen trace (reused)
        np.testing.assert_allclose(backbone.forward(batch), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(backbone.forward_grid(batch, (1, 1))[:, 0], expected, rtol=1e-4, atol=1e-4)


def test_resnet50_found_in_torch_hub_cache(resnet_checkpoint: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    (tmp_path / "checkpoints").mkdir()
    for name in reversed(RESNET50_HUB_FILES):  # V2 alone first, then V1 is preferred
        (tmp_path / "checkpoints" / name).symlink_to(resnet_checkpoint)
        assert get_backbone("resnet50").weights_path == tmp_path / "checkpoints" / name


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def weights_server(resnet_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Serve the checkpoint on 127.0.0.1 under a torchvision-style name with its real hash prefix."""
    root = tmp_path_factory.mktemp("served")
    prefix = hashlib.sha256(resnet_checkpoint.read_bytes()).hexdigest()[:8]
    (root / f"resnet50-{prefix}.pth").symlink_to(resnet_checkpoint)
    (root / "resnet50-0000dead.pth").symlink_to(resnet_checkpoint)  # name claims a wrong hash
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", prefix
    server.shutdown()
    server.server_close()


def test_resnet50_download_checks_the_hash(
    weights_server: tuple[str, str], resnet_checkpoint: Path, tmp_path: Path
) -> None:
    base, prefix = weights_server
    path = resolve_resnet50_weights(url=f"{base}/resnet50-{prefix}.pth", hub_dir=tmp_path)
    assert path == tmp_path / f"resnet50-{prefix}.pth"
    assert path.read_bytes() == resnet_checkpoint.read_bytes()

    bad_dir = tmp_path / "bad"
    with pytest.raises(
        BackboneError, match=r"resnet50-0000dead\.pth: downloaded file failed its hash check .*--weights FILE"
    ):
        resolve_resnet50_weights(url=f"{base}/resnet50-0000dead.pth", hub_dir=bad_dir)
    assert not any(bad_dir.iterdir())  # nothing unverified left in the cache


def test_resnet50_offline_says_how_to_provide_weights(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the download is refused
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(BackboneError) as caught:
        resolve_resnet50_weights(url=f"http://127.0.0.1:{closed_port}/resnet50-0676ba61.pth", hub_dir=tmp_path)
    message = str(caught.value)
    assert "cannot download resnet50 weights" in message and "--weights FILE" in message
    assert str(tmp_path) in message and "\n" not in message
    with pytest.raises(BackboneError, match="downloading is off; pass --weights FILE"):
        resolve_resnet50_weights(hub_dir=tmp_path, allow_download=False)


def test_bad_weight_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(BackboneError, match=r"missing\.pth: weights file not found$"):
        get_backbone("resnet50", weights=tmp_path / "missing.pth")
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(BackboneError, match=r"corrupt\.pth: not a readable PyTorch checkpoint"):
        get_backbone("resnet50", weights=corrupt)
    with pytest.raises(BackboneError, match=r"not a resnet50 checkpoint: \d+ missing keys"):
        get_backbone("resnet50", weights=packaged_weights_path())  # efficientnet's file
    with pytest.raises(BackboneError, match=r"not a efficientnet-lite0 checkpoint"):
        small = tmp_path / "small.pth"
        torch.save({"fc.weight": torch.zeros(2, 2)}, small)
        get_backbone("efficientnet-lite0", weights=small)


@pytest.mark.parametrize("uniform", [True, False])
def test_planar_and_channels_last_inputs_hold_the_same_values(uniform: bool) -> None:
    from counting.features.backbones.preprocessing import Normalisation, prepare_image

    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    mask = np.zeros((60, 80), dtype=bool)
    mask[10:50, 5:70] = True
    normalisation = (
        Normalisation((127.0, 127.0, 127.0), (128.0, 128.0, 128.0))
        if uniform
        else Normalisation((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))
    )
    for prep in (Preprocessing(input_size=32), Preprocessing(input_size=None, roi_mask=mask)):
        hwc = prepare_image(pixels, prep, normalisation, channels_last=True)
        planar = prepare_image(pixels, prep, normalisation, channels_last=False)
        assert planar.is_contiguous() and not hwc.is_contiguous()  # (3, H, W) memory vs a view of (H, W, 3)
        assert torch.equal(planar, hwc)


def _reference_prepare(picture: Image.Image, size: tuple[int, int], normalisation) -> np.ndarray:
    """The published preprocessing, spelled out with PIL alone: the values every path must give."""
    from counting.features.backbones.preprocessing import _REDUCING_GAP

    resized = np.asarray(picture.resize(size, Image.BILINEAR, reducing_gap=_REDUCING_GAP), dtype=np.float32)
    mean = np.asarray(normalisation.mean, np.float32)
    scale = 1.0 / np.asarray(normalisation.std, np.float32)
    return ((resized - mean) * scale).transpose(2, 0, 1)


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize(
    "source_size",
    [(640, 480), (640, 427), (1024, 768), (500, 333), (96, 64), (4032, 3024), (1001, 2999), (2999, 667)],
    ids=lambda size: "x".join(map(str, size)),
)
def test_pil_rgb_array_and_bgr_array_inputs_give_the_pil_resize_exactly(source_size, uniform: bool) -> None:
    # 640x480 at 224 takes the OpenCV 2x2 box reduction (PIL's reduce, bit for bit); arrays of
    # the other sizes (odd sides, 3x, 13x and unequal reductions with partial edge boxes,
    # upscaling) take PIL's reduce and resize on a mapped RGBX buffer. All must agree with PIL
    # given the RGB picture.
    from counting.features.backbones.preprocessing import Normalisation, prepare_image, reduction_factors

    rng = np.random.default_rng(sum(source_size))
    # Smooth structure plus noise, so that the box averages exercise their rounding.
    base = np.asarray(Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).resize(source_size))
    pixels = np.clip(base + rng.integers(-20, 21, base.shape), 0, 255).astype(np.uint8)
    picture = Image.fromarray(pixels)
    normalisation = (
        Normalisation((127.0, 127.0, 127.0), (128.0, 128.0, 128.0))
        if uniform
        else Normalisation((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))
    )
    prep = Preprocessing(input_size=224)
    size = prep.target_size(*source_size)
    expected = _reference_prepare(picture, size, normalisation)
    for channels_last in (False, True):
        for image, bgr in ((picture, False), (pixels, False), (np.ascontiguousarray(pixels[:, :, ::-1]), True)):
            prepared = prepare_image(image, prep, normalisation, channels_last=channels_last, bgr=bgr)
            np.testing.assert_array_equal(prepared.numpy(), expected)
    if source_size == (640, 480):
        assert reduction_factors(*source_size, size) == (2, 2)  # the OpenCV path was exercised


def test_flipped_input_is_the_mirror_of_the_unflipped_one(mall_root: Path) -> None:
    from counting.data.imaging import load_pixels
    from counting.features.backbones.preprocessing import Normalisation, prepare_image

    pixels, bgr = load_pixels(mall_root / "frames" / "seq_000001.jpg")
    normalisation = Normalisation((127.0, 127.0, 127.0), (128.0, 128.0, 128.0))
    mask = np.ones((480, 640), dtype=bool)
    mask[:100] = False
    for channels_last in (False, True):
        straight = prepare_image(pixels, Preprocessing(224, mask), normalisation, channels_last=channels_last, bgr=bgr)
        mirrored = prepare_image(
            pixels, Preprocessing(224, mask, flip=True), normalisation, channels_last=channels_last, bgr=bgr
        )
        assert torch.equal(mirrored, straight.flip(-1))
