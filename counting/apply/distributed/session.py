"""One cluster connection per command: an ``extract_features``-compatible callable that
connects on first use and is closed when the command ends (also when it fails half-way)."""

from __future__ import annotations

import atexit
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

__all__ = ["ClusterExtraction", "cluster_extraction", "extraction_on"]


class ClusterExtraction:
    """An ``extract_features``-compatible callable that connects on its first call and stays
    connected (one cluster for a command's several extractions) until :meth:`close` or exit."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._stack: ExitStack | None = None
        self._extract: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._extract is None:
            from counting.apply.distributed.cluster import open_cluster
            from counting.apply.distributed.engine import cluster_extractor

            stack = ExitStack()
            client = stack.enter_context(open_cluster(self.cluster))
            self._stack = stack
            self._extract = cluster_extractor(client)
            atexit.register(self.close)  # a command that fails half-way still stops its local cluster
        return self._extract(*args, **kwargs)

    def close(self) -> None:
        if self._stack is not None:
            stack, self._stack, self._extract = self._stack, None, None
            stack.close()


@contextmanager
def cluster_extraction(cluster: str | None) -> Iterator[ClusterExtraction | None]:
    """``None`` without a cluster; else a :class:`ClusterExtraction`, closed on exit."""
    if cluster is None:
        yield None
        return
    extraction = ClusterExtraction(cluster)
    try:
        yield extraction
    finally:
        extraction.close()


def extraction_on(cluster: str | None, local: Callable[..., Any]) -> Callable[..., Any]:
    """``local`` itself without a cluster; else a function that connects, runs one extraction
    on the cluster (same arguments, same result) and disconnects."""
    if cluster is None:
        return local

    def on_cluster(*args: Any, **kwargs: Any) -> Any:
        with cluster_extraction(cluster) as extract:
            assert extract is not None
            return extract(*args, **kwargs)

    return on_cluster
