"""Every command-line option, declared once: the same name, short flag and parsing in every command.

Options that several commands share (``--progress``, ``--quiet``, ``--cache-dir``, ``--no-cache``,
``--batch-size``, ``--smooth``, ``--grid``, ...) have one name, one default and one help text here;
``tests/cli/test_cli_vocabulary.py`` checks every command against them. Results go to ``--csv``,
``--json`` or ``--jsonl`` (streamed rows) in every command; an older spelling stays as a hidden
alias that still works and says once, on stderr, which option replaces it (:func:`deprecated_alias`).

Choices come from the library's registries (``defaults.DATASETS``, ``agp.KERNELS``,
``counting.features.backbones.BACKBONES``, ``defaults.CALIBRATION_MODES``, ``backbones.runtime.RUNTIMES``, ``layouts.LAYOUTS``), so a new
entry there is a new choice here. Options whose help depends on the command (what ``--out``
writes, what ``--smooth`` smooths) are made by a small function, still declared once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from agp import KERNELS
from agp.optimizers import DEFAULT_MAX_EPOCHS
from counting.cli.diagnostics import print_warning
from counting.core import defaults
from counting.core.errors import CountingError
from counting.features.backbones import BACKBONES
from counting.features.backbones.runtime import RUNTIMES
from counting.features.layouts import LAYOUTS
from counting.heads.multiclass import TARGET_TRANSFORMS

# Placeholders: what an option's value is, in the same words in every command's --help, beside the
# option (tests/robustness/test_option_vocabulary.py holds every command to these, and no typer
# type name such as <path> or <float range> reaches a user).
PLACEHOLDERS: dict[str, str] = {
    "FILE": "a file",
    "DIR": "a folder",
    "N": "a whole number",
    "X": "a number (a fraction, a threshold)",
    "NAME": "one of the names the help lists",
    "LIST": "names separated by commas",
    "SPLIT": "a split: standard, train=A-B,test=C-D or random:FRACTION[:SEED]",
    "SPEC": "a descriptor spec (the help of --descriptor)",
    "N|native": "a size in pixels, or native (the picture's own)",
    "ROWSxCOLS|none": "a grid, or none (whole frames)",
    "NAME:x1,y1,...": "a zone: a name and its polygon",
    "local:N|ADDRESS": "a Dask cluster: N local workers or a scheduler's address",
    "ADDRESS": "a network address",
    "TOKEN": "a secret shared with the clients",
}

# Help panels: every command groups its options the same way.
DATA, DESCRIPTORS, REGRESSOR, RUN = "Data", "Descriptors", "Regressor and interval", "Run"
OUTPUT, LOCALISED, HEADS = "Output", "Localised counting", "Density head"


def parse_input_size(text: str | int | None) -> int | None:
    """``224`` -> 224; ``native`` -> None (the image's own resolution)."""
    if text is None or isinstance(text, int):
        return text
    value = text.strip().lower()
    if value in ("native", "none", "full"):
        return None
    from counting.features.backbones.limits import MAX_INPUT_SIZE

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
    """Option settings that accept one of ``names`` (a registry's keys), shown in --help as NAME:
    the help text lists the names (:func:`one_of`), where a long list is not folded mid-word."""
    names = tuple(names)

    def parse(text: str | None) -> str | None:
        if text is None or text in names:
            return text
        raise typer.BadParameter(f"{text!r} is not one of {', '.join(names)}")

    return {"parser": parse, "metavar": "NAME"}


def one_of(names: tuple[str, ...] | list[str]) -> str:
    """``a, b or c``: a long list of choices, written in the help text rather than the narrow
    type column (where it would be folded mid-word)."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _grid_text(grid: tuple[int, int] | None) -> str:
    return "none" if grid is None else f"{grid[0]}x{grid[1]}"


# -- data ---------------------------------------------------------------------------------
DatasetOption = Annotated[
    str,
    typer.Option(
        "--dataset",
        "-d",
        **choice(defaults.DATASETS),
        help=f"Dataset reader: {one_of(defaults.DATASETS)}.",
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
        help=f"Evaluate on this dataset's test split ({one_of(defaults.DATASETS)}; default: the figures "
        "stored in the model).",
        show_default=False,
        rich_help_panel=DATA,
    ),
]
RootOption = Annotated[
    Path,
    typer.Option(
        "--root", "-r", metavar="DIR", help="Dataset folder.", show_default=False, file_okay=False, rich_help_panel=DATA
    ),
]
OptionalRootOption = Annotated[
    Optional[Path],
    typer.Option(
        "--root", "-r", metavar="DIR", help="Dataset folder.", show_default=False, file_okay=False, rich_help_panel=DATA
    ),
]
SplitOption = Annotated[
    Optional[str],
    typer.Option(
        "--split",
        metavar="SPLIT",
        help="'standard', 'train=A-B,test=C-D' (1-based frame ranges joined by +) or 'random:FRACTION[:SEED]'.",
        rich_help_panel=DATA,
    ),
]
CountsCsvOption = Annotated[
    Optional[Path],
    typer.Option(
        "--counts-csv",
        metavar="FILE",
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
    typer.Option(
        "--model",
        "-m",
        metavar="FILE",
        help="Model file (default: the shipped general crowd model, models/crowd.npz).",
        show_default=False,
    ),
]
# The COCO detector has one name on the command line, --descriptor detector (detector-letterbox):
# it is its own network, not a backbone under the class scores. --backbone also took its network's
# names, a second spelling of the same thing; scripts may use it, so it is still accepted with a
# note and read as the descriptor (detector_spelling). The inverse of
# counting.features.descriptors.OWN_BACKBONE, not imported here: that module pulls in OpenCV,
# which --help does not need (tests/robustness/test_option_vocabulary.py checks they agree).
DETECTOR_BACKBONES = {"centernet": "detector", "centernet-letterbox": "detector-letterbox"}
IMAGENET_BACKBONES = tuple(name for name in BACKBONES if name not in DETECTOR_BACKBONES)


def parse_backbone_option(text: str | None) -> str | None:
    """``--backbone``: an ImageNet backbone; the detector's network names are its old spelling."""
    if text in DETECTOR_BACKBONES:
        print_warning(f"--backbone {text} is spelled --descriptor {DETECTOR_BACKBONES[text]}; read as that")
        return text
    return choice(IMAGENET_BACKBONES)["parser"](text)


def detector_spelling(backbone: str, descriptor: str) -> tuple[str, str]:
    """``(backbone, descriptor)`` with ``--backbone centernet`` read as ``--descriptor detector``
    (the default backbone then; the detector brings its own network)."""
    if backbone not in DETECTOR_BACKBONES:
        return backbone, descriptor
    meant = DETECTOR_BACKBONES[backbone]
    if descriptor not in ("scores", meant):
        raise typer.BadParameter(
            f"--backbone {backbone} is --descriptor {meant}; it does not go with --descriptor {descriptor}",
            param_hint="'--backbone'",
        )
    return defaults.BACKBONE, meant


BackboneOption = Annotated[
    str,
    typer.Option(
        "--backbone",
        parser=parse_backbone_option,
        metavar="NAME",
        help=f"ImageNet backbone giving the descriptors: {one_of(IMAGENET_BACKBONES)} (the COCO detector: "
        "--descriptor detector).",
        rich_help_panel=DESCRIPTORS,
    ),
]
WeightsOption = Annotated[
    Optional[Path],
    typer.Option(
        "--weights",
        metavar="FILE",
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
        metavar="N|native",
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
        help="Descriptors per cell of a ROWSxCOLS grid, pooled from one pass; 'none': whole frame.",
        rich_help_panel=LOCALISED,
    ),
]
GRID_DEFAULT = _grid_text(defaults.GRID)
ZonesFileOption = Annotated[
    Optional[Path],
    typer.Option(
        "--zones",
        metavar="FILE",
        help="Count inside the zones of this TOML or JSON file too (density-head models; see README, Zones).",
        show_default=False,
        rich_help_panel=LOCALISED,
    ),
]
ZoneOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--zone",
        metavar="NAME:x1,y1,...",
        help="A zone to count inside: a polygon in pixels, or in fractions of the frame when every "
        "coordinate is 0-1 (or ends in %). Repeatable.",
        show_default=False,
        rich_help_panel=LOCALISED,
    ),
]


