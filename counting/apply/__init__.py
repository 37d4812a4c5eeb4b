"""Stage 5, a model on new pictures: counting in bounded chunks, video and streams, smoothing,
zones, distributed extraction, the live service.

The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    "Counts": ".api",
    "count": ".api",
    "count_in_chunks": ".chunks",
    # video and smoothing
    "count_video": ".video",
    "overlay_label": ".video",
    "StreamingSmoother": ".smoothing",
    "causal_label": ".smoothing",
    "causal_smooth": ".smoothing",
    "smooth_counts": ".smoothing",
    "frames_to_video": ".serve.videos",
    # zones
    "Zone": ".zone_specs",
    "load_zones": ".zone_specs",
    "parse_zone": ".zone_specs",
    # scale-out
    "cluster_extractor": ".distributed",
    "extract_features_distributed": ".distributed",
    "open_cluster": ".distributed",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
