"""MB3-CenterNet on ONNX Runtime: pictures -> heat maps, box sides, detections in picture pixels.

The converted ONNX file is cached next to the exported backbones (``$COUNTING_ONNX_DIR``, else
``onnx/`` in ``$COUNTING_CACHE_DIR``, else ``~/.cache/counting/onnx``:
``counting.features.cache.default_export_dir``, the backbones' rule),
named by the hashes of the two source files and the converter version, so a new package or
converter gets a new file. First use: fetch (npm pack) + convert, a few seconds.

Input as in ``human`` (``src/object/centernet.ts``): the whole picture stretched to 512x512 (no
letterbox) by TensorFlow's legacy bilinear resize (``align_corners=False, half_pixel_centers=
False``: source coordinate = destination x in/out, no antialiasing), RGB values 0-255.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import BackboneError
from counting.core.files import atomic_write_bytes, atomic_write_text
from counting.features.detector.decode import STRIDE, TOP_K, Detections, decode_detections
from counting.features.detector.fetch import MODEL_FILES, fetch_model_files

__all__ = ["CONVERTER_VERSION", "INPUT_SIZE", "CenterNet", "detector_onnx_path", "resize_tf_bilinear", "to_input"]

INPUT_SIZE = 512
CONVERTER_VERSION = 1
OUTPUTS = ("tower_0/keypoints", "tower_0/wh")
INPUT_NAME = "tower_0/images"


def _export_dir() -> Path:
    # The backbones' rule, one definition (counting.features.cache, which imports no torch).
    from counting.features.cache import default_export_dir

    return default_export_dir()


def detector_onnx_path(directory: Path | None = None) -> Path:
    """Where the converted model lives: keyed by the source hashes and the converter version."""
    key = hashlib.sha256(
        json.dumps({"files": MODEL_FILES, "converter": CONVERTER_VERSION, "outputs": OUTPUTS}, sort_keys=True).encode()
    ).hexdigest()[:16]
    return (directory if directory is not None else _export_dir()) / f"centernet-{key}.onnx"


def ensure_onnx(directory: Path | None = None, report: Callable[[str], None] | None = None) -> Path:
    """The converted ONNX file, fetching the model files and converting them if it is missing."""
    path = detector_onnx_path(directory)
    description = path.with_suffix(".json")
    if path.is_file() and description.is_file():
        try:
            recorded = json.loads(description.read_text()).get("sha256")
        except (OSError, ValueError):
            recorded = None
        if recorded == hashlib.sha256(path.read_bytes()).hexdigest():
            return path
    files = fetch_model_files(report=report)
    if report is not None:
        report("converting the tfjs graph to ONNX")
    from counting.features.detector.convert import convert_tfjs_graph

    data = convert_tfjs_graph(files["centernet.json"], OUTPUTS)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        atomic_write_text(
            description,
            json.dumps(
                {
                    "source": "@vladmandic/human@3.3.6 models/centernet.{json,bin}",
                    "source_sha256": MODEL_FILES,
                    "converter_version": CONVERTER_VERSION,
                    "outputs": list(OUTPUTS),
                    "sha256": hashlib.sha256(data).hexdigest(),
                },
                indent=2,
            ),
        )
    except OSError as error:
        raise BackboneError(f"{path.parent}: cannot store the converted detector ({error.strerror or error})") from None
    return path


def _axis_weights(source: int, target: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TF legacy bilinear along one axis: low index, high index, weight of the high one."""
    position = np.arange(target, dtype=np.float64) * (source / target)
    low = np.floor(position).astype(np.intp)
    high = np.minimum(low + 1, source - 1)
    return low, high, (position - low).astype(np.float32)


def resize_tf_bilinear(pixels: np.ndarray, size: int = INPUT_SIZE) -> np.ndarray:
    """``(H, W, 3)`` -> ``(size, size, 3)`` float32, as ``tf.image.resizeBilinear`` (legacy mode)."""
    height, width = pixels.shape[:2]
    rows_low, rows_high, row_weight = _axis_weights(height, size)
    cols_low, cols_high, col_weight = _axis_weights(width, size)
    image = np.asarray(pixels, np.float32)
    # Rows first on the whole picture, then columns on the size-row result (the cheaper order
    # when the picture is larger than the target).
    top, bottom = image[rows_low], image[rows_high]
    rows = top + (bottom - top) * row_weight[:, None, None]
    left, right = rows[:, cols_low], rows[:, cols_high]
    return left + (right - left) * col_weight[None, :, None]


