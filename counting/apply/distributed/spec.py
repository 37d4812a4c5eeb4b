"""What a worker needs to rebuild the client's backbone: a picklable description, never the
torch modules or ONNX sessions themselves (they are large, and a worker loads its own copy)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from counting.core.errors import BackboneError

__all__ = ["BackboneSpec"]


@dataclass(frozen=True)
class BackboneSpec:
    """Backbone name, weights file, the weights' sha256 (checked on every worker) and runtime.

    ``weights_path`` is tried first; when a worker does not have that file (the packaged
    efficientnet weights live in each machine's own site-packages) it falls back to the
    backbone's default source and accepts it only if the sha256 matches.

    ``runtime`` is the one the client's backbone actually runs on (``"torch"`` when its ONNX
    export failed its check); ``threads`` its intra-op thread count (Dask starts workers with
    ``OMP_NUM_THREADS=1``, so it is always passed); ``export_dir`` the folder of the client's
    ONNX export, so that workers on the same machine or a shared filesystem load that file
    instead of exporting again. ``use_trace`` / ``trace_after`` copy the torch backbone's
    tracing policy, which decides (bit for bit) what a single-process torch run computes.
    """

    name: str
    weights_sha256: str
    weights_path: str | None = None
    runtime: str = "onnxruntime"
    threads: int | None = None
    export_dir: str | None = None
    use_trace: bool = True
    trace_after: int = 2

    @classmethod
    def of(cls, backbone: Any) -> BackboneSpec:
        """The spec of a loaded :class:`~counting.features.backbones.Backbone`."""
        from counting.features.backbones.onnx_export import default_export_dir

        path = getattr(backbone, "weights_path", None)
        runtime = str(getattr(backbone, "runtime", "torch"))
        export_dir = getattr(backbone, "_export_dir", None)
        if runtime == "onnxruntime" and export_dir is None:
            export_dir = default_export_dir()
        return cls(
            name=backbone.name,
            weights_sha256=backbone.weights_sha256,
            weights_path=None if path is None else str(path),
            runtime=runtime,
            threads=getattr(backbone, "threads", None),
            export_dir=None if export_dir is None else str(Path(export_dir).expanduser().absolute()),
            use_trace=bool(getattr(backbone, "use_trace", True)),
            trace_after=int(getattr(backbone, "trace_after", 2)),
        )

    @property
    def replays_trace(self) -> bool:
        """Whether eager-vs-trace decisions change the bits (torch with tracing on)."""
        return self.runtime == "torch" and self.use_trace

    @property
    def plugin_name(self) -> str:
        threads = "" if self.threads is None else f"-t{self.threads}"
        return f"counting-backbone-{self.name}-{self.weights_sha256[:16]}-{self.runtime}{threads}"

    def load(self, where: str = "worker") -> Any:
        """Build the backbone here; ``BackboneError`` naming ``where`` if it cannot be had, or if
        the client's runtime cannot be reproduced (an ONNX export that fails here)."""
        import warnings

        from counting.features.backbones import get_backbone

        explicit = self.weights_path if self.weights_path and os.path.isfile(self.weights_path) else None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                backbone = get_backbone(
                    self.name,
                    Path(explicit) if explicit else None,
                    runtime=self.runtime,
                    threads=self.threads,
                    export_dir=self.export_dir,
                )
        except BackboneError as error:
            raise BackboneError(f"{where}: {error}") from None
        if backbone.weights_sha256 != self.weights_sha256:
            raise BackboneError(
                f"{where}: {self.name} weights differ from the client's (sha256 {backbone.weights_sha256[:12]}… "
                f"instead of {self.weights_sha256[:12]}…); install the same weights file on every worker"
            )
        if backbone.runtime != self.runtime:
            reason = str(caught[-1].message) if caught else "the ONNX export is not available"
            raise BackboneError(f"{where}: cannot run {self.name} on {self.runtime} as the client does ({reason})")
        return backbone
