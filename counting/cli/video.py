"""`counting video`: per-frame counts from a video file, webcam or network stream."""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

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
from counting.cli.option_groups import with_groups
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

if TYPE_CHECKING:
    from counting.model.counting_model import CountingModel


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


# Options only `video` takes, one alias each; grouped below as the command reads them.
SourceArgument = Annotated[
    Optional[str],
    typer.Argument(
        help="Video file, webcam index (0, 1, ...) or stream URL (rtsp://..., http://...).",
        show_default=False,
        metavar="SOURCE",
    ),
]
VideoCsvOption = Annotated[Optional[Path], csv_option("Write the per-frame counts as CSV, row by row.")]
VideoJsonlOption = Annotated[Optional[Path], jsonl_option("Write the per-frame counts as JSON lines, row by row.")]
OldCountsOption = Annotated[
    Optional[Path], deprecated_alias("--counts", "-c", instead="--csv FILE.csv or --jsonl FILE")
]
AnnotatedVideoOption = Annotated[
    Optional[Path],
    typer.Option(
        "--annotated",
        metavar="FILE",
        help="Write an annotated video (.avi or .mp4) with the count drawn on each frame.",
        show_default=False,
        rich_help_panel=OUTPUT,
    ),
]
StrideOption = Annotated[int, typer.Option(min=1, metavar="N", help="Count every N-th frame.")]
MaxFramesOption = Annotated[
    Optional[int], typer.Option(min=1, metavar="N", help="Stop after this many counted frames.", show_default=False)
]
RetriesOption = Annotated[
    int,
    typer.Option(
        min=0, metavar="N", help="Reconnection attempts when a live stream drops (back-off 0.5 s, 1 s, 2 s, ...)."
    ),
]
VideoStrictOption = Annotated[
    bool,
    strict_option(
        "Stop at the first frame of a file that cannot be decoded (exit 1; the counts so far are kept). "
        "Without it such frames are skipped with a line on stderr."
    ),
]
IgnoreErrorsFlag = Annotated[bool, retired_flag("--ignore-errors", SKIPPED_BY_DEFAULT)]
StreamsClusterOption = Annotated[Optional[str], cluster_option(CLUSTER_STREAMS)]


@dataclass(frozen=True)
class VideoFiles:
    """Where a single source's counts go (one file, as CSV or JSON lines) and its annotated video."""

    csv: VideoCsvOption = None
    jsonl: VideoJsonlOption = None
    counts: OldCountsOption = None
    output_video: AnnotatedVideoOption = None


@dataclass(frozen=True)
class FrameReading:
    """Which frames are counted and how: stride, smoothing, how many, retries, damaged frames."""

    stride: StrideOption = 1
    smooth: SmoothOption = SMOOTH_DEFAULT
    max_frames: MaxFramesOption = None
    retries: RetriesOption = 5
    strict: VideoStrictOption = False
    ignore_errors: IgnoreErrorsFlag = False


@dataclass(frozen=True)
class VideoRunOptions:
    """How the frames are run through the model (``PictureRun``'s options, with video's batch)."""

    cache_dir: CacheDirOption = None
    no_cache: NoCacheOption = False
    batch_size: VideoBatchSizeOption = defaults.VIDEO_BATCH_SIZE
    progress: ProgressOption = PROGRESS_DEFAULT
    quiet: QuietOption = False
    runtime: RuntimeOption = defaults.RUNTIME
    threads: ThreadsOption = None


@dataclass(frozen=True)
class StreamList:
    """Many streams at once: a list of sources, a folder for their counts, a cluster."""

    sources: SourcesOption = None
    counts_dir: CountsDirOption = None
    cluster: StreamsClusterOption = None


