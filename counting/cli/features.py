"""``counting features``: extract (and cache) descriptors for images, folders or glob patterns."""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
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
    load_model_option,
    named_folders,
    option_given,
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
from counting.features.record import DESCRIPTOR_ROWS, FeaturesRecord, file_sha256, record_path, roi_sha256, write_record

# The extraction (torch) is imported where it runs: `counting features --help` and a bad option
# answer at once (scripts/bench_cli_startup.py).
if TYPE_CHECKING:
    from counting.features import FeatureSet
    from counting.model.counting_model import CountingModel

__all__ = ["check_features_record", "features", "model_record", "write_features"]

# `features -m MODEL` reads the pictures as the model does: these options would say otherwise.
MODEL_SETTINGS = ("backbone", "input_size", "grid", "pooled", "descriptor")
ForModelOption = Annotated[
    Path | None,
    typer.Option(
        "--model",
        "-m",
        metavar="FILE",
        help="Make the rows this model file reads from the pictures (its backbone, input size, ROI mask, grid, "
        "layout, descriptor, flip): `count --features` then gives the same counts as counting the pictures.",
        show_default=False,
        rich_help_panel=DESCRIPTORS,
    ),
]


FeaturesOutOption = Annotated[Path | None, out_option("Write the descriptors to this .npy or .csv file.")]
PooledOption = Annotated[
    bool,
    typer.Option(
        "--pooled",
        help="Pooled trunk features instead of class scores (= --descriptor pooled).",
        rich_help_panel=DESCRIPTORS,
    ),
]
FeaturesStrictOption = Annotated[
    bool,
    strict_option(
        "Stop at the first image that cannot be read (exit 1; the images extracted before it stay in the "
        "feature cache). Without it such an image is skipped with a line on stderr (a NaN row in a .npy)."
    ),
]


@dataclass(frozen=True)
class DescriptorReading:
    """How `counting features` alone (without -m) reads the pictures: the network, its weights,
    the input size, the grid and the descriptor kind."""

    backbone: BackboneOption = defaults.BACKBONE
    weights: WeightsOption = None
    input_size: InputSizeOption = INPUT_SIZE_DEFAULT
    grid: GridOption = GRID_DEFAULT
    pooled: PooledOption = False
    descriptor: DescriptorOption = "scores"

    def with_detector_spelling(self) -> DescriptorReading:
        """``--backbone centernet`` read as ``--descriptor detector`` (:func:`detector_spelling`)."""
        backbone, descriptor = detector_spelling(self.backbone, self.descriptor)
        return dataclasses.replace(self, backbone=backbone, descriptor=descriptor)


@with_groups
def features(
    inputs: Annotated[
        list[str], typer.Argument(help="Image files, folders (their images) or glob patterns.", metavar="IMAGES")
    ],
    out: FeaturesOutOption = None,
    reading: DescriptorReading = DescriptorReading(),
    strict: FeaturesStrictOption = False,
    skip_bad: Annotated[bool, retired_flag("--skip-bad", SKIPPED_BY_DEFAULT)] = False,
    run: PictureRun = PictureRun(),
    cluster: ClusterOption = None,
    model: ForModelOption = None,
) -> None:
    """Extract (and cache) image descriptors; write them to a .npy or .csv file.

    Beside the file, <name>.features.json records the settings the rows were made with
    (`count --features` checks them against its model). Unreadable images are skipped with a
    line on stderr (--strict stops at the first).
    """
    if model is not None:
        refuse_settings_beside_model(model, cluster)
    reading = reading.with_detector_spelling()
    use_runtime(run.runtime, run.threads)
    check_features_output(out)
    paths, problems = expand_image_paths(inputs)
    cache = feature_cache(run.cache_dir, not run.no_cache)
    refuse_cache_among_pictures(run.cache_dir, cache, named_folders(inputs), folders_of(paths))
    if out is not None:
        refuse_outputs_on_inputs(features_outputs(out), inputs=[*paths, reading.weights, model], cache=cache)
    if problems:
        raise CountingError(problems[0])
    if model is not None:
        counting_model = load_model_option(model)
        refuse_gated_model(counting_model)
        rows, record = rows_of_model(counting_model, paths, reading.weights, cache, run, strict)
        finish(out, rows, record, f"rows as {counting_model.name} reads them", run.quiet)
        return
    result, record = extract_descriptors(paths, reading, cache, run, strict, cluster)
    finish(out, result, record, f"{result.n_cached} from cache, {result.n_computed} computed", run.quiet)


