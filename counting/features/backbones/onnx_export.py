"""Export a backbone's trunk to ONNX once, check it against torch, and reuse it.

One file per (backbone, weights sha256, output list, exporter version), with dynamic batch,
height and width, in the export folder (:func:`default_export_dir`)::

    <export dir>/<backbone>-<weights sha256[:12]>-<key>.onnx    the network
    <export dir>/<backbone>-<weights sha256[:12]>-<key>.json    what it is + sha256 of the .onnx

Outputs are named feature maps: ``"final"`` is the trunk's last map (pooling and the fc head
run in NumPy, so every descriptor kind comes from it); other names are the backbone's
``taps`` (e.g. ``"block10"`` of EfficientNet-Lite0) or module paths inside the trunk, so
intermediate maps come out of the same forward pass.

Every new export is compared with the torch trunk on a fixed probe batch (two input shapes,
one with odd sides, because "same" padding depends on the parity of the input size) and
rejected above :data:`TOLERANCE`. Both files are written to temporary names and renamed; a
file whose sha256 or description does not match is rebuilt.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from counting.core.errors import BackboneError
from counting.core.files import OutputError, atomic_write_bytes
from counting.features.backbones.runtime import default_threads
from counting.features.backbones.taps import FINAL
from counting.features.cache import default_export_dir

if TYPE_CHECKING:
    import onnxruntime

__all__ = [
    "FINAL",
    "TOLERANCE",
    "ExportMismatchError",
    "OnnxTrunk",
    "default_export_dir",
    "export_path",
    "load_or_export",
]

INPUT_NAME = "images"
# Bump when the export code changes what the file holds: old files then stop matching.
EXPORT_VERSION = 1
OPSET = 17
# Largest accepted |onnxruntime - torch| over the probe batch's outputs (feature maps and class
# scores); measured ~3e-5 for efficientnet-lite0.
TOLERANCE = 1e-4
# Two shapes: a Mall-like frame and one with odd sides (catches padding baked into the graph).
PROBE_SHAPES: tuple[tuple[int, int, int, int], ...] = ((2, 3, 224, 299), (1, 3, 161, 97))

_export_lock = threading.Lock()


class Backbone(Protocol):
    """What an export reads of a backbone (``backbones/base.Backbone`` is one): its trunk, the
    module path of each named output, and the fc head the probe compares class scores with.
    A protocol, not the class: base.py calls this module, so this one may not import it back."""

    name: str
    weights_sha256: str
    trunk: nn.Module

    def tap_module(self, name: str) -> str: ...

    def head_numpy(self, pooled: np.ndarray) -> np.ndarray: ...


class ExportMismatchError(BackboneError):
    """The exported network does not reproduce the torch trunk within :data:`TOLERANCE`."""


def _identity(backbone: Backbone, outputs: Sequence[str]) -> dict[str, Any]:
    """Everything the exported file depends on (the file is rebuilt when any of it changes)."""
    return {
        "backbone": backbone.name,
        "weights_sha256": backbone.weights_sha256,
        "outputs": list(outputs),
        "export_version": EXPORT_VERSION,
        "opset": OPSET,
        "torch": torch.__version__,
    }


def export_path(backbone: Backbone, outputs: Sequence[str], directory: Path | None = None) -> Path:
    """Where the export of ``backbone`` with ``outputs`` lives (whether or not it exists yet)."""
    folder = Path(directory) if directory is not None else default_export_dir()
    key = hashlib.sha256(json.dumps(_identity(backbone, outputs), sort_keys=True).encode()).hexdigest()[:12]
    return folder / f"{backbone.name}-{backbone.weights_sha256[:12]}-{key}.onnx"


@dataclass
class OnnxTrunk:
    """An ONNX Runtime session computing the named feature maps of a backbone's trunk.

    ``session`` runs a batch on ``threads`` intra-op threads. A batch of several images is
    instead split into ``threads`` parts that run at the same time on ``parallel``, a
    single-threaded session of the same network: images are independent, so the maps are the
    same bit for bit, and the cores no longer wait for each other at the end of every layer.
    """

    session: onnxruntime.InferenceSession
    outputs: tuple[str, ...]
    path: Path
    max_abs_diff: float
    threads: int = 1
    parallel: onnxruntime.InferenceSession | None = None
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.parallel is not None:  # its threads start with the first split batch
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="onnxruntime")

    def run(self, batch: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
        """Feature maps ``(B, C, h, w)`` float32, one per output, for a ``(B, 3, H, W)`` batch
        (an array, or a list of ``(3, H, W)`` images of one shape: each part of a split batch
        then gathers its own images into the NCHW layout, in parallel)."""
        pool, session = self._pool, self.parallel
        parts = min(self.threads, len(batch))
        if pool is None or session is None or parts <= 1:
            return self._run_part(self.session, batch)
        bounds = np.linspace(0, len(batch), parts + 1).astype(int)
        chunks = [batch[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]
        results = list(pool.map(lambda chunk: self._run_part(session, chunk), chunks))
        return [np.concatenate([result[index] for result in results]) for index in range(len(self.outputs))]

    def _run_part(
        self, session: onnxruntime.InferenceSession, batch: np.ndarray | Sequence[np.ndarray]
    ) -> list[np.ndarray]:
        stacked = np.stack(batch) if not isinstance(batch, np.ndarray) else batch
        inputs = np.ascontiguousarray(stacked, dtype=np.float32)
        maps = session.run(list(self.outputs), {INPUT_NAME: inputs})
        # The sidecar hash only catches accidental damage; a file altered together with its
        # sidecar can still run, so outputs that are not finite stop the run rather than
        # silently becoming NaN descriptors (finite inputs always give finite maps here).
        if np.isfinite(inputs).all() and not all(np.isfinite(item).all() for item in maps):
            raise BackboneError(
                f"{self.path}: the exported network gives non-finite outputs; delete the file "
                "to re-export it, or use --runtime torch"
            )
        return maps


def load_or_export(
    backbone: Backbone,
    outputs: Sequence[str] = (FINAL,),
    directory: Path | None = None,
    threads: int | None = None,
) -> OnnxTrunk:
    """The checked ONNX export of ``backbone`` for ``outputs``: reused if valid, else (re)built.

    Raises :class:`ExportMismatchError` when a new export differs from torch by more than
    :data:`TOLERANCE`, :class:`BackboneError` when exporting or loading fails.
    """
    outputs = tuple(outputs)
    if not outputs:
        raise ValueError("at least one output is needed")
    for name in outputs:
        backbone.tap_module(name)  # unknown names fail here, before any export
    path = export_path(backbone, outputs, directory)
    threads = threads if threads is not None else default_threads()
    with _export_lock:
        description = _valid_description(path, _identity(backbone, outputs))
        if description is not None:
            try:
                session = create_session(path, threads)
                parallel = _split_session(path, threads)
            except Exception:  # noqa: BLE001 - a file this runtime cannot load is rebuilt
                description = None
            else:
                difference = float(description.get("max_abs_diff", 0.0))
                return OnnxTrunk(session, outputs, path, difference, threads, parallel)
        return _build(backbone, outputs, path, threads)


def create_session(model: Path | bytes, threads: int) -> onnxruntime.InferenceSession:
    """An ONNX Runtime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle intra-op threads would otherwise spin for work and take the cores the image
    # decoding threads need between two batches.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