def resize_planes_tf_bilinear(planes: np.ndarray, size: int = INPUT_SIZE) -> np.ndarray:
    """``(C, H, W)`` -> ``(C, size, size)`` float32: :func:`resize_tf_bilinear` on planar data
    (a backbone's prepared input is planar; no transposes, and the rows step is contiguous)."""
    height, width = planes.shape[1:]
    rows_low, rows_high, row_weight = _axis_weights(height, size)
    cols_low, cols_high, col_weight = _axis_weights(width, size)
    image = np.asarray(planes, np.float32)
    top, bottom = image[:, rows_low], image[:, rows_high]
    rows = top + (bottom - top) * row_weight[None, :, None]
    left, right = rows[:, :, cols_low], rows[:, :, cols_high]
    return left + (right - left) * col_weight[None, None, :]


def rgb_pixels(image: Any, *, bgr: bool = False) -> np.ndarray:
    """``(H, W, 3)`` RGB pixels of a PIL image, ``imaging.Sideways`` or an array (BGR with
    ``bgr``; grey arrays repeated, an alpha plane dropped; an array's dtype is kept)."""
    from counting.data.imaging import Sideways, to_rgb

    if isinstance(image, Sideways):
        image = image.upright()
    if not isinstance(image, np.ndarray):
        return np.asarray(to_rgb(image))
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    return image[:, :, 2::-1] if bgr else image[:, :, :3]


def to_input(image: Any, *, bgr: bool = False) -> np.ndarray:
    """A picture (PIL image, ``imaging.Sideways``, RGB array; BGR with ``bgr``) -> ``(3, 512, 512)`` 0-255."""
    return np.ascontiguousarray(resize_tf_bilinear(rgb_pixels(image, bgr=bgr)).transpose(2, 0, 1))


class CenterNet:
    """The converted detector on ONNX Runtime (one session; onnxruntime's runs are thread-safe)."""

    def __init__(self, threads: int = 2, directory: Path | None = None) -> None:
        import onnxruntime

        path = ensure_onnx(directory)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, int(threads))
        options.inter_op_num_threads = 1
        # The fp16-trained activations underflow to denormals, which cost ~25 % of the run time
        # on x86; flushing them to zero changes the heat map by < 1e-6.
        options.add_session_config_entry("session.set_denormal_as_zero", "1")
        # As the backbones' sessions (onnx_export): a crowd model runs both networks per picture,
        # and threads spinning after one session's run take the cores from the other's.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own kinds
            raise BackboneError(f"{path}: onnxruntime cannot load the converted detector ({error})") from None
        self.path = path
        self.threads = threads
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()

    def run(self, batch: np.ndarray | Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Prepared inputs ``(B, 3, 512, 512)`` -> heat map ``(B, 80, 128, 128)``, box sides ``(B, 4, 128, 128)``."""
        inputs = np.ascontiguousarray(np.stack(list(batch)) if not isinstance(batch, np.ndarray) else batch, np.float32)
        heat, sides = self.session.run(list(OUTPUTS), {INPUT_NAME: inputs})
        return heat, sides

    def detect(
        self, batch: np.ndarray | Sequence[np.ndarray], sizes: Sequence[tuple[int, int]] | None = None, k: int = TOP_K
    ) -> tuple[Detections, np.ndarray]:
        """Top-k detections (boxes in picture pixels when ``sizes`` gives each picture's (H, W)) and the heat map."""
        heat, sides = self.run(batch)
        found = decode_detections(heat, sides, k=k, stride=STRIDE)
        if sizes is not None:
            scale = np.array(
                [[w / INPUT_SIZE, h / INPUT_SIZE, w / INPUT_SIZE, h / INPUT_SIZE] for h, w in sizes], np.float32
            )
            found.boxes = found.boxes * scale[:, None, :]
        return found, heat