def zones_option(zones_file: Path | None, zone_texts: list[str] | None) -> list[Any]:
    """The zones of ``--zones`` and ``--zone`` together (counting.apply.zones.Zone); a malformed
    zone or file is one line naming it (a ZoneError, a CountingError)."""
    from counting.apply.zones import combined_zones

    return combined_zones(zones_file, zone_texts)


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
    "sum:MAPS / mean:MAPS (feature maps block0..block15, final, summed over the ROI), then "
    ",perspective (weighted by the dataset's map) and ,levels=1+2 (per cell of 1x1, 2x2 grids); "
    "e.g. sum:block10+final,levels=1+2; detector / detector-letterbox: per-class counts of the COCO "
    "detector fed the photo stretched / with its aspect kept. One pass per image."
)
_DESCRIPTOR_METAVAR = "SPEC"
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
        help="Fit a density head on mid-level feature maps to the head dots (Mall, ShanghaiTech, UCSD; "
        "VOC: one per class, to the boxes); the regressor corrects its sums over the ROI and each --grid "
        "cell, and count/video/report can draw its density map.",
        rich_help_panel=HEADS,
    ),
]
HeadKindOption = Annotated[
    str,
    typer.Option(
        "--head-kind",
        **choice(defaults.DENSITY_KINDS),
        help="ridge or rff (closed form, stride 16) or conv (small torch networks at stride 8, one per "
        "quarter of the train images left out, their densities averaged); the regressor learns from "
        "out-of-fold sums.",
        rich_help_panel=HEADS,
    ),
]


