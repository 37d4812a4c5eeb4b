"""Stage 2, pictures -> descriptors and feature maps: backbones, descriptor kinds, layouts, tiles,
batched extraction with an on-disk cache.

```python
from counting.features import extract_features, FeatureCache, Preprocessing, get_backbone
fs = extract_features(paths, get_backbone("efficientnet-lite0"), Preprocessing(224), cache=FeatureCache(), on_error="skip")
fs.features, fs.ok, fs.errors
```
The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`):
importing ``counting.features.tiles`` does not load torch.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    # extraction and its cache
    "FeatureCache": ".cache",
    "default_cache_dir": ".cache",
    "FeatureSet": ".extract",
    "configure_torch_threads": ".extract",
    "extract_descriptor_sets": ".extract",
    "extract_features": ".extract",
    "prepare_path": ".extract",
    # backbones and their runtimes
    "BACKBONES": ".backbones",
    "Preprocessing": ".backbones",
    "get_backbone": ".backbones",
    "configure_runtime": ".backbones",
    "RUNTIMES": ".backbones.runtime",
    "available_cpus": ".backbones.runtime",
    "cpu_description": ".backbones.runtime",
    "default_threads": ".backbones.runtime",
    "DetectorBackbone": ".detector.backbone",
    # descriptor kinds, layouts and tiles
    "Descriptor": ".descriptors",
    "DescriptorSpec": ".descriptors",
    "parse_descriptor": ".descriptors",
    "training_rows": ".layouts",
    "predict_rows": ".layouts",
    "frame_counts": ".layouts",
    "parse_grid": ".tiles",
    "tile_counts": ".tiles",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
