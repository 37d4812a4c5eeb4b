"""Every command-line option, declared once: the same name, short flag and parsing in every command.

Choices come from the library's registries (``defaults.DATASETS``, ``agp.KERNELS``,
``counting.features.backbones.BACKBONES``, ``training.CALIBRATION_MODES``, ``backbones.runtime.RUNTIMES``, ``layouts.LAYOUTS``), so a new
entry there is a new choice here. Options whose help depends on the command (what ``--out``
writes, what ``--smooth`` smooths) are made by a small function, still declared once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from agp import KERNELS
from counting.core import defaults
from counting.core.errors import CountingError
from counting.features.backbones import BACKBONES
from counting.features.backbones.runtime import RUNTIMES
from counting.features.layouts import LAYOUTS
from counting.heads.density.training import DENSITY_KINDS
from counting.heads.multiclass import TARGET_TRANSFORMS
from counting.train.pipeline import CALIBRATION_MODES

# Help panels of the longer commands.
DATA, DESCRIPTORS, REGRESSOR, RUN = "Data", "Descriptors", "Regressor and interval", "Run"


def parse_input_size(text: str | int | None) -> int | None:
    """``224`` -> 224; ``native`` -> None (the image's own resolution)."""
    if text is None or isinstance(text, int):
        return text
    value = text.strip().lower()
    if value in ("native", "none", "full"):
        return None
    from counting.features.backbones.preprocessing import MAX_INPUT_SIZE

    if not value.isdigit() or not 8 <= int(value) <= MAX_INPUT_SIZE:
        raise typer.BadParameter(f"{text!r}: expected a short side in pixels (8 to {MAX_INPUT_SIZE}) or 'native'")
    return int(value)


def parse_grid_option(text: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``3x4`` -> (3, 4); ``none`` -> None (whole frame).  A bare number (``--grid 2``) is refused:
    it could mean 2x2 or 2 cells, and a grid is always given as ROWSxCOLS on the command line."""
    from counting.features.tiles import parse_grid

    if isinstance(text, str) and text.strip().isdigit():
        raise typer.BadParameter(f"{text!r}: expected ROWSxCOLS, e.g. {text.strip()}x{text.strip()}, or 'none'")
    try:
        return parse_grid(text)
    except CountingError as error:
        raise typer.BadParameter(str(error)) from None


def choice(names: tuple[str, ...] | list[str]) -> dict:
    """Option settings that accept one of ``names`` (a registry's keys), shown in --help."""
    names = tuple(names)

    def parse(text: str | None) -> str | None:
        if text is None or text in names:
            return text
        raise typer.BadParameter(f"{text!r} is not one of {', '.join(names)}")

    return {"parser": parse, "metavar": "[" + "|".join(names) + "]"}


def _grid_text(grid: tuple[int, int] | None) -> str:
    return "none" if grid is None else f"{grid[0]}x{grid[1]}"


# -- data ---------------------------------------------------------------------------------
DatasetOption = Annotated[
    str,
    typer.Option(
        "--dataset",
        "-d",
        **choice(defaults.DATASETS),
        help="Dataset reader.",
        show_default=False,
        rich_help_panel=DATA,
    ),
]
OptionalDatasetOption = Annotated[
    Optional[str],
    typer.Option(
        "--dataset",
        "-d",
        **choice(defaults.DATASETS),
        help="Evaluate on this dataset's test split (default: the figures stored in the model).",
        show_default=False,
        rich_help_panel=DATA,
    ),
]
RootOption = Annotated[
    Path,
    typer.Option("--root", "-r", help="Dataset folder.", show_default=False, file_okay=False, rich_help_panel=DATA),
]
OptionalRootOption = Annotated[
    Optional[Path],
    typer.Option("--root", "-r", help="Dataset folder.", show_default=False, file_okay=False, rich_help_panel=DATA),
]
SplitOption = Annotated[
    Optional[str],
    typer.Option(
        "--split",
        help="'standard', 'train=A-B,test=C-D' (1-based frame ranges joined by +) or 'random:FRACTION[:SEED]'.",
        rich_help_panel=DATA,
    ),
]
CountsCsvOption = Annotated[
    Optional[Path],
    typer.Option(
        "--counts-csv",
        help="Counts CSV (filename,count) of --dataset folder (default ROOT/counts.csv).",
        show_default=False,
        rich_help_panel=DATA,
    ),
]
DifficultOption = Annotated[
    bool, typer.Option("--include-difficult", help="VOC: count objects flagged difficult too.", rich_help_panel=DATA)
]

# -- model and descriptors ----------------------------------------------------------------
ModelOption = Annotated[
    Optional[Path],
    typer.Option("--model", "-m", help="Model file (default: the shipped models/default.npz).", show_default=False),
]
BackboneOption = Annotated[
    str,
    typer.Option(
        "--backbone",
        **choice(list(BACKBONES)),
        help="ImageNet backbone giving the descriptors.",
        rich_help_panel=DESCRIPTORS,
    ),
]
WeightsOption = Annotated[
    Optional[Path],
    typer.Option(
        "--weights",
        help="Backbone weights file (resnet50: torchvision's state dict).",
        show_default=False,
        rich_help_panel=DESCRIPTORS,
    ),
]
InputSizeOption = Annotated[
    Optional[int],
    typer.Option(
        "--input-size",
        parser=parse_input_size,
        metavar="PIXELS|native",
        help="Short side in pixels the image is resized to (whole image kept), or 'native'.",
        rich_help_panel=DESCRIPTORS,
    ),
]
INPUT_SIZE_DEFAULT = str(defaults.INPUT_SIZE or "native")
# Annotated str, though the parser returns (rows, cols): typer reads a tuple type as two arguments.
GridOption = Annotated[
    Optional[str],
    typer.Option(
        "--grid",
        parser=parse_grid_option,
        metavar="ROWSxCOLS|none",
        help="Localised counting: descriptors per cell of a ROWSxCOLS grid, pooled from one pass; 'none': whole frame.",
        rich_help_panel=DESCRIPTORS,
    ),
]
GRID_DEFAULT = _grid_text(defaults.GRID)


def parse_descriptor_option(text: str | None) -> str | None:
    """A ``--descriptor`` spec, checked and written canonically (``counting.features.descriptors``)."""
    from counting.features.descriptors import DescriptorError, parse_descriptor

    if text is None:
        return None
    try:
        return parse_descriptor(text).text
    except DescriptorError as error:
        raise typer.BadParameter(str(error)) from None


_DESCRIPTOR_HELP = (
    "What each image becomes: scores (ImageNet class scores), pooled (trunk features), or "
    "sum:MAPS / mean:MAPS, feature maps (block0..block15, final) summed over the ROI, e.g. "
    "'sum:block10+final,perspective,levels=1+2' (perspective: weighted by the dataset's map; "
    "levels: per cell of 1x1, 2x2, ... grids). One pass per image."
)
_DESCRIPTOR_METAVAR = "KIND[:MAP+MAP][,perspective][,levels=1+2]"
DescriptorOption = Annotated[
    str,
    typer.Option(
        "--descriptor",
        parser=parse_descriptor_option,
        metavar=_DESCRIPTOR_METAVAR,
        help=_DESCRIPTOR_HELP,
        rich_help_panel=DESCRIPTORS,
    ),
]
# compare: the same option, repeatable (each descriptor gets its own rows).
DescriptorsOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--descriptor",
        parser=parse_descriptor_option,
        metavar=_DESCRIPTOR_METAVAR,
        help=_DESCRIPTOR_HELP + " Repeat for several; the feature methods run on each beside the class scores.",
        rich_help_panel=DESCRIPTORS,
        show_default=False,
    ),
]
RoiOption = Annotated[
    bool,
    typer.Option(
        "--roi/--no-roi", help="Mask pixels (and heads) outside the dataset's ROI.", rich_help_panel=DESCRIPTORS
    ),
]
FlipAverageOption = Annotated[
    bool,
    typer.Option(
        "--flip-average/--no-flip-average",
        help="Average each whole-frame descriptor with the left-right mirrored photo's (twice the extraction).",
        rich_help_panel=DESCRIPTORS,
    ),
]
DensityHeadOption = Annotated[
    bool,
    typer.Option(
        "--density-head",
        help="Fit a density head on mid-level feature maps to the head dots (Mall, ShanghaiTech, UCSD); "
        "the regressor then corrects its sums over the ROI and each --grid cell, and count/video/report "
        "can draw its density map. On VOC: one density per class on the final and block14 maps, fitted to "
        "the boxes; the regressor corrects the 20 class sums.",
        rich_help_panel=DESCRIPTORS,
    ),
]
HeadKindOption = Annotated[
    str,
    typer.Option(
        "--head-kind",
        **choice(DENSITY_KINDS),
        help="With --density-head: ridge or rff (closed form, stride 16, out-of-fold sums) or conv (small "
        "convolutional heads trained with torch at stride 8, one per quarter of the train images left out; "
        "the model counts with their mean density, and the regressor learns from out-of-fold sums).",
        rich_help_panel=DESCRIPTORS,
    ),
]


HeadLayersOption = Annotated[
    Optional[str],
    typer.Option(
        "--head-layers",
        metavar="LAYER,...",
        help="With --density-head: the backbone maps the head reads, e.g. block4,block7,block10 "
        "(default: block7,block10 for ridge/rff, block4,block7,block10 for conv).",
        show_default=False,
        rich_help_panel=DESCRIPTORS,
    ),
]
LayoutOption = Annotated[
    Optional[str],
    typer.Option(
        "--layout",
        **choice(LAYOUTS),
        help="Rows with a --grid: tiles (per-cell counts), tiles+frame (plus whole frames as the average cell), "
        "pyramid (frame and cells concatenated, one row per frame). Default: frame, or tiles with a grid.",
        show_default=False,
        rich_help_panel=DESCRIPTORS,
    ),
]

# -- regressor ----------------------------------------------------------------------------
KernelOption = Annotated[
    str, typer.Option("--kernel", **choice(KERNELS), help="AGP kernel kind.", rich_help_panel=REGRESSOR)
]
CentersOption = Annotated[
    int,
    typer.Option(
        "--centers", min=1, help="AGP centres (and the sparse GP's inducing points).", rich_help_panel=REGRESSOR
    ),
]
CalibrationOption = Annotated[
    str,
    typer.Option(
        "--calibration",
        **choice(CALIBRATION_MODES),
        help="Interval calibration: cv (out-of-fold predictions, model fitted on all images), or a hold-out: "
        "tail (last frames), blocks (runs of frames), random; none; auto = cv.",
        rich_help_panel=REGRESSOR,
    ),
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed for every random choice.", rich_help_panel=REGRESSOR)]
TargetTransformOption = Annotated[
    str,
    typer.Option(
        "--target-transform",
        **choice(TARGET_TRANSFORMS),
        help="Fit the regressor to transformed counts (sqrt, log = log1p; one row per image), predict counts.",
        rich_help_panel=REGRESSOR,
    ),
]
GateOption = Annotated[
    bool,
    typer.Option(
        "--gate/--no-gate",
        help="Per-class counts: a class predicted below its threshold counts 0 (thresholds chosen on the "
        "out-of-fold predictions of the train images).",
        rich_help_panel=REGRESSOR,
    ),
]

ClassThresholdOption = Annotated[
    Optional[float],
    typer.Option(
        "--show-above",
        min=0.0,
        help="Per-class models: list a class in the table when its count reaches this (files get every class; "
        "default 0.5). A single-count model refuses it.",
        show_default=False,
    ),
]

# -- run ----------------------------------------------------------------------------------
CacheDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--cache-dir",
        help="Feature cache folder (default $COUNTING_CACHE_DIR or ~/.cache/counting/features).",
        show_default=False,
        rich_help_panel=RUN,
    ),
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Neither read nor write the feature cache.", rich_help_panel=RUN)
]
BatchSizeOption = Annotated[
    int, typer.Option("--batch-size", min=1, help="Images per forward pass.", rich_help_panel=RUN)
]
RuntimeOption = Annotated[
    str,
    typer.Option(
        "--runtime",
        **choice(RUNTIMES),
        help="Inference runtime of the backbone: onnxruntime (faster) or torch; same descriptors to 1e-4.",
        rich_help_panel=RUN,
    ),
]
ThreadsOption = Annotated[
    Optional[int],
    typer.Option(
        "--threads",
        min=1,
        help="Threads for the forward pass; default: every available core.",
        show_default=False,
        rich_help_panel=RUN,
    ),
]


