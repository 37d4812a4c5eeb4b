"""Scale-out with Dask distributed: descriptor extraction and video counting across processes
or machines.

```python
from counting.apply.distributed import open_cluster, extract_features_distributed
with open_cluster("local:2") as client:            # or "tcp://scheduler:8786"
    fs = extract_features_distributed(paths, backbone, prep, client=client)
```

``extract_features_distributed`` takes the arguments of
:func:`counting.features.extract_features` plus ``client`` and returns the same
:class:`~counting.features.FeatureSet`, byte for byte (see :mod:`counting.apply.distributed.engine`).
Workers receive a picklable :class:`BackboneSpec` (name, weights file, sha256) and load the
backbone once, through a worker plugin.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

# Lazy: `from counting.apply.distributed.session import cluster_extraction` (every command that
# takes --cluster) runs this file first, and an eager import of the engine pulls Dask and torch
# into `counting count --help` (scripts/bench_cli_startup.py).
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".cluster": "ClusterError open_cluster parse_cluster",
        ".engine": "cluster_extractor extract_features_distributed",
        ".session": "ClusterExtraction cluster_extraction extraction_on",
        ".spec": "BackboneSpec",
        ".streams": "StreamOutcome count_streams read_sources",
    },
)