def check_features_output(out: Path | None) -> None:
    """The descriptors file and the files written beside it (a .npy's listing, the record),
    checked before any work: a bad output path must not waste it."""
    if out is None:
        return
    if out.suffix.lower() not in (".npy", ".csv"):
        raise CountingError(f"{out}: output must end in .npy or .csv")
    check_writable(out)
    if out.suffix.lower() == ".npy":
        check_writable(out.with_suffix(".files.txt"))
    if not special_kind(out):
        check_writable(record_path(out))


def features_outputs(out: Path) -> list[Path | None]:
    """The files ``-o out`` writes: the rows, a .npy's listing and the record (none beside a
    device or a pipe)."""
    listing = out.with_suffix(".files.txt") if out.suffix.lower() == ".npy" and not special_kind(out) else None
    record_file = None if special_kind(out) else record_path(out)
    return [out, listing, record_file]


def extract_descriptors(
    paths: list[Path], reading: DescriptorReading, cache: Any, run: PictureRun, strict: bool, cluster: str | None
) -> tuple[FeatureSet, FeaturesRecord]:
    """The pictures' descriptors as ``reading`` says (here or on ``cluster``), and their record."""
    # torch: imported once the options and the pictures have passed, so a mistake in them is said at once.
    from counting.features.backbones import Preprocessing, get_backbone

    descriptor = reading.descriptor
    # A descriptor kind with its own network (detector) names its backbone itself.
    if descriptor in OWN_BACKBONE and option_given("input_size"):  # was ignored, yet written in the record
        raise typer.BadParameter(
            f"--descriptor {descriptor}: the detector reads pictures at its own input size; leave out --input-size"
        )
    network = get_backbone(OWN_BACKBONE.get(descriptor, reading.backbone), reading.weights)
    kind = (
        None
        if descriptor == "scores"
        else Descriptor.build(descriptor, source="`counting features` (images, no dataset)")
    )
    try:
        result = _extract(
            cluster,
            paths,
            network,
            Preprocessing(input_size=reading.input_size),
            grid=reading.grid,
            cache=cache,
            batch_size=run.batch_size,
            progress=run.shows_progress,
            on_error="raise" if strict else "skip",
            pooled=reading.pooled,
            descriptor=kind,
        )
    except ImageError as error:
        # One bad photo in a thousand must not look like a lost run: say how to go on, and
        # that nothing extracted before it has to be computed again.
        raise ImageError(f"{error}; --strict stops at it (without it, it is skipped){_kept(cache)}") from None
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"no descriptors file written{_kept(cache)}") from None
    if len(paths) == 1 and result.errors:  # one picture, one problem: the error line says which
        raise ImageError(next(iter(result.errors.values())))
    record = FeaturesRecord(
        backbone=network.name,
        weights_sha256=getattr(network, "weights_sha256", None),
        input_size=reading.input_size,
        roi_sha256=None,  # `counting features` alone reads whole pictures; -m reads inside a model's ROI
        grid=reading.grid,
        layout="frame" if reading.grid is None else "tiles",
        descriptor="pooled" if reading.pooled else descriptor if kind is None else kind.text,
        flip_average=False,
    )
    return result, record


def finish(out: Path | None, result: FeatureSet, record: FeaturesRecord, origin: str, quiet: bool) -> None:
    """Say the skipped pictures, write the rows and their record, and print the summary line."""
    for message in result.errors.values():
        print_skipped(message)
    if out is not None:
        write_features(out, result)
        if not special_kind(out):
            write_record(out, dataclasses.replace(record, n_rows=len(result.paths)))
    n_good = int(result.ok.sum())
    destination = f" -> {escape(printable(str(out)))}" if out is not None else ""
    # With -o the descriptors are the result and this line is a diagnostic; without, it is the result.
    (informational(quiet) if out is not None else console.print)(
        f"{n_good} of {len(result.paths)} images: {origin}, "
        f"{len(result.errors)} skipped; descriptors {tuple(result.features.shape[1:])}{destination}"
    )
    if n_good == 0:
        raise typer.Exit(code=1)


def refuse_settings_beside_model(model: Path, cluster: str | None) -> None:
    """-m takes every reading setting from the model: a typed one would be dropped, so it is refused."""
    given = [name for name in MODEL_SETTINGS if option_given(name)]
    if given:
        option = "--" + given[0].replace("_", "-")
        raise typer.BadParameter(f"{option}: -m {model} reads the pictures with the model's own settings; leave it out")
    if cluster is not None:
        raise typer.BadParameter(f"--cluster {cluster}: -m {model} makes the model's rows here; leave out --cluster")


