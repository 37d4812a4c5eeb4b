"""Counting picture files, here or on a Dask cluster: the one entry every picture count goes through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

__all__ = ["count_pictures"]


def count_pictures(
    model: CountingModel, files: Sequence[str], *, zones: Sequence[Any] = (), cluster: str | None = None, **options: Any
) -> tuple[Any, dict | None]:
    """``(CountResult, zone records or None)`` of ``files``: counted in chunks in this process
    (memory flat in the number of pictures), or, with ``cluster`` (``local:N`` or a scheduler's
    address), the same count split over its workers, giving the same records in the same order.
    ``options``: ``cache``, ``weights``, ``batch_size``, ``progress``."""
    files = [str(path) for path in files]
    if cluster is not None:
        from counting.apply.distributed.cluster import open_cluster
        from counting.apply.distributed.counter import count_on_cluster

        with open_cluster(cluster) as client:
            return count_on_cluster(client, model, files, zones=zones, **options)
    if zones:
        from counting.apply.zones import count_paths_in_zones

        return count_paths_in_zones(model, files, zones, **options)
    from counting.apply.chunks import count_in_chunks

    return count_in_chunks(model, files, **options), None
