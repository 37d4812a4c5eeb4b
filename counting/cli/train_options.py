"""`counting train`'s options, as groups (:func:`counting.cli.option_groups.with_groups` spreads
each into the command's signature): the data, the descriptors, the density head and the
regressor. A recipe (``--recipe``) sets every option of these groups, and the dataset and its
folder; :data:`RECIPE_OPTIONS` names them for the refusal of one given beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from counting.cli.options import (
    DATA,
    GRID_DEFAULT,
    INPUT_SIZE_DEFAULT,
    LOCALISED,
    REGRESSOR,
    RUN,
    BackboneOption,
    CalibrationOption,
    CentersOption,
    CountsCsvOption,
    DensityHeadOption,
    DescriptorOption,
    DifficultOption,
    EpochsOption,
    FlipAverageOption,
    GateOption,
    GridOption,
    HeadKindOption,
    HeadLayersOption,
    InputSizeOption,
    KernelOption,
    LayoutOption,
    RoiOption,
    SeedOption,
    SplitOption,
    TargetTransformOption,
    WeightsOption,
    choice,
    one_of,
)
from counting.core import defaults

# -d and -r, optional here: a recipe names them itself.
TrainDatasetOption = Annotated[
    Optional[str],
    typer.Option(
        "--dataset",
        "-d",
        **choice(defaults.DATASETS),
        help=f"Dataset reader: {one_of(defaults.DATASETS)} (needed without --recipe).",
        show_default=False,
        rich_help_panel=DATA,
    ),
]
TrainRootOption = Annotated[
    Optional[Path],
    typer.Option(
        "--root",
        "-r",
        metavar="DIR",
        help="Dataset folder (needed without --recipe).",
        show_default=False,
        file_okay=False,
        rich_help_panel=DATA,
    ),
]
RecipeOption = Annotated[
    Optional[Path],
    typer.Option(
        "--recipe",
        metavar="FILE",
        help="Build a model from a recipe (recipes/NAME.toml: its data under $COUNTING_SHARED_DATA, its settings "
        "and steps); the data, descriptor, head and regressor options are then the recipe's.",
        show_default=False,
        dir_okay=False,
        rich_help_panel=DATA,
    ),
]
WholeFrameRowsOption = Annotated[
    bool, typer.Option(help="With --grid: the same as --layout tiles+frame.", rich_help_panel=LOCALISED)
]
ValidationOption = Annotated[
    Optional[int],
    typer.Option(
        min=1,
        metavar="N",
        help=f"Rows the regressor holds out to pick its best epoch (default {defaults.N_VALIDATION}, fewer "
        "on small sets).",
        show_default=False,
        rich_help_panel=REGRESSOR,
    ),
]
IntervalLevelOption = Annotated[
    float,
    typer.Option(
        min=0.5, max=0.999, metavar="X", help="Nominal coverage of count intervals.", rich_help_panel=REGRESSOR
    ),
]
EvaluateOption = Annotated[
    bool,
    typer.Option(
        help="Evaluate on the test split after training and store the figures in the model.", rich_help_panel=RUN
    ),
]


@dataclass(frozen=True)
class TrainingSplit:
    """Which of the dataset's pictures train and test, and their labels."""

    split: SplitOption = "standard"
    counts_csv: CountsCsvOption = None
    include_difficult: DifficultOption = False


@dataclass(frozen=True)
class DescriptorChoice:
    """How a picture becomes the regressor's inputs: the network, the input size, the cells."""

    backbone: BackboneOption = defaults.BACKBONE
    weights: WeightsOption = None
    input_size: InputSizeOption = INPUT_SIZE_DEFAULT
    grid: GridOption = GRID_DEFAULT
    layout: LayoutOption = None
    descriptor: DescriptorOption = "scores"
    flip_average: FlipAverageOption = False
    whole_frame_rows: WholeFrameRowsOption = defaults.WHOLE_FRAME_ROWS
    roi: RoiOption = True


@dataclass(frozen=True)
class DensityChoice:
    """A density head on the feature maps, its kind and the layers it reads."""

    density_head: DensityHeadOption = False
    head_kind: HeadKindOption = "ridge"
    head_layers: HeadLayersOption = None


@dataclass(frozen=True)
class RegressorChoice:
    """The AGP, its interval, and whether the test split is evaluated after training."""

    kernel: KernelOption = defaults.KERNEL
    centers: CentersOption = defaults.N_CENTERS
    epochs: EpochsOption = None
    validation: ValidationOption = None
    interval_level: IntervalLevelOption = defaults.INTERVAL_LEVEL
    calibration: CalibrationOption = "auto"
    seed: SeedOption = defaults.SEED
    target_transform: TargetTransformOption = "none"
    gate: GateOption = False
    evaluate: EvaluateOption = True


# The parameters a recipe sets itself: given beside --recipe, they are refused.
RECIPE_OPTIONS: tuple[str, ...] = (
    "dataset",
    "root",
    *(
        field.name
        for group in (TrainingSplit, DescriptorChoice, DensityChoice, RegressorChoice)
        for field in dataclasses.fields(group)
    ),
)