@with_groups
def video(
    source: SourceArgument = None,
    model: ModelOption = None,
    files: VideoFiles = VideoFiles(),
    reading: FrameReading = FrameReading(),
    weights: WeightsOption = None,
    zones_file: ZonesFileOption = None,
    zone: ZoneOption = None,
    run: VideoRunOptions = VideoRunOptions(),
    streams: StreamList = StreamList(),
) -> None:
    """Count people in each frame of a video file, webcam or RTSP/HTTP stream.

    A line per frame on stdout; with --csv/--jsonl the file holds the counts, and on a terminal a
    progress bar replaces the lines (--no-progress shows them, --quiet neither). End of file ends
    cleanly; a dropped live stream is retried with back-off; frames of a damaged file that cannot be
    decoded are skipped with a line on stderr (--strict: stop there, exit 1); Ctrl-C or SIGTERM
    stops and keeps everything written so far. Frames are never cached (--cache-dir, --no-cache:
    no effect here).
    """
    use_runtime(run.runtime, run.threads)
    records, records_format = records_file(files.csv, files.jsonl, files.counts)
    zones = zones_option(zones_file, zone)  # a bad zone fails before anything is opened
    if zones:
        from counting.apply.zones import check_localises

        check_localises(load_model_option(model))  # once here, not once per stream
    if streams.sources is not None or source is None or streams.cluster is not None:
        count_sources(
            source,
            streams.sources,
            streams.counts_dir,
            streams.cluster,
            model,
            records,
            files.output_video,
            weights,
            quiet=run.quiet,
            stride=reading.stride,
            smooth_window=reading.smooth,
            max_frames=reading.max_frames,
            max_retries=reading.retries,
            batch_size=run.batch_size,
            zones=zones,
        )
        return
    from counting.apply.video import VideoSource

    video_source = VideoSource.parse(source)  # a missing file fails before the model loads
    outputs = _SingleOutputs(records, records_format, files.output_video)
    outputs.check(video_source, weights, zones_file, model)
    counting_model = load_model_option(model)
    counting_model.get_backbone(weights)
    lines = _FrameLines(outputs, zones, run, _FramesBar.wanted(run, outputs.records, video_source, reading))
    with lines.bar if lines.bar is not None else nullcontext():
        counted = _count_source(counting_model, source, video_source, reading, run, outputs, lines.show, zones)
    _say_the_end(counted, outputs, lines.stdout, reading.strict, source, informational(run.quiet, on_stderr=True))


@dataclass
class _SingleOutputs:
    """A single source's outputs: the counts file and its format, the annotated video, and which
    of them existed before the run (to say that one was left as it was)."""

    records: Path | None
    records_format: str | None
    video: Path | None
    existed: dict[Path, bool] = field(default_factory=dict)

    def check(self, video_source: Any, weights: Path | None, zones_file: Path | None, model: Path | None) -> None:
        """Refuse outputs that cannot be written, or that would replace an input, before any work."""
        from counting.core.files import OutputError, check_writable, open_descriptor

        if self.records is not None:
            check_writable(self.records, in_place=True)  # rows are streamed into the file itself
        if self.video is not None:
            check_writable(self.video)
            if open_descriptor(self.video) is not None:  # count --annotated refuses it too
                raise OutputError(
                    f"{self.video}: is an open file descriptor; the annotated video is written beside its file "
                    "and renamed into place when whole: give a file name"
                )
        refuse_outputs_on_inputs(
            [self.records, self.video],
            inputs=[video_source.spec if video_source.kind == "file" else None, weights, zones_file],
            model=model,
        )
        # A Ctrl-C before the run starts counting (the model loading) says the files are unchanged.
        say_outputs_on_interrupt([self.records, self.video])
        self.existed = {path: os.path.lexists(path) for path in (self.records, self.video) if path is not None}


def _count_source(
    counting_model: CountingModel,
    source: str,
    video_source: Any,
    reading: FrameReading,
    run: VideoRunOptions,
    outputs: _SingleOutputs,
    show: Any,
    zones: Any,
) -> Any:
    """``count_video`` on the one source, its warnings (reconnections, damaged frames) on stderr."""
    from counting.apply.video import count_video

    def retrying(attempt: int, delay: float) -> None:
        error_console.print(
            f"[yellow]warning:[/] {escape(source)}: stream unavailable; reconnecting in {delay:.1f} s "
            f"(attempt {attempt}/{reading.retries})",
            soft_wrap=True,
        )

    def damaged(problem: Any) -> None:
        error_console.print(f"[yellow]warning:[/] {escape(problem.message)}", soft_wrap=True)

    return count_video(
        counting_model,
        video_source,
        stride=reading.stride,
        smooth_window=reading.smooth,
        records_path=outputs.records,
        records_format=outputs.records_format,
        output_video=outputs.video,
        batch_size=run.batch_size,
        max_frames=reading.max_frames,
        max_retries=reading.retries,
        on_record=show,
        on_retry=retrying,
        skip_bad_frames=not reading.strict,
        on_problem=damaged,
        zones=zones,
    )