HeadLayersOption = Annotated[
    Optional[str],
    typer.Option(
        "--head-layers",
        metavar="LIST",
        help="The backbone maps the head reads (default: block7,block10 for ridge and rff, "
        "block4,block7,block10 for conv).",
        show_default=False,
        rich_help_panel=HEADS,
    ),
]
LayoutOption = Annotated[
    Optional[str],
    typer.Option(
        "--layout",
        **choice(LAYOUTS),
        help="Regressor rows with a --grid: tiles (per-cell counts), tiles+frame (plus whole frames as the "
        "average cell), pyramid (frame and cells concatenated, one row per frame). Default: frame, or "
        "tiles with a grid.",
        show_default=False,
        rich_help_panel=LOCALISED,
    ),
]

# -- regressor ----------------------------------------------------------------------------
KernelOption = Annotated[
    str,
    typer.Option("--kernel", **choice(KERNELS), help=f"AGP kernel kind: {one_of(KERNELS)}.", rich_help_panel=REGRESSOR),
]
CentersOption = Annotated[
    int,
    typer.Option(
        "--centers",
        min=1,
        metavar="N",
        help="AGP centres (and the sparse GP's inducing points).",
        rich_help_panel=REGRESSOR,
    ),
]
CalibrationOption = Annotated[
    str,
    typer.Option(
        "--calibration",
        **choice(defaults.CALIBRATION_MODES),
        help="Interval calibration: cv (out-of-fold predictions, model fitted on all images), a hold-out "
        "(tail: last frames, blocks: runs of frames, random), none; auto = cv.",
        rich_help_panel=REGRESSOR,
    ),
]
SeedOption = Annotated[
    int, typer.Option("--seed", metavar="N", help="Seed for every random choice.", rich_help_panel=REGRESSOR)
]
TargetTransformOption = Annotated[
    str,
    typer.Option(
        "--target-transform",
        **choice(TARGET_TRANSFORMS),
        help=f"Fit the regressor to transformed counts ({one_of(TARGET_TRANSFORMS)}; log = log1p; one row per "
        "image), predict counts.",
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
        metavar="X",
        help="Per-class models: list a class in the table when its count reaches this (files get every class; "
        "default 0.5). A single-count model refuses it.",
        show_default=False,
    ),
]

