"""`counting count`: counts for images, folders and globs.

The command checks its options, counts (:func:`counting.apply.pictures.count_pictures`, or the
rows of a features file) and prints the table; the files it writes (CSV, JSON, annotated photos)
and what an interrupted run keeps are in :mod:`counting.cli.count_outputs`.
"""

from __future__ import annotations

import csv as csv_module
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from agp.persistence import NPY_READ_ERRORS, npy_problem
from counting.apply.pictures import count_pictures
from counting.cli.common import (
    Stdout,
    console,
    familiarity_cell,
    folders_of,
    informational,
    load_model_option,
    named_folders,
    optional_cache,
    refuse_cache_among_pictures,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.count_outputs import (
    CountedSoFar,
    CountOutputs,
    annotated_photo_names,
    check_outputs,
    interrupted_note,
    say_diagnostics,
    write_annotated,
    write_result_files,
)
from counting.cli.multiclass_output import SHOW_THRESHOLD, class_counts_table
from counting.cli.option_groups import PictureRun, with_groups
from counting.cli.options import (
    DESCRIPTORS,
    ClassThresholdOption,
    CountingClusterOption,
    ModelOption,
    WeightsOption,
    ZoneOption,
    ZonesFileOption,
    csv_option,
    json_option,
    strict_option,
    zones_option,
)
from counting.core.columns import zone_column
from counting.core.errors import CountingError, ImageError
from counting.core.files import check_not_an_input, is_regular_file, printable
from counting.data.paths import expand_image_paths

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel, CountResult

# counting.apply.api and the model (torch, scikit-learn) are imported where the command counts:
# `counting count --help` and a refused option answer at once (scripts/bench_cli_startup.py).


def read_feature_file(path: Path) -> tuple[list[str], np.ndarray]:
    """Descriptors written by `counting features`: .npy (n, D) / (n, cells, D), or .csv with a
    filename column followed by the feature columns."""
    if not path.exists():
        raise CountingError(f"{path}: features file not found")
    if not is_regular_file(path):
        raise CountingError(f"{path}: not a regular file (a folder, device or pipe), not a features file")
    try:
        if path.suffix.lower() == ".npy":
            # Mapped, not read: rows are read FEATURE_CHUNK at a time when counted (predict_rows),
            # so a huge (or sparse) file never sits in memory whole.
            try:
                array = np.load(path, allow_pickle=False, mmap_mode="r")
            except NPY_READ_ERRORS as error:
                raise ValueError(f"not a readable .npy array: {npy_problem(error)}") from None
            if array.ndim not in (2, 3) or array.dtype.kind not in "fiu":
                raise ValueError(
                    f"expected an (n, D) or (n, cells, D) array of numbers, found {array.dtype} {array.shape}"
                )
            return [f"{path.name}[{k}]" for k in range(len(array))], array
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv_module.reader(handle))
        header, body = rows[0], rows[1:]
        first_is_name = not _is_number(header[0]) and body and not _is_number(body[0][0])
        names = [row[0] for row in body] if first_is_name else [f"{path.name}[{k}]" for k in range(len(body))]
        values = np.array([row[1:] if first_is_name else row for row in body], dtype=float)
        return names, values
    except PermissionError:
        raise CountingError(f"{path}: permission denied") from None
    except (ValueError, OSError, IndexError) as error:
        raise CountingError(f"{path}: not a features file ({str(error).splitlines()[0]})") from None


# More rows than this are printed as plain tab-separated lines, one at a time: a rich table holds
# and lays out every row before printing (300 000 rows took 0.7 GB).
TABLE_ROWS = 2000


def print_plain_rows(rows: list[dict]) -> None:
    """The records as tab-separated lines under a header line (names as in the CSV)."""
    import sys

    columns = list(rows[0])
    out = sys.stdout
    out.write("\t".join(columns) + "\n")
    for row in rows:
        out.write("\t".join(_plain_cell(c, row[c]) for c in columns) + "\n")
    out.flush()