# -- building ------------------------------------------------------------------------------
def _build(backbone: Backbone, outputs: tuple[str, ...], path: Path, threads: int) -> OnnxTrunk:
    try:
        data = export_bytes(backbone, outputs)
    except BackboneError:
        raise
    except Exception as error:  # noqa: BLE001 - the exporter raises many kinds
        raise BackboneError(f"{backbone.name}: ONNX export failed ({_one_line(error)})") from None
    try:
        session = create_session(data, threads)
    except Exception as error:  # noqa: BLE001
        raise BackboneError(f"{backbone.name}: onnxruntime cannot load the export ({_one_line(error)})") from None
    try:
        difference = probe_difference(backbone, session, outputs)
    except Exception as error:  # noqa: BLE001 - e.g. an output the exported graph lacks
        raise BackboneError(f"{backbone.name}: the ONNX export fails on the probe batch ({_one_line(error)})") from None
    if not difference <= TOLERANCE:
        raise ExportMismatchError(
            f"{backbone.name}: ONNX export differs from torch by {difference:.2g} (> {TOLERANCE:g}) on the probe batch"
        )
    description = {
        **_identity(backbone, outputs),
        "onnx_sha256": hashlib.sha256(data).hexdigest(),
        "max_abs_diff": difference,
        "probe_shapes": [list(shape) for shape in PROBE_SHAPES],
    }
    try:
        # Not fsynced: a file cut short by a crash fails its sha256 check and is rebuilt.
        atomic_write_bytes(path, data, durable=False)
        description_text = json.dumps(description, indent=2, sort_keys=True).encode()
        atomic_write_bytes(path.with_suffix(".json"), description_text, durable=False)
    except OutputError as error:
        # A read-only cache only costs the export next time; the session is good.
        warnings.warn(f"{error}; the ONNX export is used without being stored", RuntimeWarning, stacklevel=3)
    return OnnxTrunk(session, outputs, path, difference, threads, _split_session(data, threads))


def _split_session(model: Path | bytes, threads: int) -> onnxruntime.InferenceSession | None:
    """The single-threaded session that runs the parts of a split batch (~30 ms to create)."""
    return create_session(model, 1) if threads > 1 else None


