"""Batched descriptor extraction with an on-disk cache.

```python
from counting.features import extract_features, FeatureCache
fs = extract_features(paths, backbone, Preprocessing(224), cache=FeatureCache(), on_error="skip")
fs.features, fs.ok, fs.errors
```
"""

from __future__ import annotations

from counting.features.cache import FeatureCache, default_cache_dir
from counting.features.extract import FeatureSet, configure_torch_threads, extract_descriptor_sets, extract_features

__all__ = [
    "FeatureCache",
    "FeatureSet",
    "configure_torch_threads",
    "default_cache_dir",
    "extract_descriptor_sets",
    "extract_features",
]
