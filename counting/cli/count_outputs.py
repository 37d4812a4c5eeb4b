"""What `counting count` writes besides its table: ``--csv``, ``--json`` and ``--annotated``,
checked before any work, written once the pictures are counted, and kept (the rows counted so
far) when the run is interrupted."""

from __future__ import annotations

import csv as csv_module
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import typer
from rich.markup import escape

from counting.cli.common import Stdout, error_console, on_interrupt, print_skipped
from counting.core.errors import CountingError
from counting.core.files import (
    OutputError,
    atomic_write,
    atomic_write_text,
    check_new_files,
    check_writable,
    check_writable_folder,
    dumps_json,
    is_stdout,
    printable,
    reason,
    shares_stdout,
)

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

__all__ = [
    "CountOutputs",
    "CountedSoFar",
    "annotated_photo_names",
    "check_outputs",
    "interrupted_note",
    "keep_counted_rows",
    "say_diagnostics",
    "write_annotated",
    "write_result_files",
    "write_rows_csv",
    "write_rows_csv_to",
]


@dataclass(frozen=True)
class CountOutputs:
    """Where a count's results go besides the table: ``--csv`` and ``--json`` (a file, or
    stdout for "-", /dev/stdout, /dev/fd/1) and ``--annotated`` (a folder of drawn photos)."""

    csv: Path | None = None
    json_path: Path | None = None
    annotated: Path | None = None

    @property
    def files(self) -> list[Path]:
        """The CSV and JSON outputs that are files ("-": that output is the results on stdout)."""
        return [output for output in (self.csv, self.json_path) if output is not None and not is_stdout(output)]

    @property
    def on_stdout(self) -> bool:
        """True when stdout holds the CSV or the JSON document (and so nothing else)."""
        return shares_stdout(self.csv) or shares_stdout(self.json_path)


def check_outputs(outputs: CountOutputs) -> None:
    """Every output checked before any work: a bad output path must not waste it."""
    if shares_stdout(outputs.csv) and shares_stdout(outputs.json_path):  # "-", /dev/stdout, /dev/fd/1: one stream
        raise typer.BadParameter(
            f"--csv {outputs.csv} and --json {outputs.json_path} both write into stdout; send one of them to a file"
        )
    for output in outputs.files:
        check_writable(output)
    if outputs.annotated is not None:
        check_writable_folder(outputs.annotated)  # e.g. under /proc or /sys: refused now, not after the counting


def annotated_photo_names(files: Sequence[Path], outputs: CountOutputs) -> dict[str, Path]:
    """``--annotated``: each photo's file in the folder, by source, checked before any work."""
    if outputs.annotated is None:
        return {}
    from counting.apply.annotated_photos import annotated_names

    names = dict(zip(map(str, files), annotated_names(files, outputs.annotated)))
    # Never an other output's name (--json DIR/a.jpg: the JSON would be drawn over), a photo
    # being counted, or any file already there. Refused, not renamed: the names stay the
    # photos' own, which scripts map back to the photos, and a rerun into the same folder
    # does not quietly pile up a-2.jpg copies beside a.jpg (nor hide it under --quiet).
    check_new_files(list(names.values()), outputs=outputs.files, inputs=files, what="annotated photo")
    return names


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


def write_result_files(
    stdout: Stdout,
    model_name: str,
    rows: list[dict],
    messages: Sequence[str],
    outputs: CountOutputs,
    say: Callable[..., None],
) -> None:
    """``--csv`` and ``--json`` of a finished run: into ``stdout`` for "-" (its failure is said
    once the files are written), else each file whole, with a line saying where."""
    csv, json_path = outputs.csv, outputs.json_path
    if is_stdout(csv):
        stdout.write(lambda: write_rows_csv_to(sys.stdout, rows))
    elif csv is not None:
        write_rows_csv(csv, rows)
        say(f"counts written to {escape(printable(str(csv)))}")
    if json_path is not None:
        document = {"model": model_name, "images": rows, "skipped": list(messages)}
        if is_stdout(json_path):
            stdout.write(lambda: sys.stdout.write(dumps_json(document) + "\n"))
        else:
            atomic_write_text(json_path, dumps_json(document) + "\n")
            say(f"counts written to {escape(printable(str(json_path)))}")


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


def interrupted_note(
    counted: CountedSoFar,
    total: int,
    outputs: CountOutputs,
    problems: Sequence[str],
    said_outputs: Callable[[], str],
    cache: Any,
) -> str:
    """What a Ctrl-C or SIGTERM while counting says once the rows counted so far are kept
    (:func:`keep_counted_rows`), and that no photo was drawn: that happens once the counting ends."""
    kept = keep_counted_rows(counted, total, outputs.csv, outputs.json_path, problems, said_outputs, cache)
    if outputs.annotated is None:
        return kept
    return "; ".join(part for part in (kept, f"no photo was drawn into {printable(str(outputs.annotated))}") if part)


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
    written, failures = _write_kept(rows, dumps_json(document) + "\n", csv, json_path)
    counts = f"{len(rows)} of {total} pictures"
    if written:
        parts = [f"{' and '.join(written)} {'holds' if len(written) == 1 else 'hold'} {counts} (incomplete)"]
    else:
        parts = [f"{counts} were counted" + ("" if failures else "; none written (no --csv or --json)")]
    parts += failures
    if cache is not None and cache.enabled:
        parts.append("the descriptors computed so far are in the feature cache")
    return "; ".join(parts)


def _write_kept(rows: list[dict], text: str, csv: Path | None, json_path: Path | None) -> tuple[list[str], list[str]]:
    """The kept rows written to each output as a finished run writes it: into stdout for "-",
    else whole or not at all. Returns where they were written and what failed, a line each."""
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
    return written, failures


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
