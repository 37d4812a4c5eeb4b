"""`counting video`: per-frame counts from a video file, webcam or network stream."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from counting import defaults
from counting.cli.cluster import StreamsClusterOption, count_sources
from counting.cli.common import console, load_model_option, print_error
from counting.cli.evaluate import ModelOption
from counting.cli.train import WeightsOption


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
            "--output",
            help="Write an annotated video (.avi or .mp4) with the count drawn on each frame.",
            show_default=False,
        ),
    ] = None,
    stride: Annotated[int, typer.Option(min=1, help="Count every N-th frame.")] = 1,
    smooth: Annotated[
        int, typer.Option(min=1, help="Temporal smoothing: mean over the last N counted frames (1 = off).")
    ] = 1,
    max_frames: Annotated[
        Optional[int], typer.Option(min=1, help="Stop after this many counted frames.", show_default=False)
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            min=0, help="Reconnection attempts when a live stream drops (back-off 0.5 s, 1 s, 2 s, …)."
        ),
    ] = 5,
    batch_size: Annotated[
        int, typer.Option(min=1, help="Frames per forward pass (more: faster, more latency).")
    ] = defaults.VIDEO_BATCH_SIZE,
    weights: WeightsOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print a line per frame.")] = False,
    sources: Annotated[
        Optional[Path],
        typer.Option(
            "--sources",
            help="Count many streams at once: a file listing one source per line; one task and one counts "
            "file per stream (in --counts-dir). Runs on --cluster, default local:N (a worker per stream, "
            "up to the cores here).",
            show_default=False,
        ),
    ] = None,
    counts_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--counts-dir",
            help="With --sources: folder for the per-stream counts files (default SOURCES_STEM-counts/).",
            show_default=False,
        ),
    ] = None,
    cluster: StreamsClusterOption = None,
) -> None:
    """Count people in each frame of a video file, webcam or RTSP/HTTP stream.

    End of file ends cleanly; a dropped stream is retried with back-off; Ctrl-C stops and keeps
    everything written so far.
    """
    from counting.video import VideoSource, count_video

    if sources is not None or source is None or cluster is not None:
        count_sources(source, sources, counts_dir, cluster, model, counts, output_video, weights,
                      stride=stride, smooth_window=smooth, max_frames=max_frames, max_retries=retries,
                      batch_size=batch_size)
        return
    video_source = VideoSource.parse(source)  # a missing file fails before the model loads
    counting_model = load_model_option(model)
    counting_model.get_backbone(weights)

    def show(record: dict) -> None:
        if quiet:
            return
        value = record.get("smoothed", record.get("count"))
        text = (
            f"frame {record['frame']:>6}  t={record['time_s']:8.2f}s  count {value:6.1f}"
            if value is not None
            else f"frame {record['frame']}"
        )
        if "low" in record:
            text += f"  [{record['low']:.1f}, {record['high']:.1f}]"
        console.print(text)

    def retrying(attempt: int, delay: float) -> None:
        print_error(f"{source}: stream dropped; reconnecting in {delay:.1f} s (attempt {attempt}/{retries})")

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
    )
    status = "interrupted" if run.interrupted else "done"
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
        raise typer.Exit(130)
