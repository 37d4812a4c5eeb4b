"""The ``--cluster`` option: run a command's descriptor extraction on a Dask cluster."""

from __future__ import annotations

import atexit
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

__all__ = [
    "ClusterExtraction",
    "ClusterOption",
    "StreamsClusterOption",
    "cluster_extraction",
    "count_sources",
    "extraction_on",
]

ClusterOption = Annotated[
    Optional[str],
    typer.Option(
        "--cluster",
        help="Extract descriptors on a Dask cluster: local:N (N worker processes on this machine) "
        "or a scheduler address such as tcp://HOST:8786. Same descriptors as without it.",
        show_default=False,
    ),
]

StreamsClusterOption = Annotated[
    Optional[str],
    typer.Option(
        "--cluster",
        help="With --sources: the Dask cluster that runs one task per stream, local:N or a scheduler "
        "address such as tcp://HOST:8786.",
        show_default=False,
    ),
]


class ClusterExtraction:
    """An ``extract_features``-compatible callable that connects on its first call and stays
    connected (one cluster for a command's several extractions) until :meth:`close` or exit."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._stack: ExitStack | None = None
        self._extract: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._extract is None:
            from counting.distributed import cluster_extractor, open_cluster

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
    """``None`` without ``--cluster``; else a :class:`ClusterExtraction`, closed on exit."""
    if cluster is None:
        yield None
        return
    extraction = ClusterExtraction(cluster)
    try:
        yield extraction
    finally:
        extraction.close()


def extraction_on(cluster: str | None, local: Callable[..., Any]) -> Callable[..., Any]:
    """``local`` itself without ``--cluster``; else a function that connects, runs one
    extraction on the cluster (same arguments, same result) and disconnects."""
    if cluster is None:
        return local

    def on_cluster(*args: Any, **kwargs: Any) -> Any:
        with cluster_extraction(cluster) as extract:
            assert extract is not None
            return extract(*args, **kwargs)

    return on_cluster


def count_sources(
    source: str | None,
    sources: Path | None,
    counts_dir: Path | None,
    cluster: str | None,
    model: Path | None,
    counts: Path | None,
    output_video: Path | None,
    weights: Path | None,
    **video_options: Any,
) -> None:
    """``counting video --sources FILE``: every listed stream as its own task on the cluster."""
    from counting.cli.common import console, print_error
    from counting.distributed import count_streams, open_cluster, read_sources
    from counting.errors import StreamError

    if sources is None and source is not None:
        raise StreamError(f"{source}: --cluster runs the streams of --sources FILE; a single SOURCE runs here")
    if sources is None:
        raise StreamError("no video source: give SOURCE, or --sources FILE listing one source per line")
    if source is not None:
        raise StreamError(f"{source}: give either SOURCE or --sources, not both")
    if counts is not None or output_video is not None or weights is not None:
        raise StreamError(
            "--sources writes one counts file per stream into --counts-dir; "
            "--counts, --output and --weights apply to a single SOURCE"
        )
    listed = read_sources(sources)
    folder = counts_dir if counts_dir is not None else sources.with_name(f"{sources.stem}-counts")
    target = cluster if cluster is not None else f"local:{max(1, min(len(listed), _cores()))}"
    console.print(f"{len(listed)} streams on {target}; counts in {folder}/")

    def done(outcome: Any) -> None:
        if outcome.error:
            print_error(outcome.error)
            return
        mean = f", mean count {outcome.mean_count:.1f}" if outcome.mean_count is not None else ""
        console.print(
            f"[green]done:[/] {outcome.source}: {outcome.frames} frames in {outcome.seconds:.1f} s"
            f"{mean} -> {outcome.counts_path}"
        )

    with open_cluster(target) as client:
        outcomes = count_streams(client, listed, folder, model, on_done=done, **video_options)
    failed = [outcome for outcome in outcomes if outcome.error]
    if failed:
        raise typer.Exit(1)


def _cores() -> int:
    from counting.features.extract import available_cpus

    return available_cpus()
