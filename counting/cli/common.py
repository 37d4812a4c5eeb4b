"""Shared pieces of the CLI commands: consoles, the red error line, datasets, models and caches."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

# Re-exported: the commands take both from here with the rest of their shared pieces.
from counting.cli.diagnostics import error_console as error_console
from counting.cli.diagnostics import print_warning as print_warning
from counting.core import defaults
from counting.core.terminal import on_terminal

if TYPE_CHECKING:
    # Types only: option_groups reads the option declarations, which import torch and
    # scikit-learn registries; `counting --help` imports this module.
    from counting.cli.option_groups import EvaluationSplit, PictureRun
    from counting.model.counting_model import CountingModel


# Widest a table gets in a file: a cell longer than this (a path of thousands of characters) still folds.
_FILE_WIDTH = 4096


class _ResultsConsole(Console):
    """The console of stdout. A failed write (a full disk, a closed pipe) reaches the command as
    the OSError (:class:`Stdout` keeps going and writes the files asked for): rich would end the
    process at once on a closed pipe (SystemExit 1) with no file written, and keep the unwritten
    text to print again before the next line."""

    def _check_buffer(self) -> None:
        try:
            super()._check_buffer()
        except OSError:
            del self._buffer[:]
            raise

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    def print(self, *objects: Any, **kwargs: Any) -> None:
        # A table wider than the terminal keeps its numbers whole (rich would cut them to "117.…"):
        # its paths fold narrower, or its rows print as records (cli/table_fit.py). Every table
        # on stdout passes here, so a new command's table cannot forget it.
        from rich.table import Table

        from counting.cli.table_fit import fit_table

        super().print(*(fit_table(self, item) if isinstance(item, Table) else item for item in objects), **kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        # Where stdout is a file or a pipe, rich lays tables out at 80 columns (or a terminal's
        # width on stderr), which squeezed a count to "117.…" and folded every path of a log or
        # a redirected table. There a table is as wide as its cells (tables never expand): whole
        # numbers, one row a line. $COLUMNS still sets the width, as rich's users expect.
        # The file is asked, not rich's is_terminal: FORCE_COLOR=1 (or TTY_COMPATIBLE=1) makes rich
        # call a file a terminal for its colours, and its width then fell back to 80 columns.
        dimensions = super().size
        if on_terminal(self) or self._width is not None or self._environ.get("COLUMNS", "").isdecimal():
            return dimensions
        return ConsoleDimensions(max(dimensions.width, _FILE_WIDTH), dimensions.height)


# A $COLUMNS that is not a positive whole number was set aside by cli/diagnostics.py, imported
# above, before either console reads it.
# Paths stay whole (copy-pasteable); no :emoji: codes, so a file named "a:smile:.jpg" shows as named.
# Results are soft-wrapped like the diagnostics (cli/diagnostics.py): one line is one line in a log file.
console = _ResultsConsole(highlight=False, soft_wrap=True, emoji=False)


def short_note(note: str, width: int) -> tuple[str, bool]:
    """``(cell, cut)``: a failed row's reason in its table cell, as markup-safe text, cut to
    ``width`` characters with "…" where it is longer (``cut``: the compare tables' caption then
    gives it whole)."""
    cut = len(note) > width
    return escape(note[: width - 1] + "…" if cut else note), cut


def print_error(message: str) -> None:
    """The one red line a user sees for a bad input (never wrapped, never a traceback)."""
    from counting.core.files import printable

    first_line = str(message).strip().splitlines()[0] if str(message).strip() else "error"
    first_line = printable(first_line)
    error_console.print(f"[bold red]error:[/] {escape(first_line)}", soft_wrap=True)


# What the running command kept so far, said on Ctrl-C by the error boundary (cli/app.py).
_interrupt_notes: list[Callable[[], str]] = []


def on_interrupt(describe: Callable[[], str]) -> None:
    """Have a Ctrl-C of this command say ``describe()`` (what it kept) after "interrupted:"."""
    _interrupt_notes.append(describe)


def say_outputs_on_interrupt(outputs: Sequence[Path | None], cache: Any = None) -> Callable[[], str]:
    """Have a Ctrl-C or SIGTERM say, for each output, whether it was written, left unchanged
    or not created (the writers are atomic: whole files or nothing), and what the cache kept.
    Returns the note, for a command that later registers a longer one (:func:`on_interrupt`)."""

    def state(path: Path) -> tuple[int, int] | None:
        try:
            info = os.stat(path)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_ino

    before = {path: state(path) for path in outputs if path is not None}

    def describe() -> str:
        parts = []
        for path, was in before.items():
            now = state(path)
            if now != was and now is not None:
                parts.append(f"{path} written")
            else:
                parts.append(f"{path} {'is unchanged' if was is not None else 'was not created'}")
        if cache is not None and getattr(cache, "enabled", False):
            parts.append("the descriptors computed so far are in the feature cache")
        return "; ".join(parts)

    on_interrupt(describe)
    return describe


def forget_interrupt_notes() -> None:
    """Drop the notes of an earlier command in this process without running them (running one
    would look at that command's cache and outputs, and could warn about them again)."""
    _interrupt_notes.clear()


def interrupt_note() -> str:
    """The latest command's note for a Ctrl-C ("" when it registered none); clears them all."""
    notes = list(_interrupt_notes)
    _interrupt_notes.clear()
    return notes[-1]() if notes else ""


class Stdout:
    """A command's results on stdout, written through :meth:`write`, which keeps going when
    stdout fails (a full disk behind ``> file``, a reader that closed the pipe): the files the
    command was asked for are still written, and :meth:`finish`, called after them, ends the
    command with one line. Without it the first failed print ended the command with a
    traceback before any file was written."""

    def __init__(self) -> None:
        self.error: OSError | None = None

    def write(self, action: Callable[[], object]) -> None:
        """Run ``action`` (prints to stdout) and flush stdout, unless stdout already failed."""
        if self.error is not None:
            return
        try:
            action()
            sys.stdout.flush()  # a failure shows here, not at exit where nothing can report it
        except OSError as error:
            from counting.core.errors import CountingError

            if isinstance(error, CountingError):  # an output file's own error, not stdout's
                raise
            self.error = error
            _silence_stdout()

    def printer(self, print_line: Callable[..., None]) -> Callable[..., None]:
        """``print_line`` (a console's print on stdout) through :meth:`write`."""
        return lambda *args, **kwargs: self.write(lambda: print_line(*args, **kwargs))

    def finish(self) -> None:
        """Exit 1 when stdout failed: quietly for a closed pipe (as click does, and ``| head``
        expects), else with one line naming the problem."""
        if self.error is None:
            return
        if self.error.errno == errno.EPIPE:
            raise typer.Exit(1)
        from counting.core.files import OutputError, reason

        raise OutputError(f"stdout: cannot write ({reason(self.error)})")


def _silence_stdout() -> None:
    """Point file descriptor 1 at the null device once stdout failed: what is left in Python's
    buffer is flushed again at exit, and that failure would print an "Exception ignored"
    block. Only the process's own stdout: a stream put in its place (a test runner's buffer,
    a caller's file) is left alone."""
    try:
        if sys.stdout.fileno() != 1:
            return
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    try:
        os.dup2(null, 1)
    except OSError:
        pass
    finally:
        os.close(null)


def print_skipped(message: str) -> None:
    """A file a command could not use and went on without: a diagnostic, so on stderr, never
    mixed into the results on stdout (printed under --quiet too)."""
    from counting.core.files import printable

    error_console.print(f"[yellow]skipped:[/] {escape(printable(str(message)))}", soft_wrap=True)


def informational(quiet: bool, *, on_stderr: bool = False) -> Callable[..., None]:
    """How a command prints its informational lines (what it is doing, where it wrote a file):
    on stdout beside its results (a table), on stderr when stdout holds lines a pipe reads
    (``on_stderr``), or nowhere under --quiet. Results, warnings and errors are printed either way."""
    if quiet:
        return lambda *args, **kwargs: None
    return error_console.print if on_stderr else console.print


def dataset_options(dataset: str, csv_path: Path | None, include_difficult: bool) -> dict[str, Any]:
    """Reader-specific options for ``load_dataset``; one a dataset does not read is refused (it
    was dropped in silence: ``--counts-csv`` on mall evaluated mall's own labels)."""
    from counting.core.files import printable

    options: dict[str, Any] = {}
    if csv_path is not None:
        if dataset != "folder":
            raise typer.BadParameter(
                f"--counts-csv {printable(str(csv_path))}: only the folder dataset reads a counts CSV; "
                f"{dataset} has its own labels"
            )
        options["csv_path"] = csv_path
    if include_difficult:
        if dataset != "voc":
            raise typer.BadParameter(f"--include-difficult: only voc marks objects difficult, {dataset} does not")
        options["include_difficult"] = True
    return options


def option_given(name: str) -> bool:
    """Whether the user typed option ``name`` (the parameter's name) rather than leaving its default."""
    try:  # typer 0.29 runs commands on a click of its own (typer._click), earlier ones on click
        from typer._click.core import ParameterSource
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context  # type: ignore[assignment]
        from click.core import ParameterSource  # type: ignore[assignment]

    context = get_current_context(silent=True)
    source = None if context is None else context.get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def check_smoothing(dataset: str, window: int) -> None:
    """``--smooth`` typed for a dataset of separate pictures is refused: it smooths only sequences
    (it was dropped in silence); ``--smooth 1`` (off) is what such a dataset gets anyway."""
    if option_given("smooth") and window != 1 and dataset not in defaults.SEQUENCE_DATASETS:
        raise typer.BadParameter(
            f"--smooth smooths frame sequences ({', '.join(defaults.SEQUENCE_DATASETS)}); "
            f"{dataset} holds separate pictures: leave it out"
        )


def open_dataset(
    dataset: str, root: Path, split: str, csv_path: Path | None = None, include_difficult: bool = False
) -> Any:
    from counting.core.errors import DatasetError
    from counting.data.datasets import load_dataset

    if dataset not in defaults.DATASETS:
        raise DatasetError(f"{dataset}: unknown dataset; choose one of {', '.join(defaults.DATASETS)}")
    return load_dataset(dataset, root, split=split, **dataset_options(dataset, csv_path, include_difficult))


def evaluate_on_test_split(
    counting_model: CountingModel, dataset: str, root: Path, test: EvaluationSplit, run: PictureRun, cache: Any
) -> Any:
    """Evaluate a model on a dataset's test split (shared by ``evaluate`` and ``report``), the
    pictures counted on ``test.cluster`` when given (``--cluster``), whatever the model's kind."""
    from counting.evaluate.evaluation import evaluate_model

    check_smoothing(dataset, test.smooth)
    data = open_dataset(dataset, root, test.split, test.counts_csv, test.include_difficult)
    return evaluate_model(
        counting_model,
        data.subset("test"),
        cache=cache,
        batch_size=run.batch_size,
        smoothing_window=test.smooth,
        weights=test.weights,
        progress=run.shows_progress,
        split=test.split,
        cluster=test.cluster,
    )


def feature_cache(cache_dir: Path | None, use_cache: bool) -> Any:
    """The feature cache: ``--cache-dir``, else $COUNTING_CACHE_DIR, else the user cache folder."""
    if not use_cache and cache_dir is not None:
        raise typer.BadParameter(f"--no-cache and --cache-dir {cache_dir} ask for opposite things; give one of them")
    if not use_cache:
        return None
    from counting.features import FeatureCache

    return FeatureCache(cache_dir) if cache_dir is not None else FeatureCache()


def optional_cache(cache_dir: Path | None, use_cache: bool = True) -> Any:
    """A cache only when asked for (``--cache-dir`` or $COUNTING_CACHE_DIR) and not refused
    (``--no-cache``): counting new images should not fill the user's disk by default."""
    if use_cache and cache_dir is None and not os.environ.get("COUNTING_CACHE_DIR"):
        return None
    return feature_cache(cache_dir, use_cache)


def refuse_outputs_on_inputs(
    outputs: list[Path | None],
    *,
    inputs: Sequence[Path | None] = (),
    model: Path | None | bool = False,
    data_root: Path | None = None,
    cache: Any = None,
    cache_dir: Path | None = None,
) -> None:
    """Every command's one check, before any work: no output is an input, none lands in the data,
    and the feature cache is not inside the dataset folder (:func:`refuse_cache_among_pictures`).

    ``model``: the ``--model`` value (None: the shipped default is read) or False when the command
    reads no model; ``data_root``: the dataset folder; ``cache``: the feature cache or None;
    ``cache_dir``: the ``--cache-dir`` value it came from (None: $COUNTING_CACHE_DIR or the default).
    """
    from counting.core.files import check_outputs

    refuse_cache_among_pictures(cache_dir, cache, [data_root])

    sources = list(inputs)
    if model is not False:
        from counting.model.default_path import default_model_path

        sources.append(default_model_path() if model is None else model)
    caches = [] if cache is None else [cache.directory]
    check_outputs(outputs, inputs=sources, input_folders=[data_root], cache_folders=caches)


def refuse_cache_among_pictures(
    cache_dir: Path | None,
    cache: Any,
    input_folders: Sequence[Path | str | None],
    picture_folders: Sequence[Path | str | None] = (),
) -> None:
    """A feature cache inside a folder the command reads pictures from is a usage error (exit 2),
    before any work: its files would sit among the user's pictures, and a later run over that
    folder (a folder dataset, ``count DIR``) would meet them. ``cache_dir``: the ``--cache-dir``
    value (None: the cache came from $COUNTING_CACHE_DIR or the default folder); the folders as
    :func:`counting.core.files.cache_among_inputs` reads them."""
    if cache is None:
        return
    from counting.core.files import cache_among_inputs, printable

    folder = cache_among_inputs(cache.directory, input_folders, picture_folders)
    if folder is None:
        return
    where = "'--cache-dir'" if cache_dir is not None else "$COUNTING_CACHE_DIR"
    same = os.path.realpath(cache.directory) == os.path.realpath(Path(folder).expanduser())
    place = "is the folder" if same else f"is inside {printable(folder)}, a folder"
    raise typer.BadParameter(
        f"{printable(str(cache.directory))} {place} this command reads pictures from; put the feature cache outside it",
        param_hint=where,
    )


def named_folders(arguments: Sequence[str]) -> list[Path]:
    """The folders named on a command line that lists pictures (``count DIR``, ``features DIR``)."""

    def is_folder(path: Path) -> bool:
        try:
            return path.is_dir()
        except OSError:  # a name over the system's limits: the picture listing already said so
            return False

    return [Path(argument).expanduser() for argument in arguments if is_folder(Path(argument).expanduser())]


def folders_of(files: Sequence[Path | str]) -> list[Path]:
    """The folders holding ``files`` (each once, in order)."""
    return list(dict.fromkeys(Path(file).parent for file in files))


def load_model_option(path: Path | None) -> Any:
    from counting.model.counting_model import load_model

    return load_model(path)


def use_runtime(runtime: str, threads: int | None) -> None:
    """Make this command's backbones run on ``runtime`` with ``threads`` threads."""
    from counting.core.errors import CountingError
    from counting.features.backbones.runtime import configure_runtime

    try:
        configure_runtime(runtime, threads)
    except ValueError as error:
        raise CountingError(f"--threads {threads}: {error}") from None


def familiarity_cell(row: dict) -> str:
    """The table's familiarity cell: the score, marked when below the model's threshold."""
    value = row.get("familiarity")
    if value is None:
        return "[dim]unknown[/]"
    if row.get("unfamiliar"):
        return f"[bold red]{value:.3f} unlike training[/]"
    return f"{value:.3f}"
