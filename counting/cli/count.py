"""`counting count`: counts for images, folders and globs."""

from __future__ import annotations

import csv as csv_module
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TextIO

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from agp.persistence import NPY_READ_ERRORS, npy_problem
from counting.apply.pictures import count_pictures
from counting.cli.common import (
    Stdout,
    console,
    error_console,
    familiarity_cell,
    folders_of,
    informational,
    load_model_option,
    named_folders,
    on_interrupt,
    optional_cache,
    print_skipped,
    refuse_cache_among_pictures,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
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
from counting.core.files import (
    OutputError,
    atomic_write,
    atomic_write_text,
    check_new_files,
    check_not_an_input,
    check_writable,
    check_writable_folder,
    dumps_json,
    is_regular_file,
    is_stdout,
    printable,
    reason,
    shares_stdout,
)
from counting.data.paths import expand_image_paths

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

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


def write_rows_csv(path: Path, rows: list[dict]) -> None:
    with atomic_write(path, newline="") as handle:
        write_rows_csv_to(handle, rows)


def write_rows_csv_to(handle: TextIO, rows: list[dict]) -> None:
    """The rows as CSV (3 decimals) to an open text stream: a file, or stdout for ``--csv -``."""
    fields = list(rows[0]) if rows else ["image", "count"]
    writer = csv_module.DictWriter(handle, fieldnames=fields)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in row.items()})