class _FrameLines:
    """The per-frame lines on stdout: the results unless a file takes the counts; then, on a
    terminal, a progress bar (stderr) replaces them. A bar never shares a terminal with the lines."""

    def __init__(self, outputs: _SingleOutputs, zones: Any, run: VideoRunOptions, bar: _FramesBar | None) -> None:
        from counting.core.files import shares_stdout

        self.outputs, self.zones, self.bar = outputs, zones, bar
        # Rows into stdout itself (`--csv /dev/stdout`): the lines would be mixed into them.
        lines_are_results = outputs.records is None
        self.print_lines = lines_are_results or not (run.quiet or bar is not None or shares_stdout(outputs.records))
        # The lines go through `stdout`, which keeps going when stdout fails (a full disk behind
        # `> file`, a reader that closed the pipe) and says so once, after the files (cli/common.py).
        self.stdout = Stdout()

    def show(self, record: dict) -> None:
        if self.bar is not None:
            self.bar.advance()
        if not self.print_lines:
            return
        if record.get("count") is None:  # multi-class models: one column per class
            console.print(f"frame {record['frame']}")
            return
        text = _frame_line(record, self.zones)
        self.stdout.write(lambda: console.print(text))
        if self.stdout.error is not None and self.outputs.records is None and self.outputs.video is None:
            # The lines were the run's only output: stop now (a live stream would run on for
            # nothing), with the one line (none for a closed pipe, as `| head` expects). With a
            # counts file or a video the run goes on without its lines, and both are finished
            # whole: stopping here would leave them cut at this frame.
            self.stdout.finish()


def _frame_line(record: dict, zones: Any) -> str:
    """One frame's line: its count and interval, the smoothed count and its own, its zones, its marks."""
    from counting.apply.video import overlay_note

    text = f"frame {record['frame']:>6}  t={record['time_s']:8.2f}s  count {record['count']:6.1f}"
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
    return text


def _say_the_end(counted: Any, outputs: _SingleOutputs, stdout: Stdout, strict: bool, source: str, say: Any) -> None:
    """What the run did and where it wrote, on stderr (stdout holds the per-frame lines a pipe
    reads, or nothing, and never a line it would take for one); then the exit code."""
    from counting.core.files import printable

    status = ("terminated" if was_terminated() else "interrupted") if counted.interrupted else "done"
    mean = f", mean count {counted.mean_count:.1f}" if counted.mean_count is not None else ""
    # An interruption is always said, the end of a run unless --quiet.
    (error_console.print if counted.interrupted else say)(
        f"[green]{status}:[/] {counted.frames} frames in {counted.seconds:.1f} s "
        f"({counted.frames_per_second:.1f} frames/s, {counted.realtime_ratio:.2f}× real time){mean}"
    )
    say_marked_frames(counted)
    # Only what was written is said written: a run stopped before its first frame left both as they were.
    for path, written, what in (
        (outputs.records, counted.records_written, "counts written to"),
        (outputs.video, counted.video_written, "annotated video written to"),
    ):
        if path is not None:
            name = escape(printable(str(path)))
            say(f"{what} {name}" if written else f"{name} {_left_as_it_was(outputs.existed[path])}", soft_wrap=True)
    if counted.interrupted:
        raise typer.Exit(EXIT_TERMINATED if was_terminated() else 130)
    stdout.finish()  # after the files: one line, exit 1, when stdout failed
    if counted.problems and strict:
        print_error(
            f"{source}: {len(counted.problems)} frame(s) could not be decoded, first at frame "
            f"{counted.problems[0].frame} (--strict stops there; without it they are skipped)"
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

    @classmethod
    def wanted(
        cls, run: VideoRunOptions, records: Path | None, video_source: Any, reading: FrameReading
    ) -> _FramesBar | None:
        """The bar, where it is shown: with a counts file taking the lines' place, on a terminal."""
        lines_are_results = records is None
        if not run.progress or run.quiet or not on_terminal(error_console):
            return None
        if lines_are_results and on_terminal(console):
            return None
        return cls(video_source, reading.stride, reading.max_frames)

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
