"""Stage 5, a model on new pictures: counting in bounded chunks, video and streams, smoothing,
zones, distributed extraction, the live service.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".api": "Counts count",
        ".chunks": "count_in_chunks",
        # video and smoothing
        ".video": "count_video overlay_label",
        ".smoothing": "StreamingSmoother causal_label causal_smooth smooth_counts",
        ".serve.videos": "frames_to_video",
        # zones
        ".zone_specs": "Zone load_zones parse_zone",
        ".zones": "ZONE_SCATTER count_paths_in_zones interval_level zone_intervals",
        # scale-out
        ".distributed": "cluster_extractor extract_features_distributed open_cluster",
    },
)