@with_groups
def count(
    paths: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="Images, folders of images or glob patterns ('frames/*.jpg').", show_default=False, metavar="IMAGES"
        ),
    ] = None,
    model: ModelOption = None,
    csv: Annotated[Optional[Path], csv_option("Write one row per image (count, interval) to this CSV file.")] = None,
    json_path: Annotated[
        Optional[Path], json_option("Write the rows and the skipped images as JSON to this file.")
    ] = None,
    features: Annotated[
        Optional[Path],
        typer.Option(
            "--features",
            metavar="FILE",
            help="Count precomputed descriptors (.npy or .csv from `counting features -m MODEL`, which records "
            "the settings they were made with) instead of images.",
            show_default=False,
            rich_help_panel=DESCRIPTORS,
        ),
    ] = None,
    weights: WeightsOption = None,
    zones_file: ZonesFileOption = None,
    zone: ZoneOption = None,
    show_above: ClassThresholdOption = None,
    run: PictureRun = PictureRun(),
    cluster: CountingClusterOption = None,
    strict: Annotated[
        bool,
        strict_option(
            "Make an image that cannot be read an error (exit 1): a missing one stops the command before the "
            "model loads; one that cannot be decoded, once the others are counted and written. Without it such "
            "images are skipped with a line on stderr."
        ),
    ] = False,
    annotated: Annotated[
        Optional[Path],
        typer.Option(
            "--annotated",
            help="Write each photo into this folder with what the model saw drawn on it: a detector "
            "model's boxes (coloured by class), a density model's heat map (red at the photo's densest cell) and "
            "zones; the counts in the corner. Files already in the folder are never replaced (refused before any work).",
            show_default=False,
            metavar="DIR",
        ),
    ] = None,
) -> None:
    """Count objects in images: a table on stdout, optionally CSV / JSON (one row per image).

    Unreadable images are skipped with a line on stderr; the rest are counted (--strict: exit 1).
    """
    use_runtime(run.runtime, run.threads)
    say = informational(run.quiet)
    cache = optional_cache(run.cache_dir, not run.no_cache)
    if shares_stdout(csv) and shares_stdout(json_path):  # "-", /dev/stdout, /dev/fd/1: one stream
        raise typer.BadParameter(
            f"--csv {csv} and --json {json_path} both write into stdout; send one of them to a file"
        )
    # "-": that output is the results on stdout (no table); the others are files, checked now.
    outputs = [output for output in (csv, json_path) if output is not None and not is_stdout(output)]
    for output in outputs:
        check_writable(output)  # before any work: a bad output path must not waste it
    if annotated is not None:
        check_writable_folder(annotated)  # e.g. under /proc or /sys: refused now, not after the counting
    # the images are checked once expanded (below): globs and folders name them only then
    refuse_outputs_on_inputs(outputs, inputs=[features, weights, zones_file], model=model, cache=cache)
    zones = zones_option(zones_file, zone)  # a bad zone fails before the model loads
    said_outputs = say_outputs_on_interrupt(outputs, cache)
    files: list[Path] = []
    problems: list[str] = []
    if features is None:
        if not paths:
            raise ImageError("no images given: pass image files, folders or glob patterns")
        # Expanded before the model loads (seconds): a mistyped path is said at once.
        files, problems = expand_image_paths(paths)
        if strict and problems:
            raise ImageError(f"{problems[0]} (--strict)")
    counting_model = load_model_option(model)
    if annotated is not None:
        from counting.apply.annotated_photos import check_annotated_model

        check_annotated_model(counting_model)
        if features is not None:
            raise typer.BadParameter("--annotated draws on the photos; it does not take --features")
        refuse_outputs_on_inputs([annotated], inputs=[weights], model=model, cache=cache)
    if show_above is not None and not counting_model.class_names:
        # Was silently ignored: the user believed the table was filtered.
        raise CountingError(
            f"{counting_model.name}: --show-above applies to per-class models; this model gives one count per image"
        )
    if zones:
        from counting.apply.zones import check_localises

        check_localises(counting_model)
        if features is not None:
            raise CountingError(
                f"{features}: zones are counted from the pictures' density maps; descriptors cannot be split by zone"
            )
    zone_records = None
    drawn_names: dict[str, Path] = {}  # --annotated: each photo's file, checked before any work
    if features is not None and paths:
        raise typer.BadParameter(f"--features {features} counts the descriptors of a file; leave out the images")
    if features is not None and cluster is not None:  # was dropped in silence: counted here
        raise typer.BadParameter(
            f"--cluster {cluster} counts pictures on its workers; a features file is counted here: leave out --cluster"
        )
    if features is not None:
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

        result = CountResult(sources, counts, low, high, ok, errors, familiarity=familiarity)
    else:
        refuse_cache_among_pictures(run.cache_dir, cache, named_folders(paths), folders_of(files))
        for output in outputs:
            check_not_an_input(output, files)
        if annotated is not None:
            from counting.apply.annotated_photos import annotated_names

            drawn_names = dict(zip(map(str, files), annotated_names(files, annotated)))
            # Never an other output's name (--json DIR/a.jpg: the JSON would be drawn over), a photo
            # being counted, or any file already there. Refused, not renamed: the names stay the
            # photos' own, which scripts map back to the photos, and a rerun into the same folder
            # does not quietly pile up a-2.jpg copies beside a.jpg (nor hide it under --quiet).
            check_new_files(list(drawn_names.values()), outputs=outputs, inputs=files, what="annotated photo")
        counted = CountedSoFar(counting_model)
        from counting.cli.run_estimate import RunEstimate

        # A large folder says how long it will take (a small picture costs a whole pass): on stderr.
        estimate = RunEstimate(len(files), informational(run.quiet, on_stderr=True))
        try:
            result, zone_records = count_pictures(
                counting_model,
                files,
                zones=zones or (),
                cluster=cluster,
                cache=cache,
                weights=weights,
                batch_size=run.batch_size,
                progress=run.shows_progress,
                on_part=estimate.wrap(counted.add),
            )
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM (exit 130 / 143 as before): the rows counted so far are kept.
            kept = keep_counted_rows(counted, len(files), csv, json_path, problems, said_outputs, cache)
            if annotated is not None:  # the photos are drawn once the counting ends: say so
                kept = "; ".join(
                    part for part in (kept, f"no photo was drawn into {printable(str(annotated))}") if part
                )
            raise KeyboardInterrupt(kept) from None
    from counting.apply.api import count_rows

    rows = count_rows(counting_model, result, zone_records)
    messages = problems + list(result.errors.values())
    if not rows and len(messages) == 1:
        raise ImageError(messages[0])  # one image, one problem: the error line says which
    say_diagnostics(messages, rows)
    if not rows:
        only = result.sources[0] if len(result.sources) == 1 else None
        raise ImageError(f"{printable(only) if only else 'all images'}: nothing could be counted")
    # Results on stdout go through `stdout`: when it fails (a full disk, a closed pipe) the files
    # asked for are still written, and the failure is said once they are.
    stdout = Stdout()
    if shares_stdout(csv) or shares_stdout(json_path):
        # stdout holds only the CSV or JSON document ("-" or /dev/stdout alike): a table before it
        # made `--json /dev/stdout > out.json` invalid JSON.
        say = informational(run.quiet, on_stderr=True)
    elif len(rows) > TABLE_ROWS:
        stdout.write(lambda: print_plain_rows(rows))
        say = informational(run.quiet, on_stderr=True)  # stdout holds only the plain lines a pipe reads
    else:
        threshold = SHOW_THRESHOLD if show_above is None else show_above
        stdout.write(lambda: console.print(counts_table(counting_model, rows, threshold, zones)))
        say = stdout.printer(say)  # its lines are on stdout, beside the table
    if is_stdout(csv):
        stdout.write(lambda: write_rows_csv_to(sys.stdout, rows))
    elif csv is not None:
        write_rows_csv(csv, rows)
        say(f"counts written to {escape(printable(str(csv)))}")
    if json_path is not None:
        document = {"model": counting_model.name, "images": rows, "skipped": messages}
        if is_stdout(json_path):
            stdout.write(lambda: sys.stdout.write(dumps_json(document) + "\n"))
        else:
            atomic_write_text(json_path, dumps_json(document) + "\n")
            say(f"counts written to {escape(printable(str(json_path)))}")
    if annotated is not None:
        write_annotated(counting_model, rows, annotated, zones, drawn_names, said_outputs, say, show_above)
    stdout.finish()
    if strict and messages:  # said above, a line each; the others' counts are written
        raise ImageError(f"{len(messages)} of {len(result.sources)} images could not be read (--strict)")


