"""What a worker needs to rebuild the client's backbone: a picklable description, never the
torch modules themselves (they are large, and a worker must load its own copy of the weights)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from counting.errors import BackboneError

__all__ = ["BackboneSpec"]


@dataclass(frozen=True)
class BackboneSpec:
    """Backbone name, weights file and the weights' sha256 (checked on every worker).

    ``weights_path`` is tried first; when a worker does not have that file (the packaged
    efficientnet weights live in each machine's own site-packages) it falls back to the
    backbone's default source and accepts it only if the sha256 matches.
    ``use_trace`` / ``trace_after`` copy the client backbone's tracing policy, which decides
    (bit for bit) what a single-process run computes.
    """

    name: str
    weights_sha256: str
    weights_path: str | None = None
    use_trace: bool = True
    trace_after: int = 2

    @classmethod
    def of(cls, backbone: Any) -> BackboneSpec:
        """The spec of a loaded :class:`~counting.backbones.Backbone`."""
        path = getattr(backbone, "weights_path", None)
        return cls(
            name=backbone.name,
            weights_sha256=backbone.weights_sha256,
            weights_path=None if path is None else str(path),
            use_trace=bool(getattr(backbone, "use_trace", True)),
            trace_after=int(getattr(backbone, "trace_after", 2)),
        )

    @property
    def plugin_name(self) -> str:
        return f"counting-backbone-{self.name}-{self.weights_sha256[:16]}"

    def load(self, where: str = "worker") -> Any:
        """Build the backbone here; ``BackboneError`` naming ``where`` if it cannot be had."""
        from counting.backbones import get_backbone

        explicit = self.weights_path if self.weights_path and os.path.isfile(self.weights_path) else None
        try:
            backbone = get_backbone(self.name, Path(explicit) if explicit else None)
        except BackboneError as error:
            raise BackboneError(f"{where}: {error}") from None
        if backbone.weights_sha256 != self.weights_sha256:
            raise BackboneError(
                f"{where}: {self.name} weights differ from the client's (sha256 {backbone.weights_sha256[:12]}… "
                f"instead of {self.weights_sha256[:12]}…); install the same weights file on every worker"
            )
        return backbone