# -- run: shared by every command that computes descriptors -------------------------------
CacheDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--cache-dir",
        metavar="DIR",
        help="Feature cache folder (default $COUNTING_CACHE_DIR, else ~/.cache/counting/features for train, "
        "features and compare; count, evaluate and report cache only when given one; video frames never).",
        show_default=False,
        rich_help_panel=RUN,
    ),
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Neither read nor write the feature cache.", rich_help_panel=RUN)
]
BATCH_SIZE_HELP = "Images per forward pass."
BatchSizeOption = Annotated[
    int, typer.Option("--batch-size", min=1, metavar="N", help=BATCH_SIZE_HELP, rich_help_panel=RUN)
]
# video: frames, not images, and a smaller default (defaults.VIDEO_BATCH_SIZE): each frame waits
# for its batch, so a batch is latency.
VideoBatchSizeOption = Annotated[
    int,
    typer.Option(
        "--batch-size",
        min=1,
        metavar="N",
        help="Frames per forward pass (more: faster, more latency).",
        rich_help_panel=RUN,
    ),
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
        metavar="N",
        help="Threads for the forward pass; default: every available core.",
        show_default=False,
        rich_help_panel=RUN,
    ),
]
# On by default: the bars themselves show only when stderr is a terminal (counting.features.extract
# and the other progress bars ask counting.core.terminal.on_terminal), so a pipe or a log file never
# gets one, FORCE_COLOR or not.
PROGRESS_DEFAULT = True
ProgressOption = Annotated[
    bool,
    typer.Option(
        "--progress/--no-progress",
        help="Progress bar on stderr, shown when stderr is a terminal (never in a pipe or a log file).",
        rich_help_panel=RUN,
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No progress bar and no informational lines; results, warnings and errors are still printed.",
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


CLUSTER_FORMS = "local:N (N worker processes here) or a scheduler address such as tcp://HOST:8786"
# What --cluster runs in each command (the forms it accepts are the same everywhere).
CLUSTER_EXTRACTION = (
    f"Extract the descriptors on a Dask cluster: {CLUSTER_FORMS}. Same descriptors, in the same order, as without it."
)
CLUSTER_COUNTING = (
    f"Count the pictures on a Dask cluster, a part of them per task (any model): {CLUSTER_FORMS}. "
    "Same records, in the same order, as without it."
)
CLUSTER_STREAMS = (
    f"Count the streams of --sources on a Dask cluster, one task per stream: {CLUSTER_FORMS} "
    "(default: local:N, a worker per stream up to the cores here)."
)


def cluster_option(what: str) -> typer.models.OptionInfo:
    """``--cluster``: one name and parser; ``what`` says what this command runs on the cluster."""
    return typer.Option(
        "--cluster",
        parser=parse_cluster_option,
        metavar="local:N|ADDRESS",
        help=what,
        show_default=False,
        rich_help_panel=RUN,
    )


ClusterOption = Annotated[Optional[str], cluster_option(CLUSTER_EXTRACTION)]
# evaluate and report: the test pictures counted on the cluster, any model kind.
CountingClusterOption = Annotated[Optional[str], cluster_option(CLUSTER_COUNTING)]
SourcesOption = Annotated[
    Optional[Path],
    typer.Option(
        "--sources",
        metavar="FILE",
        help="Count many streams at once: a file listing one source per line; one task and one counts "
        "file per stream (in --counts-dir), on --cluster.",
        show_default=False,
        dir_okay=False,
        rich_help_panel=RUN,
    ),
]
CountsDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--counts-dir",
        metavar="DIR",
        help="With --sources: folder for the per-stream counts files (default SOURCES_STEM-counts/).",
        show_default=False,
        file_okay=False,
        rich_help_panel=OUTPUT,
    ),
]

# -- results: --csv, --json, --jsonl wherever results are written --------------------------
OUTPUT_OPTIONS = ("--csv", "--json", "--jsonl")


def csv_option(what: str) -> typer.models.OptionInfo:
    """``--csv FILE``: ``what`` this command writes as CSV."""
    return typer.Option("--csv", metavar="FILE", help=what, show_default=False, rich_help_panel=OUTPUT)


def json_option(what: str) -> typer.models.OptionInfo:
    """``--json FILE``: ``what`` this command writes as one JSON document."""
    return typer.Option("--json", metavar="FILE", help=what, show_default=False, rich_help_panel=OUTPUT)