def parse_cluster_option(text: str | None) -> str | None:
    """``--cluster``: checked while the options are parsed (a usage error naming the accepted
    forms), so a typo fails before any model loads or any picture is read."""
    if text is None:
        return None
    from counting.apply.distributed.cluster import parse_cluster

    try:
        parse_cluster(text)
    except CountingError as error:
        raise typer.BadParameter(str(error).removeprefix("--cluster").lstrip(" :")) from None
    return text


ClusterOption = Annotated[
    Optional[str],
    typer.Option(
        "--cluster",
        parser=parse_cluster_option,
        metavar="local:N|ADDRESS",
        help="Run on a Dask cluster: local:N (N worker processes here) or a scheduler address such as "
        "tcp://HOST:8786. Extraction gives the same descriptors as without it; video --sources runs one "
        "task per stream.",
        show_default=False,
        rich_help_panel=RUN,
    ),
]
SourcesOption = Annotated[
    Optional[Path],
    typer.Option(
        "--sources",
        help="Count many streams at once: a file listing one source per line; one task and one counts "
        "file per stream (in --counts-dir), on --cluster (default local:N, a worker per stream up to the "
        "cores here).",
        show_default=False,
        dir_okay=False,
    ),
]
CountsDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--counts-dir",
        help="With --sources: folder for the per-stream counts files (default SOURCES_STEM-counts/).",
        show_default=False,
        file_okay=False,
    ),
]
ProgressOption = Annotated[
    bool, typer.Option("--progress/--no-progress", help="Show a progress bar on a terminal.", rich_help_panel=RUN)
]
JsonOption = Annotated[
    Optional[Path], typer.Option("--json", help="Write the results as JSON to this file.", show_default=False)
]


def out_option(what: str, folder: bool = False) -> typer.models.OptionInfo:
    """``-o/--out``: where the command writes its main output (``what``)."""
    return typer.Option("--out", "-o", help=what, show_default=not folder or None, file_okay=not folder)


def smooth_option(what: str) -> typer.models.OptionInfo:
    """``--smooth``: a temporal smoothing window in frames (1 = off)."""
    return typer.Option("--smooth", min=1, help=f"{what} (frames; 1 = off).")
