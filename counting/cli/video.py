"""`counting video`: per-frame counts from a video file, webcam or network stream."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from counting.cli.common import (
    console,
    error_console,
    load_model_option,
    print_error,
    refuse_outputs_on_inputs,
    use_runtime,
)
from counting.cli.options import (
    ClusterOption,
    CountsDirOption,
    ModelOption,
    RuntimeOption,
    SourcesOption,
    ThreadsOption,
    WeightsOption,
    smooth_option,
)
from counting.core import defaults
from counting.core.signals import EXIT_TERMINATED, was_terminated


def video(
    source: Annotated[
        Optional[str],
        typer.Argument(
            help="Video file, webcam index (0, 1, …) or stream URL (rtsp://…, http://…).", show_default=False
        ),
    ] = None,
    model: ModelOption = None,
    counts: Annotated[
        Optional[Path],
        typer.Option(
            "--counts",
            "-c",
            help="Per-frame counts file: .csv, or JSON lines (.jsonl), written as they are computed.",
            show_default=False,
        ),
    ] = None,
    output_video: Annotated[
        Optional[Path],
        typer.Option(
            "--annotated",
            help="Write an annotated video (.avi or .mp4) with the count drawn on each frame.",
            show_default=False,
        ),
    ] = None,
    stride: Annotated[int, typer.Option(min=1, help="Count every N-th frame.")] = 1,
    smooth: Annotated[
        int,
        smooth_option(
            "Live smoothing: causal linear-exponential filter of span N counted frames, adds the smoothed "
            "count with its own interval (9 chosen on Mall, scripts/smoothing_study.py)"
        ),
    ] = 1,
    max_frames: Annotated[
        Optional[int], typer.Option(min=1, help="Stop after this many counted frames.", show_default=False)
    ] = None,
    retries: Annotated[
        int,
        typer.Option(min=0, help="Reconnection attempts when a live stream drops (back-off 0.5 s, 1 s, 2 s, …)."),
    ] = 5,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Frames per forward pass (more: faster, more latency).")
    ] = defaults.VIDEO_BATCH_SIZE,
    weights: WeightsOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print a line per frame.")] = False,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
    ignore_errors: Annotated[
        bool,
        typer.Option(
            "--ignore-errors",
            help="Skip frames of a damaged file that cannot be decoded and exit 0 (default: stop, exit 1).",
        ),
    ] = False,
    sources: SourcesOption = None,
    counts_dir: CountsDirOption = None,
    cluster: ClusterOption = None,
) -> None:
    """Count people in each frame of a video file, webcam or RTSP/HTTP stream.

    End of file ends cleanly; a dropped live stream is retried with back-off; Ctrl-C or SIGTERM
    stops and keeps everything written so far.
    """
    use_runtime(runtime, threads)
    from counting.apply.video import VideoSource, count_video
    from counting.core.files import check_writable

    if sources is not None or source is None or cluster is not None:
        count_sources(
            source,
            sources,
            counts_dir,
            cluster,
            model,
            counts,
            output_video,
            weights,
            stride=stride,
            smooth_window=smooth,
            max_frames=max_frames,
            max_retries=retries,
            batch_size=batch_size,
        )
        return
    video_source = VideoSource.parse(source)  # a missing file fails before the model loads
    if counts is not None:
        check_writable(counts, in_place=True)  # rows are streamed into the file itself
    if output_video is not None:
        check_writable(output_video)
    refuse_outputs_on_inputs(
        [counts, output_video],
        inputs=[video_source.spec if video_source.kind == "file" else None, weights],
        model=model,
    )
    counting_model = load_model_option(model)
    counting_model.get_backbone(weights)

    def show(record: dict) -> None:
        if quiet:
            return
        value = record.get("count")
        if value is None:  # multi-class models: one column per class
            console.print(f"frame {record['frame']}")
            return
        text = f"frame {record['frame']:>6}  t={record['time_s']:8.2f}s  count {value:6.1f}"
        if "low" in record:  # the interval belongs to the frame's own count, so it sits beside it
            text += f" [{record['low']:.1f}, {record['high']:.1f}]"
        if "smoothed" in record:  # and the smoothed count beside its own interval
            text += f"  smoothed {record['smoothed']:6.1f}"
            if "smoothed_low" in record:
                text += f" [{record['smoothed_low']:.1f}, {record['smoothed_high']:.1f}]"
        console.print(text)

    def retrying(attempt: int, delay: float) -> None:
        error_console.print(
            f"[yellow]warning:[/] {escape(source)}: stream unavailable; reconnecting in {delay:.1f} s "
            f"(attempt {attempt}/{retries})",
            soft_wrap=True,
        )

    def damaged(problem: Any) -> None:
        error_console.print(f"[yellow]warning:[/] {escape(problem.message)}", soft_wrap=True)

    run = count_video(
        counting_model,
        video_source,
        stride=stride,
        smooth_window=smooth,
        records_path=counts,
        output_video=output_video,
        batch_size=batch_size,
        max_frames=max_frames,
        max_retries=retries,
        on_record=show,
        on_retry=retrying,
        skip_bad_frames=ignore_errors,
        on_problem=damaged,
    )
    status = ("terminated" if was_terminated() else "interrupted") if run.interrupted else "done"
    mean = f", mean count {run.mean_count:.1f}" if run.mean_count is not None else ""
    console.print(
        f"[green]{status}:[/] {run.frames} frames in {run.seconds:.1f} s "
        f"({run.frames_per_second:.1f} frames/s, {run.realtime_ratio:.2f}× real time){mean}"
    )
    if counts is not None:
        console.print(f"counts written to {counts}")
    if output_video is not None:
        console.print(f"annotated video written to {output_video}")
    if run.interrupted:
        raise typer.Exit(EXIT_TERMINATED if was_terminated() else 130)
    if run.problems and not ignore_errors:
        print_error(
            f"{source}: {len(run.problems)} frame(s) could not be decoded, first at frame "
            f"{run.problems[0].frame} (--ignore-errors skips them)"
        )
        raise typer.Exit(1)


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
    from counting.apply.distributed import count_streams, open_cluster, read_sources
    from counting.core.errors import StreamError

    if sources is None and source is not None:
        raise StreamError(f"{source}: --cluster runs the streams of --sources FILE; a single SOURCE runs here")
    if sources is None:
        raise StreamError("no video source: give SOURCE, or --sources FILE listing one source per line")
    if source is not None:
        raise StreamError(f"{source}: give either SOURCE or --sources, not both")
    if counts is not None or output_video is not None or weights is not None:
        raise StreamError(
            "--sources writes one counts file per stream into --counts-dir; "
            "--counts, --annotated and --weights apply to a single SOURCE"
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
    from counting.features.backbones.runtime import available_cpus

    return available_cpus()
