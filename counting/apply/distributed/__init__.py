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

from counting.apply.distributed.cluster import ClusterError, open_cluster, parse_cluster
from counting.apply.distributed.engine import cluster_extractor, extract_features_distributed
from counting.apply.distributed.session import ClusterExtraction, cluster_extraction, extraction_on
from counting.apply.distributed.spec import BackboneSpec
from counting.apply.distributed.streams import StreamOutcome, count_streams, read_sources

__all__ = [
    "BackboneSpec",
    "ClusterExtraction",
    "ClusterError",
    "StreamOutcome",
    "cluster_extraction",
    "cluster_extractor",
    "count_streams",
    "extract_features_distributed",
    "extraction_on",
    "open_cluster",
    "parse_cluster",
    "read_sources",
]