def say_diagnostics(messages: Sequence[str], rows: Sequence[dict]) -> None:
    """The skipped pictures, a line each, and the run's familiarity and disputed warnings: on
    stderr, the table alone on stdout."""
    from counting.apply.api import disputed_warning, familiarity_warning

    for message in messages:
        print_skipped(message)
    for warning in (familiarity_warning(rows), disputed_warning(rows)):
        if warning is not None:  # one line for the run, whatever the number of pictures
            error_console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)


class CountedSoFar:
    """The parts of a run counted so far, each with its zone records (``on_part`` of
    :func:`counting.apply.pictures.count_pictures`): what an interrupted run keeps."""

    def __init__(self, model: CountingModel) -> None:
        self.model = model
        self.parts: list[tuple[Any, dict | None]] = []

    def add(self, result: Any, zone_records: dict | None) -> None:
        self.parts.append((result, zone_records))

    def rows(self) -> list[dict]:
        from counting.apply.api import count_rows

        return [row for result, records in self.parts for row in count_rows(self.model, result, records)]

    def skipped(self) -> list[str]:
        return [message for result, _ in self.parts for message in result.errors.values()]


def keep_counted_rows(
    counted: CountedSoFar,
    total: int,
    csv: Path | None,
    json_path: Path | None,
    problems: Sequence[str],
    said_outputs: Callable[[], str],
    cache: Any,
) -> str:
    """At a Ctrl-C or SIGTERM while counting: the rows counted so far written to ``--csv`` and
    ``--json`` (each a whole, valid file of those rows, written as a finished run writes it;
    the JSON says it is incomplete), the skipped pictures said, and the note that says how many
    of the ``total`` pictures each file holds. With no row counted every file is left as it was
    (``said_outputs``: unchanged, or not created)."""
    rows = counted.rows()
    if not rows:
        return said_outputs()
    messages = [*problems, *counted.skipped()]
    say_diagnostics(messages, rows)
    document = {
        "model": counted.model.name,
        "images": rows,
        "skipped": messages,
        "incomplete": {"counted": len(rows), "pictures": total},
    }
    text = dumps_json(document) + "\n"
    # Each output as a finished run writes it: into stdout for "-", else whole or not at all.
    writers = (
        (csv, lambda handle: write_rows_csv_to(handle, rows), lambda path: write_rows_csv(path, rows)),
        (json_path, lambda handle: handle.write(text), lambda path: atomic_write_text(path, text)),
    )
    written, failures = [], []
    for output, to_stream, to_file in writers:
        if output is None:
            continue
        try:
            if is_stdout(output):
                to_stream(sys.stdout)
                sys.stdout.flush()
            else:
                to_file(output)
            written.append("stdout" if is_stdout(output) else printable(str(output)))
        except OSError as error:  # an OutputError names its file; stdout's own failure does not
            failures.append(
                str(error) if isinstance(error, CountingError) else f"stdout: cannot write ({reason(error)})"
            )
    counts = f"{len(rows)} of {total} pictures"
    if written:
        parts = [f"{' and '.join(written)} {'holds' if len(written) == 1 else 'hold'} {counts} (incomplete)"]
    else:
        parts = [f"{counts} were counted" + ("" if failures else "; none written (no --csv or --json)")]
    parts += failures
    if cache is not None and cache.enabled:
        parts.append("the descriptors computed so far are in the feature cache")
    return "; ".join(parts)


def write_annotated(
    model: CountingModel,
    rows: list[dict],
    folder: Path,
    zones: Sequence[Any],
    names: dict[str, Path],
    said_outputs: Callable[[], str],
    say: Callable[..., None],
    show_above: float | None = None,
) -> None:
    """``--annotated``: every counted photo drawn into ``folder`` under its checked name
    (``names``, by source). A Ctrl-C or a failed write says how many were written; a photo
    that cannot be read again is skipped with one line."""
    from counting.apply.annotated_photos import annotated_names, write_annotated_photos

    shown = escape(printable(str(folder)))
    targets = [names.get(row["image"]) or annotated_names([row["image"]], folder)[0] for row in rows]
    written: list[Path] = []

    def progress() -> str:
        return f"{len(written)} of {len(rows)} annotated photos written to {printable(str(folder))}"

    # The latest note is the one said: the outputs' (written before this phase) and the photos'.
    on_interrupt(lambda: "; ".join(part for part in (said_outputs(), progress()) if part))
    try:
        write_annotated_photos(
            model, rows, folder, zones, targets=targets, written=written, skip=print_skipped, show_above=show_above
        )
    except OutputError as error:
        raise OutputError(f"{error}; {progress()}") from None
    if len(written) == len(rows):
        say(f"{len(written)} annotated photos written to {shown}")
    else:
        say(f"{escape(progress())}")
