"""Shared pieces of the CLI commands: consoles, one-line errors, dataset/model/cache options."""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from counting import defaults
from counting.errors import CountingError

console = Console(highlight=False, soft_wrap=True)  # paths stay whole (copy-pasteable)
error_console = Console(stderr=True, highlight=False)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm", ".pgm")

F = TypeVar("F", bound=Callable[..., Any])


def print_error(message: str) -> None:
    """The one red line a user sees for a bad input (never wrapped, never a traceback)."""
    first_line = str(message).strip().splitlines()[0] if str(message).strip() else "error"
    error_console.print(f"[bold red]error:[/] {escape(first_line)}", soft_wrap=True)


def one_line_errors(command: F) -> F:
    """Turn user-input failures inside a command into one red line and exit code 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except CountingError as error:
            print_error(str(error))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            print_error("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def dataset_options(dataset: str, csv_path: Path | None, include_difficult: bool) -> dict[str, Any]:
    """Reader-specific options for ``load_dataset`` (only those the dataset understands)."""
    options: dict[str, Any] = {}
    if dataset == "folder" and csv_path is not None:
        options["csv_path"] = csv_path
    if dataset == "voc" and include_difficult:
        options["include_difficult"] = True
    return options


def open_dataset(
    dataset: str, root: Path, split: str, csv_path: Path | None = None, include_difficult: bool = False
) -> Any:
    from counting.datasets import load_dataset
    from counting.errors import DatasetError

    if dataset not in defaults.DATASETS:
        raise DatasetError(f"{dataset}: unknown dataset; choose one of {', '.join(defaults.DATASETS)}")
    return load_dataset(dataset, root, split=split, **dataset_options(dataset, csv_path, include_difficult))



def evaluate_on_test_split(
    counting_model: Any,
    dataset: str,
    root: Path,
    split: str,
    csv_path: Path | None,
    include_difficult: bool,
    *,
    cache_dir: Path | None,
    smooth: int,
    weights: Path | None,
    progress: bool,
    extract: Any = None,
) -> Any:
    """Evaluate a model on a dataset's test split (shared by ``evaluate`` and ``report``)."""
    from counting.evaluation import evaluate_model

    data = open_dataset(dataset, root, split, csv_path, include_difficult)
    return evaluate_model(
        counting_model,
        data.subset("test"),
        cache=optional_cache(cache_dir),
        smoothing_window=smooth,
        weights=weights,
        progress=progress,
        split=split,
        extract=extract,
    )


def feature_cache(cache_dir: Path | None, use_cache: bool) -> Any:
    """The feature cache: ``--cache-dir``, else $COUNTING_CACHE_DIR, else the user cache folder."""
    if not use_cache:
        return None
    from counting.features import FeatureCache

    return FeatureCache(cache_dir) if cache_dir is not None else FeatureCache()


def optional_cache(cache_dir: Path | None) -> Any:
    """A cache only when asked for (``--cache-dir`` or $COUNTING_CACHE_DIR): counting new images
    should not fill the user's disk by default."""
    if cache_dir is None and not os.environ.get("COUNTING_CACHE_DIR"):
        return None
    return feature_cache(cache_dir, True)


def parse_input_size(text: str) -> int | None:
    """``224`` -> 224; ``native`` -> None (the image's own resolution)."""
    value = text.strip().lower()
    if value in ("native", "none", "full"):
        return None
    if not value.isdigit() or int(value) < 8:
        raise typer.BadParameter(f"{text!r}: expected a short side in pixels (>= 8) or 'native'")
    return int(value)


def parse_grid_option(text: str | None) -> tuple[int, int] | None:
    from counting.tiles import parse_grid

    try:
        return parse_grid(text)
    except CountingError as error:
        raise typer.BadParameter(str(error)) from None


def expand_image_paths(patterns: list[str]) -> tuple[list[Path], list[str]]:
    """Image files from paths, folders (non-recursive, sorted) and globs.

    Returns (files, problems): a pattern that matches nothing is a problem, not a crash.
    """
    from counting.errors import ImageError

    files: list[Path] = []
    problems: list[str] = []
    for pattern in patterns:
        path = Path(pattern).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                problems.append(f"{path}: folder holds no images ({', '.join(IMAGE_SUFFIXES[:4])}, …)")
            files += found
        elif path.is_file():
            files.append(path)
        elif glob.has_magic(pattern):
            found = sorted(
                Path(p) for p in glob.glob(os.path.expanduser(pattern), recursive=True) if Path(p).is_file()
            )
            if not found:
                problems.append(f"{pattern}: no files match")
            files += found
        else:
            problems.append(f"{path}: no such file or folder")
    if not files:
        raise ImageError(problems[0] if len(problems) == 1 else f"{', '.join(patterns)}: no images to count")
    return files, problems


def load_model_option(path: Path | None) -> Any:
    from counting.model import load_model

    return load_model(path)


def fmt_count(value: float | None, digits: int = 1) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}"
