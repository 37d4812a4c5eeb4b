"""A backbone = convolutional trunk + global pooling + ImageNet fc head, run for inference only.

The trunk runs on one of two runtimes (:mod:`counting.features.backbones.runtime`): ONNX Runtime
(default; the trunk exported once to ONNX, see :mod:`counting.features.backbones.onnx_export`) or torch.
Pooling (global or per grid cell) and the fc head run in NumPy on the trunk's feature map, the
same code for both runtimes.

On torch, the trunk runs as a frozen TorchScript trace (batch norms folded into the convolutions) in
channels-last layout: the lead measured the frozen trace 2.7x faster than eager at 224x224 on
this project's 2-core machine, and channels-last adds 1.4-1.7x (scripts/bench_features.py). A trace
bakes in the input shape, so one is kept per batch shape. Tracing and freezing cost a few eager
passes, so a shape is traced only once it has run eagerly ``trace_after`` times: one-off sizes
(a folder of photos of all sizes, a short test) stay eager, long runs get the trace.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import ThreadpoolController
from torch import nn

from counting.core.errors import BackboneError
from counting.features.backbones.onnx_export import OnnxTrunk, load_or_export
from counting.features.backbones.preprocessing import ImageLike, Normalisation, Preprocessing, prepare_image
from counting.features.backbones.taps import FINAL, OutputTaps

__all__ = ["Backbone", "OutputTaps", "adaptive_average_pool", "check_grid", "stack_prepared"]

BatchLike = torch.Tensor | np.ndarray | Sequence[torch.Tensor] | Sequence[np.ndarray]

_EAGER = object()  # marks an input shape whose trace failed its check against eager
# Runs that TorchScript's profiling executor needs on a new shape before it optimises the graph.
_PROFILING_RUNS = 2

# oneDNN's graph fuser is the CPU fuser for frozen TorchScript graphs; it is process-wide.
torch.jit.enable_onednn_fusion(True)


class Backbone:
    """An ImageNet classifier split into trunk (feature map) and head (fc), for descriptors.

    ``forward`` gives the 1000 class scores of the whole frame, ``forward_pooled`` the pooled
    trunk features before the fc layer, ``forward_grid`` class scores per grid cell from one
    trunk pass. ``runtime`` says what runs the trunk: ``"torch"`` until
    :meth:`use_onnxruntime` succeeds. ``taps`` names intermediate feature maps (name -> module
    path inside the trunk) that :meth:`feature_maps` can return beside ``"final"``.
    """

    feature_dim: int = 1000

    def __init__(
        self,
        name: str,
        trunk: nn.Module,
        head: nn.Linear,
        normalisation: Normalisation,
        weights_sha256: str,
        weights_path: Path | None = None,
        use_trace: bool = True,
        trace_after: int = 2,
        max_traces: int = 8,
        taps: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        # channels-last ("NHWC") measured 1.4-1.7x faster than NCHW for both the eager and the
        # frozen trunk on this CPU (oneDNN's preferred layout, no reorders between convolutions).
        self.trunk = trunk.eval().to(memory_format=torch.channels_last)
        self.head = head.eval()
        self.normalisation = normalisation
        self.weights_sha256 = weights_sha256
        self.weights_path = weights_path
        self.pooled_dim = int(head.in_features)
        self.feature_dim = int(head.out_features)
        self.use_trace = use_trace
        self.trace_after = trace_after
        self._max_traces = max_traces
        self._traces: OrderedDict[tuple[int, ...], torch.jit.ScriptModule] = OrderedDict()
        self._eager_runs: dict[tuple[int, ...], int] = {}
        self._lock = threading.Lock()
        for parameter in list(self.trunk.parameters()) + list(self.head.parameters()):
            parameter.requires_grad_(False)
        self.taps = dict(taps or {})
        # The fc layer as NumPy arrays: applied to the feature maps of either runtime.
        self._head_weight = head.weight.detach().numpy().astype(np.float32).T.copy()
        self._head_bias = (
            head.bias.detach().numpy().astype(np.float32).copy()
            if head.bias is not None
            else np.zeros(self.feature_dim, np.float32)
        )
        self.runtime = "torch"
        self.threads: int | None = None
        self._export_dir: Path | None = None
        self._onnx: dict[tuple[str, ...], OnnxTrunk] = {}
        self._torch_only: set[tuple[str, ...]] = set()  # output lists whose export failed its check

    def __repr__(self) -> str:
        return f"Backbone(name={self.name!r}, weights_sha256={self.weights_sha256[:12]!r}, runtime={self.runtime!r})"

    # -- runtime --------------------------------------------------------------------------
    def use_onnxruntime(self, threads: int | None = None, export_dir: Path | None = None) -> bool:
        """Run the trunk on ONNX Runtime from now on; ``False`` (and a warning) if the export
        cannot be made or does not match torch, in which case torch keeps running it."""
        try:
            trunk = load_or_export(self, (FINAL,), export_dir, threads)
        except BackboneError as error:
            warnings.warn(f"{error}; running {self.name} on torch instead", RuntimeWarning, stacklevel=2)
            return False
        self._onnx = {(FINAL,): trunk}
        self.threads = threads
        self._export_dir = export_dir
        self.runtime = "onnxruntime"
        return True

    def tap_module(self, name: str) -> str:
        """Module path inside the trunk of output ``name`` (``""`` for ``"final"``)."""
        if name == FINAL:
            return ""
        path = self.taps.get(name, name)
        try:
            self.trunk.get_submodule(path)
        except AttributeError:
            known = ", ".join([FINAL, *self.taps])
            raise BackboneError(f"{self.name}: no feature map named {name!r} (known: {known})") from None
        return path

    # -- inputs ---------------------------------------------------------------------------
    def prepare(
        self,
        image: ImageLike,
        prep: Preprocessing,
        source: str | None = None,
        *,
        bgr: bool = False,
        warn: bool = True,
    ) -> torch.Tensor:
        """Resize (whole frame), apply the ROI mask and this backbone's normalisation.

        ``image`` is a PIL image or an RGB uint8 array (BGR with ``bgr=True``, as OpenCV
        decodes); ``source`` names it in error messages; ``warn`` False: no tiny-picture warning
        (a picture prepared a second time).
        Returns a ``(3, H, W)`` float32 tensor: planar for onnxruntime (NCHW), a view of
        ``(H, W, 3)`` pixels for torch (channels-last); the values are the same.
        """
        return prepare_image(
            image, prep, self.normalisation, source, channels_last=self.runtime == "torch", bgr=bgr, warn=warn
        )

    # -- outputs --------------------------------------------------------------------------
    def feature_map(self, batch: BatchLike) -> torch.Tensor:
        """The trunk's final feature map ``(B, C, h, w)`` for a batch of prepared images."""
        if self.runtime == "onnxruntime":
            return torch.from_numpy(self.feature_map_array(batch))
        return self._torch_feature_map(batch)

    def feature_map_array(self, batch: BatchLike) -> np.ndarray:
        """:meth:`feature_map` as a float32 NumPy array, from whichever runtime runs the trunk."""
        if self.runtime == "onnxruntime":
            return self._onnx[(FINAL,)].run(_as_images(batch))[0]
        return self._torch_feature_map(batch).numpy()

    def feature_maps(self, batch: BatchLike, names: Sequence[str]) -> dict[str, np.ndarray]:
        """Named feature maps (``"final"`` and/or :attr:`taps`) from one trunk pass.

        On onnxruntime each distinct list of names is exported (and checked) once.
        """
        names = tuple(names)
        for name in names:
            self.tap_module(name)  # unknown names are an error on either runtime
        runner = self._onnx.get(names) if self.runtime == "onnxruntime" else None
        if runner is None and self.runtime == "onnxruntime" and names not in self._torch_only:
            try:
                runner = self._onnx[names] = load_or_export(self, names, self._export_dir, self.threads)
            except BackboneError as error:
                warnings.warn(f"{error}; computing {', '.join(names)} on torch instead", RuntimeWarning, stacklevel=2)
                self._torch_only.add(names)
        if runner is not None:
            return dict(zip(names, runner.run(_as_images(batch))))
        taps = OutputTaps(self.trunk, {name: self.tap_module(name) for name in names if name != FINAL}, names)
        with torch.inference_mode():
            return {name: value.numpy() for name, value in zip(names, taps(_as_batch(batch)))}

    def _torch_feature_map(self, batch: BatchLike) -> torch.Tensor:
        inputs = _as_batch(batch)
        runner, fresh = self._runner_for(inputs) if self.use_trace else (None, False)
        if runner is None:
            return self._eager(inputs)
        output = _run_frozen(runner, inputs)
        if fresh:
            # A new trace is checked once against the eager trunk; should a shape ever trace
            # wrongly (data-dependent control flow), that shape simply stays eager.
            reference = self._eager(inputs)
            tolerance = 1e-3 * max(float(reference.abs().max()), 1.0)
            if not torch.allclose(output, reference, rtol=1e-3, atol=tolerance):
                warnings.warn(
                    f"{self.name}: frozen trace differs from eager for input {tuple(inputs.shape)}; "
                    "running that shape eagerly",
                    RuntimeWarning,
                    stacklevel=2,
                )
                with self._lock:
                    self._traces[tuple(inputs.shape)] = _EAGER
                return reference
        return output

    def forward(self, batch: BatchLike) -> np.ndarray:
        """ImageNet class scores (fc output) of the whole frame: ``(B, 1000)`` float32."""
        return self.head_numpy(self.forward_pooled(batch))

    def forward_pooled(self, batch: BatchLike) -> np.ndarray:
        """Globally pooled trunk features (the fc input): ``(B, pooled_dim)`` float32."""
        return self.feature_map_array(batch).mean(axis=(2, 3), dtype=np.float32)

    def forward_grid(self, batch: BatchLike, grid: tuple[int, int]) -> np.ndarray:
        """Class scores per cell of a ``(rows, cols)`` grid: ``(B, rows*cols, 1000)``.

        The trunk runs once; its feature map is average-pooled per cell (adaptive pooling,
        row-major cells) and each cell goes through the fc layer. ``grid=(1, 1)`` equals
        :meth:`forward`.
        """
        return self.head_numpy(self.forward_grid_pooled(batch, grid))

    def forward_grid_pooled(self, batch: BatchLike, grid: tuple[int, int]) -> np.ndarray:
        """Pooled trunk features per grid cell: ``(B, rows*cols, pooled_dim)``."""
        return adaptive_average_pool(self.feature_map_array(batch), check_grid(grid))

    def eager_forward(self, batch: BatchLike) -> np.ndarray:
        """:meth:`forward` by the eager torch trunk: the reference traces and exports are checked against."""
        fmap = self._eager(_as_batch(batch)).numpy()
        return self.head_numpy(fmap.mean(axis=(2, 3), dtype=np.float32))

    def head_numpy(self, pooled: np.ndarray) -> np.ndarray:
        """The fc layer on ``(..., pooled_dim)`` features -> ``(..., feature_dim)`` float32."""
        with single_threaded_blas():
            return np.asarray(pooled, dtype=np.float32) @ self._head_weight + self._head_bias

    # -- internals ------------------------------------------------------------------------

    def _eager(self, inputs: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.trunk(inputs)

    def _runner_for(self, inputs: torch.Tensor) -> tuple[torch.jit.ScriptModule | None, bool]:
        """The frozen trace for this input shape (``None``: run eagerly) and whether it is new."""
        shape = tuple(inputs.shape)
        with self._lock:
            runner = self._traces.get(shape)
            if runner is not None:
                self._traces.move_to_end(shape)
                return (None if runner is _EAGER else runner), False
            runs = self._eager_runs.get(shape, 0)
            if runs < self.trace_after:
                if len(self._eager_runs) > 10_000:  # endless distinct sizes: forget old counts
                    self._eager_runs.clear()
                self._eager_runs[shape] = runs + 1
                return None, False
        runner = self._trace(inputs)
        with self._lock:
            self._traces[shape] = runner
            while len(self._traces) > self._max_traces:
                self._traces.popitem(last=False)
        return runner, True

    def _trace(self, example: torch.Tensor) -> torch.jit.ScriptModule:
        with torch.no_grad(), warnings.catch_warnings():
            # The padding arithmetic of "same" convolutions becomes constants in the trace;
            # that is intended, since each input shape gets its own trace.
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(self.trunk, example.clone(), check_trace=False)
            frozen = torch.jit.freeze(traced.eval())
            # The profiling executor needs a few runs per shape before the oneDNN fuser rewrites
            # the graph; doing them here keeps that one-off cost out of the caller's timings.
            for _ in range(_PROFILING_RUNS):
                _run_frozen(frozen, example)
            return frozen


def _run_frozen(runner: torch.jit.ScriptModule, inputs: torch.Tensor) -> torch.Tensor:
    # Freezing folds batch norms into the convolutions; the oneDNN graph fuser then fuses
    # convolution + activation chains (measured on 2 cores, efficientnet-lite0 at 224x299,
    # batch 8: ~58 -> ~74 frames/s, outputs equal to 1e-5).
    with torch.no_grad():
        return runner(inputs)


def adaptive_average_pool(fmap: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """``(B, C, h, w)`` -> ``(B, rows*cols, C)``: torch's ``adaptive_avg_pool2d`` cells, row-major.

    Cell ``i`` of ``n`` along a side of ``size`` averages ``[floor(i*size/n), ceil((i+1)*size/n))``
    (overlapping when ``n`` does not divide ``size``), written as two averaging matrices.
    """
    rows, cols = grid
    batch, channels, height, width = fmap.shape
    with single_threaded_blas():
        pooled = np.einsum(
            "bchw,rh,qw->brqc", fmap, _pooling_matrix(height, rows), _pooling_matrix(width, cols), optimize=True
        )
    return np.ascontiguousarray(pooled.reshape(batch, rows * cols, channels), dtype=np.float32)


_blas_controller: ThreadpoolController | None = None


def single_threaded_blas() -> Any:
    """A context in which NumPy's BLAS runs on one thread.

    The head and pooling products are small; OpenBLAS would still wake its threads for them,
    and those threads keep spinning for a while afterwards, taking the cores from the next
    forward pass (measured: 13.7 -> 27 ms CPU per photo on onnxruntime).
    """
    global _blas_controller
    if _blas_controller is None:
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


def _pooling_matrix(size: int, parts: int) -> np.ndarray:
    index = np.arange(parts)
    starts = (index * size) // parts
    ends = -((-(index + 1) * size) // parts)
    pixels = np.arange(size)
    member = (pixels >= starts[:, None]) & (pixels < ends[:, None])
    return (member / member.sum(axis=1, keepdims=True)).astype(np.float32)


def stack_prepared(images: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack ``(3, H, W)`` tensors from :meth:`Backbone.prepare` into a channels-last batch.

    ``prepare`` returns views of ``(H, W, 3)`` arrays, so stacking those arrays is one plain
    copy and the result already has the memory layout the trunk runs in.
    """
    items = list(images)
    if not items:
        raise ValueError("empty batch")
    shapes = {tuple(item.shape) for item in items}
    if len(shapes) > 1:
        raise ValueError(f"images in one batch must share a shape, got {sorted(shapes)}")
    if any(item.ndim != 3 or item.shape[0] != 3 for item in items):
        raise ValueError(f"expected (3, H, W) images, got shape {tuple(items[0].shape)}")
    return torch.stack([item.permute(1, 2, 0) for item in items]).permute(0, 3, 1, 2)


def _as_images(batch: BatchLike) -> np.ndarray | list[np.ndarray]:
    """What onnxruntime takes, without torch operations: an array or tensor batch becomes a
    contiguous float32 NCHW array; a list of images stays a list of ``(3, H, W)`` arrays, which
    each part of a split batch gathers into NCHW in its own thread."""
    if isinstance(batch, (np.ndarray, torch.Tensor)):
        array = batch.numpy() if isinstance(batch, torch.Tensor) else batch
        if array.ndim == 3:
            array = array[None]
        if array.ndim != 4 or array.shape[1] != 3:
            raise ValueError(f"expected a (B, 3, H, W) batch, got shape {tuple(array.shape)}")
        return np.ascontiguousarray(array, dtype=np.float32)
    items = [item.numpy() if isinstance(item, torch.Tensor) else np.asarray(item) for item in batch]
    if not items:
        raise ValueError("empty batch")
    shapes = {item.shape for item in items}
    if len(shapes) > 1:
        raise ValueError(f"images in one batch must share a shape, got {sorted(shapes)}")
    if items[0].ndim != 3 or items[0].shape[0] != 3:
        raise ValueError(f"expected (3, H, W) images, got shape {tuple(items[0].shape)}")
    return items


def _as_batch(batch: BatchLike) -> torch.Tensor:
    """A float32 ``(B, 3, H, W)`` batch in channels-last memory layout."""
    if isinstance(batch, np.ndarray):
        batch = torch.from_numpy(np.ascontiguousarray(batch))
    if isinstance(batch, torch.Tensor):
        if batch.ndim == 3:
            batch = batch.unsqueeze(0)
        if batch.ndim != 4 or batch.shape[1] != 3:
            raise ValueError(f"expected a (B, 3, H, W) batch, got shape {tuple(batch.shape)}")
    else:
        batch = stack_prepared(batch)
    return batch.float().contiguous(memory_format=torch.channels_last)


def check_grid(grid: tuple[int, int]) -> tuple[int, int]:
    """``(rows, cols)`` as two positive ints, or ``ValueError``."""
    try:
        rows, cols = (int(value) for value in grid)
    except (TypeError, ValueError):
        raise ValueError(f"grid must be (rows, cols), got {grid!r}") from None
    if rows < 1 or cols < 1:
        raise ValueError(f"grid must have at least one row and column, got {grid!r}")
    return rows, cols