def jsonl_option(what: str) -> typer.models.OptionInfo:
    """``--jsonl FILE``: ``what`` this command streams as JSON lines (one record per line)."""
    return typer.Option("--jsonl", metavar="FILE", help=what, show_default=False, rich_help_panel=OUTPUT)


JsonOption = Annotated[Optional[Path], json_option("Write the results as JSON to this file.")]


def deprecated_alias(*names: str, instead: str) -> typer.models.OptionInfo:
    """A former spelling of an option, kept so that existing scripts still run: hidden from
    --help, and it prints one warning line on stderr naming the option that replaces it."""

    def warn(value: Any) -> Any:
        if value is not None:
            print_warning(f"{names[0]} is deprecated and will be removed; use {instead}")
        return value

    return typer.Option(*names, hidden=True, callback=warn, show_default=False)


def retired_flag(name: str, note: str) -> typer.models.OptionInfo:
    """A flag whose behaviour became the default, kept so that existing scripts still run: hidden
    from --help; given, it changes nothing and prints one warning line on stderr (``note``)."""

    def warn(value: bool) -> bool:
        if value:
            print_warning(f"{name} is deprecated and will be removed: {note}")
        return value

    return typer.Option(name, hidden=True, callback=warn, show_default=False)


# -- unreadable input: one behaviour in count, features and video ---------------------------
# A picture that cannot be read (or a frame that cannot be decoded) is skipped with one line on
# stderr and the rest are processed; --strict makes it an error (exit 1). Was: count always
# skipped, features stopped unless --skip-bad, video stopped unless --ignore-errors (those two
# spellings stay as retired flags).
SKIPPED_BY_DEFAULT = (
    "unreadable pictures and frames are skipped by default (a line each on stderr); --strict makes them an error"
)


def strict_option(what: str) -> typer.models.OptionInfo:
    """``--strict``: ``what`` this command does when a picture or frame cannot be read."""
    return typer.Option("--strict", help=what, rich_help_panel=RUN)


def alias_or_option(new: Path | None, old: Path | None, new_name: str, old_name: str) -> Path | None:
    """The file of an option or of its deprecated alias; both at once is a usage error."""
    if new is not None and old is not None:
        raise typer.BadParameter(f"{old_name} is the old spelling of {new_name}: give one of them", param_hint=old_name)
    return new if new is not None else old


def out_option(what: str, folder: bool = False) -> typer.models.OptionInfo:
    """``-o/--out``: where the command writes its main output (``what``): a model file, a report
    or comparison folder, a descriptors file. Tables of results use --csv/--json/--jsonl."""
    return typer.Option(
        "--out",
        "-o",
        metavar="DIR" if folder else "FILE",
        help=what,
        show_default=not folder or None,
        file_okay=not folder,
        rich_help_panel=OUTPUT,
    )


# -- smoothing ----------------------------------------------------------------------------
# One default everywhere: defaults.SMOOTHING_WINDOW (5). On Mall it lowers the error of both
# filters (docs/accuracy.md): the centred mean of the sequence figures (validation MAE 1.91 raw,
# 1.77 at 5, 1.73 at 3) and video's causal filter (out-of-fold MAE 3.66 raw, 3.51 at 5, 3.48 at 9).
SMOOTH_DEFAULT = defaults.SMOOTHING_WINDOW
SmoothOption = Annotated[
    int,
    typer.Option(
        "--smooth",
        min=1,
        metavar="N",
        help=f"Temporal smoothing over N frames (1 = off). Default {SMOOTH_DEFAULT}: on Mall it lowers the error "
        "both of the centred mean that evaluate, report and compare score on sequences and of video's "
        "causal filter (frames <= t) (docs/accuracy.md).",
    ),
]

# -- train --------------------------------------------------------------------------------


EpochsOption = Annotated[
    Optional[int],
    typer.Option(
        "--epochs",
        min=1,
        metavar="N",
        help=f"Maximum training epochs of the AGP regressor (default {DEFAULT_MAX_EPOCHS}, AGPRegressor's max_epochs).",
        show_default=False,
        rich_help_panel=REGRESSOR,
    ),
]
