"""Stage 1, pictures in: image loading, image paths from the command line, dataset readers and
their splits.

```python
from counting.data import load_dataset, load_image
ds = load_dataset("mall", root, split="train=1-600,test=601-800")
```
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        # datasets and splits
        ".datasets": "DATASETS CountingDataset Sample load_dataset parse_split",
        ".datasets.splits": "cv_folds",
        ".datasets.shanghaitech": "read_shanghaitech",
        # the general crowd model's data (several datasets, fixed validation parts)
        ".datasets.crowd": "CrowdDataset read_crowd",
        # pictures
        ".imaging": "Sideways load_image image_size to_rgb upright",
        ".paths": "expand_image_paths",
        # everyday copies of a picture (recompressed, smaller, blurred): what the gate and heads also fit on
        ".copies": "CopyRecipe degraded_pixels everyday_copy recipe_for training_recipe",
    },
)
