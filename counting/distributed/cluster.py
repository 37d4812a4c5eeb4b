"""Connecting to a Dask cluster: ``local:N`` starts one on this machine, anything else is a
scheduler address (``tcp://host:8786``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from counting.errors import CountingError

__all__ = ["ClusterError", "open_cluster", "parse_cluster"]

# Seconds to wait for a scheduler; COUNTING_CLUSTER_TIMEOUT overrides (slow networks, tests).
CONNECT_TIMEOUT_S = 20


class ClusterError(CountingError):
    """The cluster cannot be reached or started, or a worker cannot do its part."""


def parse_cluster(text: str) -> int | str:
    """``"local:N"`` -> N worker processes; a scheduler address -> that address."""
    value = text.strip()
    if value.lower().startswith("local"):
        _, _, number = value.partition(":")
        if not number.strip().isdigit() or int(number) < 1:
            raise ClusterError(f"--cluster {text}: expected local:N with N >= 1 worker processes, e.g. local:2")
        return int(number)
    if not value:
        raise ClusterError("--cluster: expected local:N or a scheduler address such as tcp://host:8786")
    return value


@contextmanager
def open_cluster(text: str, *, quiet: bool = True) -> Iterator[Any]:
    """A connected ``distributed.Client``; a ``local:N`` cluster is shut down on exit.

    Local workers are separate processes with one task thread each: the forward pass inside a
    task is already multi-threaded, and a process per worker keeps one backbone per process.
    """
    from distributed import Client, LocalCluster

    target = parse_cluster(text)
    cluster = None
    try:
        if isinstance(target, int):
            cluster = LocalCluster(
                n_workers=target,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR if quiet else logging.WARNING,
            )
            client = Client(cluster)
        else:
            client = Client(target, timeout=float(os.environ.get("COUNTING_CLUSTER_TIMEOUT", CONNECT_TIMEOUT_S)))
    except (OSError, TimeoutError) as error:
        if cluster is not None:
            cluster.close()
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ClusterError(f"{text}: cannot reach a Dask scheduler ({detail})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
