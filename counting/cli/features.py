"""``counting features``: extract (and cache) descriptors for images, folders or glob patterns."""

from __future__ import annotations

import csv
import glob
import os
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.text import Text

from counting import defaults
from counting.backbones import BACKBONES, Preprocessing, get_backbone
from counting.cli.cluster import ClusterOption, extraction_on
from counting.errors import CountingError
from counting.features import FeatureCache, FeatureSet, extract_features

__all__ = ["collect_images", "features", "parse_grid", "write_features"]

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".gif"})
_GLOB_CHARACTERS = frozenset("*?[")


class InputError(CountingError, ValueError):
    """A command-line input (path, pattern, option value) is unusable."""


def features(
    inputs: Annotated[list[str], typer.Argument(help="Image files, folders (their images) or glob patterns.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write descriptors to a .npy or .csv file.")
    ] = None,
    backbone: Annotated[
        str | None, typer.Option(help=f"Backbone: {', '.join(BACKBONES)}; default {defaults.BACKBONE}.")
    ] = None,
    weights: Annotated[Path | None, typer.Option(help="Explicit weights file (state dict).")] = None,
    input_size: Annotated[
        int | None,
        typer.Option(help=f"Short side in pixels, whole frame kept; default {defaults.INPUT_SIZE}."),
    ] = None,
    native_size: Annotated[bool, typer.Option("--native-size", help="Keep each image's own resolution.")] = False,
    grid: Annotated[
        str | None, typer.Option(help="Descriptors per grid cell, ROWSxCOLS (e.g. 3x4).")
    ] = None,
    pooled: Annotated[bool, typer.Option("--pooled", help="Pooled trunk features instead of class scores.")] = False,
    batch_size: Annotated[int | None, typer.Option(help=f"Images per batch; default {defaults.BATCH_SIZE}.")] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Cache folder; default $COUNTING_CACHE_DIR, else ~/.cache/counting/features.")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")] = False,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Report unreadable images and go on (default: stop at the first).")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on a terminal.")] = True,
    cluster: ClusterOption = None,
) -> None:
    """Extract (and cache) image descriptors; write them to a .npy or .csv file."""
    console = Console(stderr=True)
    try:
        if output is not None and output.suffix.lower() not in (".npy", ".csv"):
            raise InputError(f"{output}: output must end in .npy or .csv")
        paths = collect_images(inputs)
        size = None if native_size else (input_size if input_size is not None else defaults.INPUT_SIZE)
        if size is not None and size < 8:
            raise InputError(f"--input-size: must be at least 8 pixels, got {size}")
        cells = parse_grid(grid) if grid is not None else None
        batch = batch_size if batch_size is not None else defaults.BATCH_SIZE
        if batch < 1:
            raise InputError(f"--batch-size: must be at least 1, got {batch}")
        model = get_backbone(backbone or defaults.BACKBONE, weights)
        result = extraction_on(cluster, extract_features)(
            paths,
            model,
            Preprocessing(input_size=size),
            grid=cells,
            cache=None if no_cache else FeatureCache(cache_dir),
            batch_size=batch,
            progress=progress,
            on_error="skip" if skip_bad else "raise",
            pooled=pooled,
            console=console,
        )
        for message in result.errors.values():
            console.print(Text.assemble(("skipped ", "yellow"), message), soft_wrap=True)
        if output is not None:
            write_features(output, result)
    except CountingError as error:
        console.print(Text(str(error), style="red"), soft_wrap=True)
        raise typer.Exit(code=1) from None
    n_good = int(result.ok.sum())
    destination = f" -> {output}" if output is not None else ""
    console.print(
        f"{n_good} of {len(paths)} images: {result.n_cached} from cache, {result.n_computed} computed, "
        f"{len(result.errors)} skipped; descriptors {tuple(result.features.shape[1:])}{destination}",
        highlight=False,
        soft_wrap=True,
    )
    if n_good == 0:
        raise typer.Exit(code=1)


def collect_images(inputs: list[str]) -> list[str]:
    """Expand files, folders (their image files, sorted) and glob patterns, keeping order."""
    paths: list[str] = []
    for item in inputs:
        if _GLOB_CHARACTERS & set(item):
            matches = sorted(match for match in glob.glob(os.path.expanduser(item), recursive=True) if os.path.isfile(match))
            if not matches:
                raise InputError(f"{item}: no files match this pattern")
            paths.extend(matches)
            continue
        path = Path(item).expanduser()
        if path.is_dir():
            found = sorted(str(child) for child in path.iterdir() if child.suffix.lower() in IMAGE_SUFFIXES and child.is_file())
            if not found:
                raise InputError(f"{path}: folder holds no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
            paths.extend(found)
        elif path.exists():
            paths.append(str(path))
        else:
            raise InputError(f"{path}: no such file or folder")
    return paths


def parse_grid(text: str) -> tuple[int, int]:
    """``"3x4"`` -> ``(3, 4)``."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        rows, cols = (int(part) for part in parts)
    except ValueError:
        raise InputError(f"--grid: expected ROWSxCOLS such as 3x4, got {text!r}") from None
    if rows < 1 or cols < 1:
        raise InputError(f"--grid: rows and columns must be at least 1, got {text!r}")
    return rows, cols


def write_features(output: Path, result: FeatureSet) -> None:
    """``.npy``: the array (NaN rows for skipped images) plus ``<name>.files.txt`` listing rows.
    ``.csv``: ``filename[,cell],f0..`` for the images that worked."""
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.suffix.lower() == ".npy":
        np.save(output, result.features, allow_pickle=False)
        output.with_suffix(".files.txt").write_text("".join(f"{path}\n" for path in result.paths))
        return
    dim = result.features.shape[-1]
    with_cells = result.features.ndim == 3
    with output.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["filename", *(["cell"] if with_cells else []), *(f"f{j}" for j in range(dim))])
        for path, good, row in zip(result.paths, result.ok, result.features):
            if not good:
                continue
            if with_cells:
                for cell, values in enumerate(row):
                    writer.writerow([path, cell, *(f"{v:.7g}" for v in values)])
            else:
                writer.writerow([path, *(f"{v:.7g}" for v in row)])
