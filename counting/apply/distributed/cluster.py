"""Connecting to a Dask cluster: ``local:N`` starts one on this machine, anything else is a
scheduler address (``tcp://host:8786``)."""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from counting.core.errors import CountingError

__all__ = ["ClusterError", "open_cluster", "parse_cluster"]

# Seconds to wait for a scheduler; COUNTING_CLUSTER_TIMEOUT overrides (slow networks, tests).
CONNECT_TIMEOUT_S = 20


class ClusterError(CountingError):
    """The cluster cannot be reached or started, or a worker cannot do its part."""


# Dask's own address forms: PROTOCOL://HOST[:PORT] or HOST:PORT (tcp). HOST is a name, an IPv4
# address or a bracketed IPv6 one; anything else fails inside distributed with a ValueError
# traceback, so it is refused here, while the options are parsed.
_ADDRESS = re.compile(
    r"^(?:(?P<protocol>[a-z][a-z0-9+.-]*)://)?(?P<host>\[[0-9a-f:.]+\]|[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?)(?::(?P<port>\d{1,5}))?$",
    re.IGNORECASE,
)
# inproc:// is left out: such an address lives inside one Python process, never a command line.
PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx")
ACCEPTED = "local:N (N worker processes here) or a scheduler address PROTOCOL://HOST:PORT such as tcp://host:8786"


def parse_cluster(text: str) -> int | str:
    """``"local:N"`` -> N worker processes; a scheduler address -> that address.

    Raises :class:`ClusterError` naming the accepted forms for anything else.
    """
    value = text.strip()
    if value.lower() == "local" or value.lower().startswith("local:"):
        _, _, number = value.partition(":")
        if not number.strip().isdigit() or not 1 <= int(number) <= 1024:
            raise ClusterError(f"--cluster {text}: expected local:N with 1 <= N <= 1024 worker processes, e.g. local:2")
        return int(number)
    match = _ADDRESS.match(value)
    protocol = (match.group("protocol") or "tcp").lower() if match else None
    port = match.group("port") if match else None
    if match is None or protocol not in PROTOCOLS or (port is not None and not 0 < int(port) < 65536):
        shown = f" {text}" if value else ""
        raise ClusterError(f"--cluster{shown}: expected {ACCEPTED}")
    if port is None:
        raise ClusterError(
            f"--cluster {text}: the scheduler address needs a port, e.g. {protocol}://{match.group('host')}:8786"
        )
    return value


def connect_timeout() -> float:
    """Seconds to wait for a scheduler: ``COUNTING_CLUSTER_TIMEOUT`` when set (a number of seconds
    from 0.1 to 3600), else :data:`CONNECT_TIMEOUT_S`; anything else is one line naming it."""
    text = os.environ.get("COUNTING_CLUSTER_TIMEOUT")
    if text is None:
        return float(CONNECT_TIMEOUT_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0.1 <= seconds <= 3600:  # NaN too: Dask read nan as a time unit, 1e9 hung, -1 garbled
        raise ClusterError(f"COUNTING_CLUSTER_TIMEOUT={text!r}: expected seconds from 0.1 to 3600")
    return seconds


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while processes are started (they keep it ignored), then as it was."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; a command's cluster is opened there
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def open_cluster(text: str, *, quiet: bool = True) -> Iterator[Any]:
    """A connected ``distributed.Client``; a ``local:N`` cluster is shut down on exit.

    Local workers are separate processes with one task thread each: the forward pass inside a
    task is already multi-threaded, and a process per worker keeps one backbone per process.
    """
    from distributed import Client, LocalCluster

    target = parse_cluster(text)
    timeout = connect_timeout()
    cluster = None
    try:
        if isinstance(target, int):
            # The workers start with Ctrl-C ignored (a process started with SIGINT ignored keeps it
            # so): a Ctrl-C reaches the whole process group, and each worker printed its traceback
            # around the command's one line; the command stops them itself when it ends. Scheduler
            # errors of that stop (scattered data lost with a worker) are not the user's either.
            with _sigint_ignored():
                cluster = LocalCluster(
                    n_workers=target,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.CRITICAL if quiet else logging.WARNING,
                )
            client = Client(cluster)
        else:
            client = Client(target, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as error:  # ValueError: an address distributed cannot use
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