def export_bytes(backbone: Backbone, outputs: Sequence[str]) -> bytes:
    """The ONNX model (bytes) of ``backbone``'s trunk returning the named ``outputs``."""
    from counting.features.backbones.taps import OutputTaps

    trunk = copy.deepcopy(backbone.trunk).to(memory_format=torch.contiguous_format)
    _make_same_padding_exportable(trunk)
    network = OutputTaps(trunk, {name: backbone.tap_module(name) for name in outputs if name != FINAL}, outputs)
    example = torch.from_numpy(probe_batches()[0])
    axes = {INPUT_NAME: {0: "batch", 2: "height", 3: "width"}}
    axes.update({name: {0: "batch", 2: f"{name}_height", 3: f"{name}_width"} for name in outputs})
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about shapes: the probe check decides
        torch.onnx.export(
            network,
            (example,),
            buffer,
            dynamo=False,  # the TorchScript exporter: no onnxscript dependency, custom symbolics
            input_names=[INPUT_NAME],
            output_names=list(outputs),
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            autograd_inlining=False,  # keeps _SameConv's symbolic instead of tracing its body
        )
    return buffer.getvalue()


def probe_batches() -> list[np.ndarray]:
    """The fixed inputs every export is checked on (seeded noise of normalised-pixel scale)."""
    rng = np.random.default_rng(20181)
    return [rng.standard_normal(shape).astype(np.float32) for shape in PROBE_SHAPES]


def probe_difference(backbone: Backbone, session: onnxruntime.InferenceSession, outputs: Sequence[str]) -> float:
    """Max |onnxruntime - torch eager| over the probe batches' outputs (and class scores)."""
    from counting.features.backbones.taps import OutputTaps

    taps = OutputTaps(backbone.trunk, {name: backbone.tap_module(name) for name in outputs if name != FINAL}, outputs)
    worst = 0.0
    for batch in probe_batches():
        with torch.inference_mode():
            expected = [t.numpy() for t in taps(torch.from_numpy(batch).contiguous(memory_format=torch.channels_last))]
        got = session.run(list(outputs), {INPUT_NAME: batch})
        for name, reference, value in zip(outputs, expected, got):
            if reference.shape != value.shape:
                return float("inf")
            worst = max(worst, float(np.abs(reference - value).max()))
            if name == FINAL:
                scores = backbone.head_numpy(reference.mean(axis=(2, 3)))
                worst = max(worst, float(np.abs(scores - backbone.head_numpy(value.mean(axis=(2, 3)))).max()))
    return worst


class _SameConv(torch.autograd.Function):
    """TensorFlow "same" convolution exported as one ONNX ``Conv`` with ``auto_pad=SAME_UPPER``.

    EfficientNet-Lite's ``Conv2dDynamicSamePadding`` computes its padding from the input size
    in Python, which a trace bakes in as constants: right for the traced size only (a stride-2
    convolution pads differently for odd and even sides). ONNX's SAME_UPPER is the same rule
    (the odd pixel of padding at the end) evaluated at run time.
    """

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        stride: tuple[int, int],
        dilation: tuple[int, int],
        groups: int,
    ) -> torch.Tensor:
        pads = []
        for axis in (-1, -2):
            size, kernel = x.shape[axis], weight.shape[axis]
            total = max(
                (-(-size // stride[axis])) * stride[axis] - stride[axis] + (kernel - 1) * dilation[axis] + 1 - size, 0
            )
            pads += [total // 2, total - total // 2]
        return F.conv2d(F.pad(x, pads), weight, bias, stride, 0, dilation, groups)

    @staticmethod
    def symbolic(
        g: Any, x: Any, weight: Any, bias: Any, stride: tuple[int, int], dilation: tuple[int, int], groups: int
    ) -> Any:
        inputs = [x, weight] if bias is None or bias.node().mustBeNone() else [x, weight, bias]
        return g.op(
            "Conv",
            *inputs,
            auto_pad_s="SAME_UPPER",
            strides_i=list(stride),
            dilations_i=list(dilation),
            group_i=groups,
            kernel_shape_i=list(weight.type().sizes()[-2:]),
        )


def _make_same_padding_exportable(trunk: nn.Module) -> None:
    """Route the (copied) trunk's dynamic "same" convolutions through :class:`_SameConv`."""
    for module in trunk.modules():
        if type(module).__name__ == "Conv2dDynamicSamePadding":

            def forward(x: torch.Tensor, conv: nn.Conv2d = module) -> torch.Tensor:
                return _SameConv.apply(x, conv.weight, conv.bias, tuple(conv.stride), tuple(conv.dilation), conv.groups)

            module.forward = forward  # type: ignore[method-assign]


# -- files ---------------------------------------------------------------------------------
def _valid_description(path: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The stored description if ``path`` is an intact export of ``identity``, else ``None``."""
    try:
        description = json.loads(path.with_suffix(".json").read_text())
        data = path.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(description, dict) or any(description.get(k) != v for k, v in identity.items()):
        return None  # stale: written for other weights, outputs, exporter or torch version
    if description.get("onnx_sha256") != hashlib.sha256(data).hexdigest():
        return None  # damaged or truncated
    return description


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
