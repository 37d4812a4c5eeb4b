"""`counting video`: per-frame counts from a video file, webcam or network stream."""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from counting.cli.common import (
    Stdout,
    console,
    error_console,
    informational,
    load_model_option,
    print_error,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.options import (
    CLUSTER_STREAMS,
    OUTPUT,
    PROGRESS_DEFAULT,
    SKIPPED_BY_DEFAULT,
    SMOOTH_DEFAULT,
    CacheDirOption,
    CountsDirOption,
    ModelOption,
    NoCacheOption,
    ProgressOption,
    QuietOption,
    RuntimeOption,
    SmoothOption,
    SourcesOption,
    ThreadsOption,
    VideoBatchSizeOption,
    WeightsOption,
    ZoneOption,
    ZonesFileOption,
    cluster_option,
    csv_option,
    deprecated_alias,
    jsonl_option,
    retired_flag,
    strict_option,
    zones_option,
)
from counting.core import defaults
from counting.core.columns import zone_column
from counting.core.files import is_stdout
from counting.core.signals import EXIT_TERMINATED, was_terminated
from counting.core.terminal import on_terminal
from counting.heads.crowd.sparse_gate import disputed_summary
from counting.heads.familiarity import unfamiliar_summary


def records_file(csv: Path | None, jsonl: Path | None, counts: Path | None) -> tuple[Path | None, str | None]:
    """The one per-frame counts file of ``--csv``, ``--jsonl`` or the old ``--counts``, and its
    format: the option's (``--csv counts.txt`` is CSV, as in ``count``), or for ``--counts`` the
    name's (.csv: CSV, JSON lines otherwise)."""
    given = [(name, path) for name, path in (("--csv", csv), ("--jsonl", jsonl), ("--counts", counts)) if path]
    if len(given) > 1:
        # A usage error (exit 2), as an old spelling given beside its new one is in every command.
        names = " or ".join(name for name, _ in given)
        raise typer.BadParameter(f"{given[1][1]}: give one counts file ({names}), not two", param_hint=given[1][0])
    # "-" is stdout, as in count: the rows go through the open descriptor (RecordSink).
    csv, jsonl = (None if path is None else Path("/dev/stdout") if is_stdout(path) else path for path in (csv, jsonl))
    if csv is not None:
        return csv, "csv"
    if jsonl is not None:
        return jsonl, "jsonl"
    return counts, None


def video(
    source: Annotated[
        Optional[str],
        typer.Argument(
            help="Video file, webcam index (0, 1, ...) or stream URL (rtsp://..., http://...).",
            show_default=False,
            metavar="SOURCE",
        ),
    ] = None,
    model: ModelOption = None,
    csv: Annotated[Optional[Path], csv_option("Write the per-frame counts as CSV, row by row.")] = None,
    jsonl: Annotated[Optional[Path], jsonl_option("Write the per-frame counts as JSON lines, row by row.")] = None,
    counts: Annotated[
        Optional[Path], deprecated_alias("--counts", "-c", instead="--csv FILE.csv or --jsonl FILE")
    ] = None,
    output_video: Annotated[
        Optional[Path],
        typer.Option(
            "--annotated",
            metavar="FILE",
            help="Write an annotated video (.avi or .mp4) with the count drawn on each frame.",
            show_default=False,
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    stride: Annotated[int, typer.Option(min=1, metavar="N", help="Count every N-th frame.")] = 1,
    smooth: SmoothOption = SMOOTH_DEFAULT,
    max_frames: Annotated[
        Optional[int],
        typer.Option(min=1, metavar="N", help="Stop after this many counted frames.", show_default=False),
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            min=0, metavar="N", help="Reconnection attempts when a live stream drops (back-off 0.5 s, 1 s, 2 s, ...)."
        ),
    ] = 5,
    strict: Annotated[
        bool,
        strict_option(
            "Stop at the first frame of a file that cannot be decoded (exit 1; the counts so far are kept). "
            "Without it such frames are skipped with a line on stderr."
        ),
    ] = False,
    ignore_errors: Annotated[bool, retired_flag("--ignore-errors", SKIPPED_BY_DEFAULT)] = False,
    weights: WeightsOption = None,
    zones_file: ZonesFileOption = None,
    zone: ZoneOption = None,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = False,
    batch_size: VideoBatchSizeOption = defaults.VIDEO_BATCH_SIZE,
    progress: ProgressOption = PROGRESS_DEFAULT,
    quiet: QuietOption = False,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
    sources: SourcesOption = None,
    counts_dir: CountsDirOption = None,
    cluster: Annotated[Optional[str], cluster_option(CLUSTER_STREAMS)] = None,
) -> None:
    """Count people in each frame of a video file, webcam or RTSP/HTTP stream.

    A line per frame on stdout; with --csv/--jsonl the file holds the counts, and on a terminal a
    progress bar replaces the lines (--no-progress shows them, --quiet neither). End of file ends
    cleanly; a dropped live stream is retried with back-off; frames of a damaged file that cannot be
    decoded are skipped with a line on stderr (--strict: stop there, exit 1); Ctrl-C or SIGTERM
    stops and keeps everything written so far. Frames are never cached (--cache-dir, --no-cache:
    no effect here).
    """
    use_runtime(runtime, threads)
    from counting.apply.video import VideoSource, count_video, overlay_note
    from counting.core.files import OutputError, check_writable, open_descriptor, printable, shares_stdout

    # What the run did and where it wrote (done:, counts written to ...) are diagnostics: stdout
    # holds the per-frame lines a pipe reads, or nothing, and never a line it would take for one.
    say = informational(quiet, on_stderr=True)
    records, records_format = records_file(csv, jsonl, counts)
    zones = zones_option(zones_file, zone)  # a bad zone fails before anything is opened
    if zones:
        from counting.apply.zones import check_localises

        check_localises(load_model_option(model))  # once here, not once per stream
    if sources is not None or source is None or cluster is not None:
        count_sources(
            source,
            sources,
            counts_dir,
            cluster,
            model,
            records,
            output_video,
            weights,
            quiet=quiet,
            stride=stride,
            smooth_window=smooth,
            max_frames=max_frames,
            max_retries=retries,
            batch_size=batch_size,
            zones=zones,
        )
        return
    video_source = VideoSource.parse(source)  # a missing file fails before the model loads
    if records is not None:
        check_writable(records, in_place=True)  # rows are streamed into the file itself
    if output_video is not None:
        check_writable(output_video)
        if open_descriptor(output_video) is not None:  # count --annotated refuses it too
            raise OutputError(
                f"{output_video}: is an open file descriptor; the annotated video is written beside its file "
                "and renamed into place when whole: give a file name"
            )
    refuse_outputs_on_inputs(
        [records, output_video],
        inputs=[video_source.spec if video_source.kind == "file" else None, weights, zones_file],
        model=model,
    )
    # A Ctrl-C before the run starts counting (the model loading) says the files are unchanged.
    say_outputs_on_interrupt([records, output_video])
    existed = {path: os.path.lexists(path) for path in (records, output_video) if path is not None}
    counting_model = load_model_option(model)
    counting_model.get_backbone(weights)

    # The per-frame lines are the results unless a file takes the counts; then, on a terminal,
    # a progress bar (stderr) replaces them. A bar never shares a terminal with the lines.
    lines_are_results = records is None
    bar = progress and not quiet and on_terminal(error_console) and not (lines_are_results and on_terminal(console))
    # Rows into stdout itself (`--csv /dev/stdout`): the lines would be mixed into them.
    print_lines = lines_are_results or not (quiet or bar or shares_stdout(records))
    frames_bar = _FramesBar(video_source, stride, max_frames) if bar else None
    # The lines go through `stdout`, which keeps going when stdout fails (a full disk behind
    # `> file`, a reader that closed the pipe) and says so once, after the files (cli/common.py).
    stdout = Stdout()

    def show(record: dict) -> None:
        if frames_bar is not None:
            frames_bar.advance()
        if not print_lines:
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
        for item in zones:  # each zone's count after the frame's
            text += f"  {escape(item.name)} {record[zone_column('count', item.name)]:.1f}"
        note = overlay_note(record)  # the marks count's table shows: "unlike training", "disputed"
        if note is not None:
            text += f"  [bold red]{note}[/]"
        stdout.write(lambda: console.print(text))
        if stdout.error is not None and records is None and output_video is None:
            # The lines were the run's only output: stop now (a live stream would run on for
            # nothing), with the one line (none for a closed pipe, as `| head` expects). With a
            # counts file or a video the run goes on without its lines, and both are finished
            # whole: stopping here would leave them cut at this frame.
            stdout.finish()

    def retrying(attempt: int, delay: float) -> None:
        error_console.print(
            f"[yellow]warning:[/] {escape(source)}: stream unavailable; reconnecting in {delay:.1f} s "
            f"(attempt {attempt}/{retries})",
            soft_wrap=True,
        )

    def damaged(problem: Any) -> None:
        error_console.print(f"[yellow]warning:[/] {escape(problem.message)}", soft_wrap=True)

    with frames_bar if frames_bar is not None else nullcontext():
        run = count_video(
            counting_model,
            video_source,
            stride=stride,
            smooth_window=smooth,
            records_path=records,
            records_format=records_format,
            output_video=output_video,
            batch_size=batch_size,
            max_frames=max_frames,
            max_retries=retries,
            on_record=show,
            on_retry=retrying,
            skip_bad_frames=not strict,
            on_problem=damaged,
            zones=zones,
        )
    status = ("terminated" if was_terminated() else "interrupted") if run.interrupted else "done"
    mean = f", mean count {run.mean_count:.1f}" if run.mean_count is not None else ""
    # A diagnostic (stderr): an interruption is always said, the end of a run unless --quiet.
    (error_console.print if run.interrupted else say)(
        f"[green]{status}:[/] {run.frames} frames in {run.seconds:.1f} s "
        f"({run.frames_per_second:.1f} frames/s, {run.realtime_ratio:.2f}× real time){mean}"
    )
    say_marked_frames(run)
    # Only what was written is said written: a run stopped before its first frame left both as they were.
    if records is not None:
        name = escape(printable(str(records)))
        said = f"counts written to {name}" if run.records_written else f"{name} {_left_as_it_was(existed[records])}"
        say(said, soft_wrap=True)  # a path stays whole, copy-pasteable
    if output_video is not None:
        name = escape(printable(str(output_video)))
        said = f"annotated video written to {name}"
        say(said if run.video_written else f"{name} {_left_as_it_was(existed[output_video])}", soft_wrap=True)
    if run.interrupted:
        raise typer.Exit(EXIT_TERMINATED if was_terminated() else 130)
    stdout.finish()  # after the files: one line, exit 1, when stdout failed
    if run.problems and strict:
        print_error(
            f"{source}: {len(run.problems)} frame(s) could not be decoded, first at frame "
            f"{run.problems[0].frame} (--strict stops there; without it they are skipped)"
        )
        raise typer.Exit(1)


def say_marked_frames(run: Any, prefix: str = "") -> None:
    """One warning line each for a run's unfamiliar frames (counting.heads.familiarity) and its
    disputed ones (counting.heads.crowd.sparse_gate, "Disputed counts"); ``run``: a VideoRun or a
    stream's StreamOutcome (both count them)."""
    for warning in (
        unfamiliar_summary(run.unfamiliar_frames, run.scored_frames, "frames"),
        disputed_summary(run.disputed_frames, run.frames, "frames"),
    ):
        if warning is not None:
            error_console.print(f"[yellow]warning:[/] {prefix}{warning}", soft_wrap=True)


def _left_as_it_was(existed: bool) -> str:
    return "is unchanged (no frame was counted)" if existed else "was not created (no frame was counted)"


class _FramesBar:
    """The video's progress bar on stderr: frames counted, of the file's frames when known."""

    def __init__(self, video_source: Any, stride: int, max_frames: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        total = _frames_to_count(video_source, stride, max_frames)
        self.progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=error_console,
            transient=True,
        )
        self.task = self.progress.add_task("counting frames", total=total)

    def __enter__(self) -> _FramesBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def advance(self) -> None:
        self.progress.advance(self.task)


def _frames_to_count(video_source: Any, stride: int, max_frames: int | None) -> int | None:
    """How many frames a file gives at ``stride`` (its header's count; None for a live source)."""
    total = None
    if video_source.kind == "file":
        import cv2

        capture = cv2.VideoCapture(video_source.spec)
        try:
            stated = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        finally:
            capture.release()
        total = -(-stated // stride) if stated > 0 else None
    if max_frames is not None:
        total = max_frames if total is None else min(total, max_frames)
    return total


def count_sources(
    source: str | None,
    sources: Path | None,
    counts_dir: Path | None,
    cluster: str | None,
    model: Path | None,
    counts: Path | None,
    output_video: Path | None,
    weights: Path | None,
    quiet: bool = False,
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
            "--csv, --jsonl, --annotated and --weights apply to a single SOURCE"
        )
    listed = read_sources(sources)
    folder = counts_dir if counts_dir is not None else sources.with_name(f"{sources.stem}-counts")
    # The list, the model and every listed file are inputs: no stream's counts file may replace one.
    from counting.apply.distributed.streams import counts_file_names

    files = [Path(source) for source in listed if "://" not in source and not source.isdigit()]
    refuse_outputs_on_inputs(
        [folder / name for name in counts_file_names(listed)], inputs=[sources, *files], model=model
    )
    target = cluster if cluster is not None else f"local:{max(1, min(len(listed), _cores()))}"
    informational(quiet)(f"{len(listed)} streams on {target}; counts in {folder}/")

    def done(outcome: Any) -> None:
        if outcome.error:
            print_error(outcome.error)
            return
        mean = f", mean count {outcome.mean_count:.1f}" if outcome.mean_count is not None else ""
        console.print(
            f"[green]done:[/] {outcome.source}: {outcome.frames} frames in {outcome.seconds:.1f} s"
            f"{mean} -> {outcome.counts_path}"
        )
        say_marked_frames(outcome, f"{escape(outcome.source)}: ")  # each stream's, as a single run's

    with open_cluster(target) as client:
        outcomes = count_streams(client, listed, folder, model, on_done=done, **video_options)
    failed = [outcome for outcome in outcomes if outcome.error]
    if failed:
        raise typer.Exit(1)


def _cores() -> int:
    from counting.features.backbones.runtime import available_cpus

    return available_cpus()
