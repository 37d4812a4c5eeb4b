"""Stage 1, pictures in: image loading, image paths from the command line, dataset readers and
their splits.

```python
from counting.data import load_dataset, load_image
ds = load_dataset("mall", root, split="train=1-600,test=601-800")
```
The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    # datasets and splits
    "DATASETS": ".datasets",
    "CountingDataset": ".datasets",
    "Sample": ".datasets",
    "load_dataset": ".datasets",
    "parse_split": ".datasets",
    "cv_folds": ".datasets.splits",
    "read_shanghaitech": ".datasets.shanghaitech",
    # the general crowd model's data (several datasets, fixed validation parts)
    "CrowdDataset": ".datasets.crowd",
    "read_crowd": ".datasets.crowd",
    # pictures
    "load_image": ".imaging",
    "image_size": ".imaging",
    "expand_image_paths": ".paths",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