def refuse_gated_model(counting_model: CountingModel) -> None:
    """A model with a sparse gate counts sparse photos from the photos themselves: no rows do."""
    if counting_model.sparse_gate is not None:
        raise CountingError(
            f"{counting_model.name} hands sparse pictures to its person detector, which reads the pictures "
            "themselves; count the pictures, not a features file"
        )


def model_record(counting_model: CountingModel) -> FeaturesRecord:
    """The settings of the rows ``counting_model`` reads: what its features file must record."""
    rows = counting_model.applied_head.name
    return FeaturesRecord(
        backbone=counting_model.backbone,
        weights_sha256=counting_model.backbone_weights_sha256,
        input_size=counting_model.input_size,
        roi_sha256=roi_sha256(counting_model.roi_mask),
        grid=None if counting_model.grid is None else tuple(counting_model.grid),
        layout=counting_model.layout,
        descriptor="scores" if counting_model.descriptor is None else counting_model.descriptor.text,
        flip_average=bool(counting_model.flip_average),
        rows=rows,
        # A head's rows (a density head's sums) belong to the one model whose head made them.
        model_sha256=None if rows == DESCRIPTOR_ROWS else file_sha256(counting_model.path),
    )


def check_features_record(counting_model: CountingModel, features: Path, n_rows: int) -> None:
    """CountingError (one line) unless ``features`` was made with the settings ``counting_model``
    reads the pictures with, as its record says; a file without a record passes only where the
    model reads nothing its shape cannot show (no ROI mask, no flip, the default input size)."""
    from counting.features.record import first_difference, read_record

    remedy = f"make it with `counting features IMAGES -m {counting_model.name} -o {features}`"
    wanted = model_record(counting_model)
    made = read_record(features)
    if made is None:
        needs = unseen_settings(wanted)
        if needs:
            raise CountingError(
                f"{features}: no record of the settings its rows were made with ({record_path(features).name} "
                f"missing), and {counting_model.name} reads {needs}; {remedy}"
            )
        return
    if features.suffix.lower() == ".npy" and made.n_rows is not None and made.n_rows != n_rows:
        raise CountingError(
            f"{features}: holds {n_rows} rows, its record {record_path(features).name} {made.n_rows}: "
            f"the file changed after it was made; {remedy}"
        )
    difference = first_difference(made, wanted)
    if difference is not None:
        raise CountingError(f"{features}: made with {difference} ({record_path(features).name}); {remedy}")


def unseen_settings(wanted: FeaturesRecord) -> str | None:
    """What a model reads that a features file's shape cannot show, in words, or None."""
    if wanted.rows != DESCRIPTOR_ROWS:
        return f"its {wanted.rows} head's rows, not descriptors"
    if wanted.roi_sha256 is not None:
        return "inside its ROI mask"
    if wanted.flip_average:
        return "flip-averaged descriptors"
    if wanted.input_size != defaults.INPUT_SIZE and not wanted.descriptor.startswith("detector"):
        size = "pictures at their own size" if wanted.input_size is None else f"input short side {wanted.input_size} px"
        return f"{size} (not the default {defaults.INPUT_SIZE} px)"
    return None


def rows_of_model(
    counting_model: CountingModel, paths: list[Path], weights: Path | None, cache: Any, run: PictureRun, strict: bool
) -> tuple[FeatureSet, FeaturesRecord]:
    """The model's own rows of the pictures (the code its counting runs: same ROI, size, grid,
    layout, flip), as a FeatureSet, and their record."""
    from counting.features import FeatureSet
    from counting.heads.applied import Chunking
    from counting.model.counting_model import DENSITY_BATCH, DENSITY_CHUNK

    sources = [str(path) for path in paths]
    try:
        rows = counting_model.applied_head.rows_of_paths(
            counting_model,
            sources,
            weights,
            cache,
            run.batch_size,
            run.shows_progress,
            Chunking(DENSITY_CHUNK, DENSITY_BATCH),
        )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"no descriptors file written{_kept(cache)}") from None
    if strict and rows.errors:
        raise ImageError(f"{next(iter(rows.errors.values()))} (--strict){_kept(cache)}")
    if len(paths) == 1 and rows.errors:
        raise ImageError(next(iter(rows.errors.values())))
    features = np.asarray(rows.features)  # as the model counts them: no cast, so the counts are the same
    return FeatureSet(features, np.asarray(rows.ok, dtype=bool), dict(rows.errors), sources), model_record(
        counting_model
    )


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
