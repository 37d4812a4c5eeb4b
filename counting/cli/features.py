"""``counting features``: extract (and cache) descriptors for images, folders or glob patterns."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.markup import escape

from counting.apply.distributed.session import extraction_on
from counting.cli.common import (
    console,
    error_console,
    feature_cache,
    folders_of,
    informational,
    named_folders,
    print_skipped,
    refuse_cache_among_pictures,
    refuse_outputs_on_inputs,
    use_runtime,
)
from counting.cli.option_groups import PictureRun, with_groups
from counting.cli.options import (
    DESCRIPTORS,
    GRID_DEFAULT,
    INPUT_SIZE_DEFAULT,
    SKIPPED_BY_DEFAULT,
    BackboneOption,
    ClusterOption,
    DescriptorOption,
    GridOption,
    InputSizeOption,
    WeightsOption,
    detector_spelling,
    out_option,
    retired_flag,
    strict_option,
)
from counting.core import defaults
from counting.core.errors import CountingError, ImageError
from counting.core.files import atomic_path, atomic_write, check_writable, printable, special_kind
from counting.data.paths import expand_image_paths
from counting.features.descriptors import OWN_BACKBONE, Descriptor

# The extraction (torch) is imported where it runs: `counting features --help` and a bad option
# answer at once (scripts/bench_cli_startup.py).
if TYPE_CHECKING:
    from counting.features import FeatureSet

__all__ = ["features", "write_features"]


@with_groups
def features(
    inputs: Annotated[
        list[str], typer.Argument(help="Image files, folders (their images) or glob patterns.", metavar="IMAGES")
    ],
    out: Annotated[Path | None, out_option("Write the descriptors to this .npy or .csv file.")] = None,
    backbone: BackboneOption = defaults.BACKBONE,
    weights: WeightsOption = None,
    input_size: InputSizeOption = INPUT_SIZE_DEFAULT,
    grid: GridOption = GRID_DEFAULT,
    pooled: Annotated[
        bool,
        typer.Option(
            "--pooled",
            help="Pooled trunk features instead of class scores (= --descriptor pooled).",
            rich_help_panel=DESCRIPTORS,
        ),
    ] = False,
    descriptor: DescriptorOption = "scores",
    strict: Annotated[
        bool,
        strict_option(
            "Stop at the first image that cannot be read (exit 1; the images extracted before it stay in the "
            "feature cache). Without it such an image is skipped with a line on stderr (a NaN row in a .npy)."
        ),
    ] = False,
    skip_bad: Annotated[bool, retired_flag("--skip-bad", SKIPPED_BY_DEFAULT)] = False,
    run: PictureRun = PictureRun(),
    cluster: ClusterOption = None,
) -> None:
    """Extract (and cache) image descriptors; write them to a .npy or .csv file.

    Unreadable images are skipped with a line on stderr (--strict stops at the first).
    """
    backbone, descriptor = detector_spelling(backbone, descriptor)
    use_runtime(run.runtime, run.threads)
    if out is not None and out.suffix.lower() not in (".npy", ".csv"):
        raise CountingError(f"{out}: output must end in .npy or .csv")
    if out is not None:
        check_writable(out)  # before any work: a bad output path must not waste it
        if out.suffix.lower() == ".npy":
            check_writable(out.with_suffix(".files.txt"))
    paths, problems = expand_image_paths(inputs)
    cache = feature_cache(run.cache_dir, not run.no_cache)
    refuse_cache_among_pictures(run.cache_dir, cache, named_folders(inputs), folders_of(paths))
    if out is not None:
        listing = out.with_suffix(".files.txt") if out.suffix.lower() == ".npy" and not special_kind(out) else None
        refuse_outputs_on_inputs([out, listing], inputs=[*paths, weights], cache=cache)
    if problems:
        raise CountingError(problems[0])
    # torch: imported once the options and the pictures have passed, so a mistake in them is said at once.
    from counting.features.backbones import Preprocessing, get_backbone

    try:
        result = _extract(
            cluster,
            paths,
            # A descriptor kind with its own network (detector) names its backbone itself.
            get_backbone(OWN_BACKBONE[descriptor]) if descriptor in OWN_BACKBONE else get_backbone(backbone, weights),
            Preprocessing(input_size=input_size),
            grid=grid,
            cache=cache,
            batch_size=run.batch_size,
            progress=run.shows_progress,
            on_error="raise" if strict else "skip",
            pooled=pooled,
            descriptor=None
            if descriptor == "scores"
            else Descriptor.build(descriptor, source="`counting features` (images, no dataset)"),
        )
    except ImageError as error:
        # One bad photo in a thousand must not look like a lost run: say how to go on, and
        # that nothing extracted before it has to be computed again.
        raise ImageError(f"{error}; --strict stops at it (without it, it is skipped){_kept(cache)}") from None
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"no descriptors file written{_kept(cache)}") from None
    if len(paths) == 1 and result.errors:  # one picture, one problem: the error line says which
        raise ImageError(next(iter(result.errors.values())))
    for message in result.errors.values():
        print_skipped(message)
    if out is not None:
        write_features(out, result)
    n_good = int(result.ok.sum())
    destination = f" -> {escape(printable(str(out)))}" if out is not None else ""
    # With -o the descriptors are the result and this line is a diagnostic; without, it is the result.
    (informational(run.quiet) if out is not None else console.print)(
        f"{n_good} of {len(paths)} images: {result.n_cached} from cache, {result.n_computed} computed, "
        f"{len(result.errors)} skipped; descriptors {tuple(result.features.shape[1:])}{destination}"
    )
    if n_good == 0:
        raise typer.Exit(code=1)


def _extract(cluster: str | None, *args: Any, **kwargs: Any) -> FeatureSet:
    from counting.features import extract_features

    return extraction_on(cluster, extract_features)(*args, console=error_console, **kwargs)


def _kept(cache: Any) -> str:
    if cache is None or not cache.enabled:
        return ""
    return "; the images extracted before it are in the feature cache, a new run starts from there"


def write_features(output: Path, result: FeatureSet) -> None:
    """``.npy``: the array (NaN rows for skipped images) plus ``<name>.files.txt`` listing rows.
    ``.csv``: ``filename[,cell],f0..`` for the images that worked."""
    if output.suffix.lower() == ".npy":
        with atomic_path(output) as temporary:
            np.save(temporary, result.features, allow_pickle=False)
        if special_kind(output):
            return  # a device or FIFO: no regular listing file is written beside it
        # Valid UTF-8, undecodable name bytes as \xNN (see counting.core.files on non-UTF-8 names).
        with atomic_write(output.with_suffix(".files.txt")) as handle:
            handle.write("".join(f"{path}\n" for path in result.paths))
        return
    dim = result.features.shape[-1]
    with_cells = result.features.ndim == 3
    with atomic_write(output, newline="") as handle:
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
