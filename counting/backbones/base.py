"""A backbone = convolutional trunk + global pooling + ImageNet fc head, run for inference only.

The trunk runs as a frozen TorchScript trace (batch norms folded into the convolutions) in
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

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from counting.backbones.preprocessing import ImageLike, Normalisation, Preprocessing, prepare_image

__all__ = ["Backbone", "check_grid", "stack_prepared"]

BatchLike = torch.Tensor | Sequence[torch.Tensor]

_EAGER = object()  # marks an input shape whose trace failed its check against eager
# Runs that TorchScript's profiling executor needs on a new shape before it optimises the graph.
_PROFILING_RUNS = 2

# oneDNN's graph fuser is the CPU fuser for frozen TorchScript graphs; it is process-wide.
torch.jit.enable_onednn_fusion(True)


class Backbone:
    """An ImageNet classifier split into trunk (feature map) and head (fc), for descriptors.

    ``forward`` gives the 1000 class scores of the whole frame, ``forward_pooled`` the pooled
    trunk features before the fc layer, ``forward_grid`` class scores per grid cell from one
    trunk pass.
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

    def __repr__(self) -> str:
        return f"Backbone(name={self.name!r}, weights_sha256={self.weights_sha256[:12]!r})"

    # -- inputs ---------------------------------------------------------------------------
    def prepare(self, image: ImageLike, prep: Preprocessing, source: str | None = None) -> torch.Tensor:
        """Resize (whole frame), apply the ROI mask and this backbone's normalisation.

        ``image`` is a PIL image or an RGB uint8 array; ``source`` names it in error messages.
        Returns a ``(3, H, W)`` float32 tensor.
        """
        return prepare_image(image, prep, self.normalisation, source)

    # -- outputs --------------------------------------------------------------------------
    def feature_map(self, batch: BatchLike) -> torch.Tensor:
        """The trunk's final feature map ``(B, C, h, w)`` for a batch of prepared images."""
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
                warnings.warn(f"{self.name}: frozen trace differs from eager for input {tuple(inputs.shape)}; "
                              "running that shape eagerly", RuntimeWarning, stacklevel=2)
                with self._lock:
                    self._traces[tuple(inputs.shape)] = _EAGER
                return reference
        return output

    def forward(self, batch: BatchLike) -> np.ndarray:
        """ImageNet class scores (fc output) of the whole frame: ``(B, 1000)`` float32."""
        return self._head_numpy(self.feature_map(batch).mean(dim=(2, 3)))

    def forward_pooled(self, batch: BatchLike) -> np.ndarray:
        """Globally pooled trunk features (the fc input): ``(B, pooled_dim)`` float32."""
        return self.feature_map(batch).mean(dim=(2, 3)).numpy().astype(np.float32, copy=False)

    def forward_grid(self, batch: BatchLike, grid: tuple[int, int]) -> np.ndarray:
        """Class scores per cell of a ``(rows, cols)`` grid: ``(B, rows*cols, 1000)``.

        The trunk runs once; its feature map is average-pooled per cell (adaptive pooling,
        row-major cells) and each cell goes through the fc layer. ``grid=(1, 1)`` equals
        :meth:`forward`.
        """
        rows, cols = check_grid(grid)
        fmap = self.feature_map(batch)
        cells = F.adaptive_avg_pool2d(fmap, (rows, cols))  # (B, C, rows, cols)
        cells = cells.permute(0, 2, 3, 1).reshape(fmap.shape[0], rows * cols, fmap.shape[1])
        return self._head_numpy(cells)

    def forward_grid_pooled(self, batch: BatchLike, grid: tuple[int, int]) -> np.ndarray:
        """Pooled trunk features per grid cell: ``(B, rows*cols, pooled_dim)``."""
        rows, cols = check_grid(grid)
        fmap = self.feature_map(batch)
        cells = F.adaptive_avg_pool2d(fmap, (rows, cols))
        cells = cells.permute(0, 2, 3, 1).reshape(fmap.shape[0], rows * cols, fmap.shape[1])
        return cells.numpy().astype(np.float32, copy=False)

    def eager_forward(self, batch: BatchLike) -> np.ndarray:
        """:meth:`forward` without the frozen trace: the reference the trace is checked against."""
        fmap = self._eager(_as_batch(batch))
        return self._head_numpy(fmap.mean(dim=(2, 3)))

    # -- internals ------------------------------------------------------------------------
    def _head_numpy(self, pooled: torch.Tensor) -> np.ndarray:
        with torch.inference_mode():
            return self.head(pooled).numpy().astype(np.float32, copy=False)

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


def _as_batch(batch: BatchLike) -> torch.Tensor:
    """A float32 ``(B, 3, H, W)`` batch in channels-last memory layout."""
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