def _plain_cell(column: str, value: Any) -> str:
    if column == "image":
        return printable(value)
    if value is None:  # an unknown familiarity (a model file without one)
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):  # counted_by: a route's name
        return printable(value)
    return f"{value:.3f}" if column == "familiarity" else f"{value:.2f}"


# Rows of a features file counted at once: memory stays flat in the file's length.
FEATURE_CHUNK = 4096


def predict_rows(model: CountingModel, array: np.ndarray, source: str) -> np.ndarray:
    """``model.predict_features`` of ``array`` (possibly a memory map) FEATURE_CHUNK rows at a
    time; each chunk is read, predicted and dropped, and its mapped pages are released."""
    return predict_scored_rows(model, array, source)[0]


def predict_scored_rows(model: CountingModel, array: np.ndarray, source: str) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`predict_rows` and, from the same chunks, the rows' familiarity: a descriptor
    model's probe is its rows (None without a section, or for a density head's sums)."""
    section = model.familiarity
    scored = section is not None and section.probe == "descriptor"
    parts, familiarity = [], []
    for start in range(0, len(array), FEATURE_CHUNK):
        rows = np.array(array[start : start + FEATURE_CHUNK], dtype=float)
        parts.append(model.predict_features(rows, source=source))
        if scored:
            familiarity.append(model.familiarity_scores(rows))
        if isinstance(array, np.memmap):
            _release(array, start, len(rows))
    return np.concatenate(parts), np.concatenate(familiarity) if scored else None


def _release(array: np.memmap, start: int, count: int) -> None:
    """Tell the kernel the mapped pages of rows ``start:start+count`` are not needed again (their
    resident size would otherwise grow to the whole file's on a sparse or huge file)."""
    import mmap

    base = array.base
    if not isinstance(base, mmap.mmap) or not hasattr(base, "madvise"):
        return
    row_bytes = array.itemsize * int(np.prod(array.shape[1:]))
    # np.memmap maps from the allocation boundary below the file offset of the data.
    offset = array.offset % mmap.ALLOCATIONGRANULARITY + start * row_bytes
    page = mmap.PAGESIZE
    begin = offset // page * page
    try:
        base.madvise(mmap.MADV_DONTNEED, begin, offset + count * row_bytes - begin)
    except (OSError, ValueError):
        pass


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def display_path(source: str) -> str:
    """Relative to the working folder when inside it (shorter table rows), else as given."""
    try:
        shown = str(Path(source).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        shown = source
    return escape(printable(shown))  # a table cell is markup: a name like "[/b]x.jpg" stays text


def counts_table(
    model: CountingModel, rows: list[dict], class_threshold: float = SHOW_THRESHOLD, zones: Sequence[Any] = ()
) -> Table:
    if model.class_names:
        return class_counts_table(model, rows, display_path, class_threshold)
    level = f" ({model.interval.level:.0%} interval)" if model.interval is not None else ""
    table = Table(title=f"Counts by {escape(printable(model.name))}{level}", title_justify="left")
    table.add_column("image", overflow="fold")
    table.add_column("count", justify="right")
    if rows and "low" in rows[0]:
        table.add_column("low", justify="right")
        table.add_column("high", justify="right")
    for zone in zones:  # a zone's count with its interval in one cell: the table stays narrow
        table.add_column(escape(zone_column("count", zone.name)), justify="right")
    table.add_column("familiarity", justify="right")
    for row in rows:
        count = f"{row['count']:.1f}"
        # The count itself is marked: it is what the reader takes away (sparse_gate, "Disputed counts").
        cells = [display_path(row["image"]), f"[bold red]{count} disputed[/]" if row.get("disputed") else count]
        if "low" in row:
            cells += [f"{row['low']:.1f}", f"{row['high']:.1f}"]
        cells += [zone_cell(row, zone.name) for zone in zones]
        table.add_row(*cells, familiarity_cell(row))
    return table


def zone_cell(row: dict, name: str) -> str:
    """``12.3 [10.1-14.6]``: a zone's count beside its interval when the model has one."""
    text = f"{row[zone_column('count', name)]:.1f}"
    if zone_column("low", name) in row:
        text += f" [{row[zone_column('low', name)]:.1f}-{row[zone_column('high', name)]:.1f}]"
    return text


# count's own options (the ones several commands share are in counting/cli/options.py).
ImagesArgument = Annotated[
    Optional[list[str]],
    typer.Argument(
        help="Images, folders of images or glob patterns ('frames/*.jpg').", show_default=False, metavar="IMAGES"
    ),
]
CountCsvOption = Annotated[Optional[Path], csv_option("Write one row per image (count, interval) to this CSV file.")]
CountJsonOption = Annotated[Optional[Path], json_option("Write the rows and the skipped images as JSON to this file.")]
FeaturesFileOption = Annotated[
    Optional[Path],
    typer.Option(
        "--features",
        metavar="FILE",
        help="Count precomputed descriptors (.npy or .csv from `counting features -m MODEL`, which records "
        "the settings they were made with) instead of images.",
        show_default=False,
        rich_help_panel=DESCRIPTORS,
    ),
]
CountStrictOption = Annotated[
    bool,
    strict_option(
        "Make an image that cannot be read an error (exit 1): a missing one stops the command before the "
        "model loads; one that cannot be decoded, once the others are counted and written. Without it such "
        "images are skipped with a line on stderr."
    ),
]
AnnotatedPhotosOption = Annotated[
    Optional[Path],
    typer.Option(
        "--annotated",
        help="Write each photo into this folder with what the model saw drawn on it: a detector "
        "model's boxes (coloured by class), a density model's heat map (red at the photo's densest cell) and "
        "zones; the counts in the corner. Files already in the folder are never replaced (refused before any work).",
        show_default=False,
        metavar="DIR",
    ),
]


@dataclass(frozen=True)
class CountSettings:
    """One run's settings once its options are checked: what the steps of :func:`count` read
    beside the model."""

    run: PictureRun
    cache: Any  # the feature cache, or None
    outputs: CountOutputs
    zones: Sequence[Any]
    weights: Path | None
    cluster: str | None
    show_above: float | None
    said_outputs: Callable[[], str]  # what an interrupted run says of the outputs


@with_groups
def count(
    paths: ImagesArgument = None,
    model: ModelOption = None,
    csv: CountCsvOption = None,
    json_path: CountJsonOption = None,
    features: FeaturesFileOption = None,
    weights: WeightsOption = None,
    zones_file: ZonesFileOption = None,
    zone: ZoneOption = None,
    show_above: ClassThresholdOption = None,
    run: PictureRun = PictureRun(),
    cluster: CountingClusterOption = None,
    strict: CountStrictOption = False,
    annotated: AnnotatedPhotosOption = None,
) -> None:
    """Count objects in images: a table on stdout, optionally CSV / JSON (one row per image).

    Unreadable images are skipped with a line on stderr; the rest are counted (--strict: exit 1).
    """
    use_runtime(run.runtime, run.threads)
    cache = optional_cache(run.cache_dir, not run.no_cache)
    outputs = CountOutputs(csv, json_path, annotated)
    check_outputs(outputs)
    # the images are checked once expanded (check_picture_outputs): globs and folders name them only then
    refuse_outputs_on_inputs(outputs.files, inputs=[features, weights, zones_file], model=model, cache=cache)
    zones = zones_option(zones_file, zone)  # a bad zone fails before the model loads
    settings = CountSettings(
        run=run,
        cache=cache,
        outputs=outputs,
        zones=zones,
        weights=weights,
        cluster=cluster,
        show_above=show_above,
        said_outputs=say_outputs_on_interrupt(outputs.files, cache),
    )
    files, problems = ([], []) if features is not None else pictures_named(paths, strict)
    counting_model = load_model_option(model)
    refuse_what_cannot_be_done(counting_model, settings, features, paths, model)
    drawn_names: dict[str, Path] = {}  # --annotated: each photo's file, checked before any work
    if features is not None:
        result, zone_records = count_features_file(counting_model, features), None
    else:
        drawn_names = check_picture_outputs(files, paths, settings)
        result, zone_records = count_picture_files(counting_model, files, problems, settings)
    from counting.apply.api import count_rows

    rows = count_rows(counting_model, result, zone_records)
    messages = problems + list(result.errors.values())
    say_skipped_pictures(rows, messages, result.sources)
    publish_results(counting_model, rows, messages, settings, drawn_names)
    if strict and messages:  # said above, a line each; the others' counts are written
        raise ImageError(f"{len(messages)} of {len(result.sources)} images could not be read (--strict)")


def pictures_named(paths: Sequence[str] | None, strict: bool) -> tuple[list[Path], list[str]]:
    """The pictures the arguments name, and a line for each that cannot be found: expanded
    before the model loads (seconds), so a mistyped path is said at once."""
    if not paths:
        raise ImageError("no images given: pass image files, folders or glob patterns")
    files, problems = expand_image_paths(paths)
    if strict and problems:
        raise ImageError(f"{problems[0]} (--strict)")
    return files, problems


def refuse_what_cannot_be_done(
    counting_model: CountingModel,
    settings: CountSettings,
    features: Path | None,
    paths: Sequence[str] | None,
    model: Path | None,
) -> None:
    """The options this model, or a features file, cannot honour: one line, before any picture is read."""
    annotated = settings.outputs.annotated
    if annotated is not None:
        from counting.apply.annotated_photos import check_annotated_model

        check_annotated_model(counting_model)
        if features is not None:
            raise typer.BadParameter("--annotated draws on the photos; it does not take --features")
        refuse_outputs_on_inputs([annotated], inputs=[settings.weights], model=model, cache=settings.cache)
    if settings.show_above is not None and not counting_model.class_names:
        # Was silently ignored: the user believed the table was filtered.
        raise CountingError(
            f"{counting_model.name}: --show-above applies to per-class models; this model gives one count per image"
        )
    if settings.zones:
        from counting.apply.zones import check_localises

        check_localises(counting_model)
        if features is not None:
            raise CountingError(
                f"{features}: zones are counted from the pictures' density maps; descriptors cannot be split by zone"
            )
    if features is not None and paths:
        raise typer.BadParameter(f"--features {features} counts the descriptors of a file; leave out the images")
    if features is not None and settings.cluster is not None:  # was dropped in silence: counted here
        raise typer.BadParameter(
            f"--cluster {settings.cluster} counts pictures on its workers; a features file is counted here: "
            "leave out --cluster"
        )


def count_features_file(counting_model: CountingModel, features: Path) -> CountResult:
    """The counts of a features file's rows, once the file is known to hold what the model
    reads from pictures (its record); a row of NaN (a picture that failed) is a skipped one."""
    sources, array = read_feature_file(features)
    if len(array) == 0:
        raise CountingError(f"{features}: the features file holds no rows")
    if counting_model.sparse_gate is not None:
        counting_model.check_features(array, str(features))  # a file of another size: that first
        # Counted from its rows alone, a sparse photo got the heads' hundreds, without a word.
        raise CountingError(
            f"{features}: {counting_model.name} hands sparse pictures to its person detector, which reads "
            "the pictures themselves; count the pictures, not a features file"
        )
    # Rows made at another size, without the model's ROI mask or flip were counted in silence
    # (Mall: 4-7 people more than the pictures): the file's record must match the model's.
    from counting.cli.features import check_features_record

    counting_model.check_features(array[:1], str(features))  # a file of another size: that first
    check_features_record(counting_model, features, len(array))
    counts, familiarity = predict_scored_rows(counting_model, array, str(features))
    low, high = counting_model.intervals(counts)
    ok = np.isfinite(counts if counts.ndim == 1 else counts.sum(axis=1))
    if not ok.any():
        raise CountingError(f"{features}: every row holds NaN or infinite values (images that failed to load)")
    errors = {
        sources[k]: f"{sources[k]}: NaN or infinite features (an image that failed to load)"
        for k in np.flatnonzero(~ok)
    }
    from counting.model.counting_model import CountResult

    return CountResult(sources, counts, low, high, ok, errors, familiarity=familiarity)


def check_picture_outputs(files: list[Path], paths: Sequence[str], settings: CountSettings) -> dict[str, Path]:
    """The checks that need the pictures' names, before any is counted: the cache is not among
    them, no output is one of them, no annotated photo takes a name already used. Returns each
    photo's annotated file, by source."""
    refuse_cache_among_pictures(settings.run.cache_dir, settings.cache, named_folders(paths), folders_of(files))
    for output in settings.outputs.files:
        check_not_an_input(output, files)
    return annotated_photo_names(files, settings.outputs)


def count_picture_files(
    counting_model: CountingModel, files: list[Path], problems: Sequence[str], settings: CountSettings
) -> tuple[Any, dict | None]:
    """``(CountResult, zone records or None)`` of the pictures; a Ctrl-C or SIGTERM (exit 130 /
    143 as before) keeps the rows counted so far and says where (:func:`interrupted_note`)."""
    from counting.cli.run_estimate import RunEstimate

    run = settings.run
    counted = CountedSoFar(counting_model)
    # A large folder says how long it will take (a small picture costs a whole pass): on stderr.
    estimate = RunEstimate(len(files), informational(run.quiet, on_stderr=True))
    try:
        return count_pictures(
            counting_model,
            files,
            zones=settings.zones or (),
            cluster=settings.cluster,
            cache=settings.cache,
            weights=settings.weights,
            batch_size=run.batch_size,
            progress=run.shows_progress,
            on_part=estimate.wrap(counted.add),
        )
    except KeyboardInterrupt:
        note = interrupted_note(counted, len(files), settings.outputs, problems, settings.said_outputs, settings.cache)
        raise KeyboardInterrupt(note) from None


def say_skipped_pictures(rows: list[dict], messages: list[str], sources: Sequence[str]) -> None:
    """Say the skipped pictures and the run's warnings; a run that counted nothing is an error
    (one picture, one problem: the error line says which)."""
    if not rows and len(messages) == 1:
        raise ImageError(messages[0])
    say_diagnostics(messages, rows)
    if not rows:
        only = sources[0] if len(sources) == 1 else None
        raise ImageError(f"{printable(only) if only else 'all images'}: nothing could be counted")


def publish_results(
    counting_model: CountingModel,
    rows: list[dict],
    messages: list[str],
    settings: CountSettings,
    drawn_names: dict[str, Path],
) -> None:
    """The results on stdout, in ``--csv`` and ``--json``, and the annotated photos. Results on
    stdout go through ``stdout``: when it fails (a full disk, a closed pipe) the files asked for
    are still written, and the failure is said once they are."""
    stdout = Stdout()
    say = print_results(stdout, counting_model, rows, settings)
    write_result_files(stdout, counting_model.name, rows, messages, settings.outputs, say)
    if settings.outputs.annotated is not None:
        write_annotated(
            counting_model,
            rows,
            settings.outputs.annotated,
            settings.zones,
            drawn_names,
            settings.said_outputs,
            say,
            settings.show_above,
        )
    stdout.finish()


def print_results(
    stdout: Stdout, counting_model: CountingModel, rows: list[dict], settings: CountSettings
) -> Callable[..., None]:
    """The table on ``stdout`` (plain lines past TABLE_ROWS rows; nothing when stdout holds the
    CSV or JSON document), and how the informational lines are said beside it: on stdout beside
    a table, else on stderr, so that stdout holds only what a pipe reads."""
    quiet = settings.run.quiet
    if settings.outputs.on_stdout:
        # stdout holds only the CSV or JSON document ("-" or /dev/stdout alike): a table before it
        # made `--json /dev/stdout > out.json` invalid JSON.
        return informational(quiet, on_stderr=True)
    if len(rows) > TABLE_ROWS:
        stdout.write(lambda: print_plain_rows(rows))
        return informational(quiet, on_stderr=True)
    threshold = SHOW_THRESHOLD if settings.show_above is None else settings.show_above
    stdout.write(lambda: console.print(counts_table(counting_model, rows, threshold, settings.zones)))
    return stdout.printer(informational(quiet))  # its lines are on stdout, beside the table
