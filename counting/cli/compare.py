"""`counting compare`: every method on the same features and split, beside the published figures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from counting.cli.common import (
    check_smoothing,
    console,
    feature_cache,
    informational,
    option_given,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    short_note,
    use_runtime,
)
from counting.cli.option_groups import with_groups
from counting.cli.options import (
    DATA,
    DETECTOR_BACKBONES,
    GRID_DEFAULT,
    INPUT_SIZE_DEFAULT,
    PROGRESS_DEFAULT,
    REGRESSOR,
    SMOOTH_DEFAULT,
    BackboneOption,
    CacheDirOption,
    CentersOption,
    DatasetOption,
    DescriptorsOption,
    GateOption,
    GridOption,
    InputSizeOption,
    NoCacheOption,
    ProgressOption,
    QuietOption,
    RoiOption,
    RootOption,
    RuntimeOption,
    SeedOption,
    SmoothOption,
    SplitOption,
    TargetTransformOption,
    ThreadsOption,
    detector_spelling,
    out_option,
)
from counting.core import defaults
from counting.core.files import printable
from counting.evaluate.peers.registry import (
    DEFAULT_METHODS,
    DEFAULT_TILED_METHODS,
    FEATURE_PEERS,
    IMAGE_PEERS,
    check_methods,
)

if TYPE_CHECKING:
    from counting.evaluate.comparison import ComparisonData, MethodResult

# compare's own options (no other command takes them).
MethodsOption = Annotated[
    str,
    typer.Option(
        metavar="LIST",
        help=f"Comma-separated methods on whole frames ({', '.join([*FEATURE_PEERS, *IMAGE_PEERS])}); "
        "per-class counts (voc): train-mean, always-0, the feature methods and NAME-per-class. "
        "Default: every one that applies.",
        rich_help_panel=REGRESSOR,
    ),
]
TiledMethodsOption = Annotated[
    str,
    typer.Option(
        metavar="LIST",
        help="Comma-separated feature methods also run on the tiles of --grid (exact GP: concatenated cells only).",
        rich_help_panel=REGRESSOR,
    ),
]
HogTrainImagesOption = Annotated[
    int,
    typer.Option(
        help="Training images the HOG calibration line is fitted on (spread evenly).",
        min=2,
        metavar="N",
        rich_help_panel=REGRESSOR,
    ),
]
ModelFilesOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--model",
        "-m",
        metavar="FILE",
        help="A trained model file (from `counting train`, e.g. a conv density head) to count the same "
        "test images with, as one more row; repeat for several. A model trained on any of them is refused.",
        exists=True,
        dir_okay=False,
        readable=True,
        rich_help_panel=DATA,
    ),
]
ComparisonFolderOption = Annotated[Path, out_option("Folder for compare-DATASET.csv / .json / .md.", folder=True)]


@dataclass(frozen=True)
class ComparedMethods:
    """Which methods a comparison runs and how they are fitted (compare's options, in their order)."""

    methods: MethodsOption = ""
    tiled_methods: TiledMethodsOption = ",".join(DEFAULT_TILED_METHODS)
    centers: CentersOption = defaults.N_CENTERS
    target_transform: TargetTransformOption = "none"
    gate: GateOption = False
    smooth: SmoothOption = SMOOTH_DEFAULT
    hog_train_images: HogTrainImagesOption = 150

    @property
    def names(self) -> list[str]:
        return _names(self.methods)

    @property
    def tiled_names(self) -> list[str]:
        return _names(self.tiled_methods)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def results_table(data, results, published, sequence: bool) -> Table:
    """One rich table: our rows (measured) then the published ones."""
    title = (
        f"{data.dataset} · split {data.split} · {len(data.train_counts)} train / {len(data.test_counts)} test · "
        f"{data.settings['backbone']} @ {data.settings['input_size'] or 'native'}"
        f"{' · ROI' if data.settings['roi'] else ''}"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("method")
    table.add_column("features")
    for name in (
        ["MAE", "MSE", "RMSE"] + (["MAE smoothed", "RMSE smoothed"] if sequence else []) + ["fit s", "predict s"]
    ):
        table.add_column(name, justify="right")
    table.add_column("source", overflow="fold")  # the whole citation: a narrow terminal folds it
    best = min((r.metrics["mae"] for r in results if r.status == "ok"), default=None)
    reasons = []
    for result in results:
        if result.status != "ok":
            blanks = ["—"] * (4 if sequence else 2)
            note, cut = short_note(result.note, 60)
            table.add_row(result.label, result.features, f"[yellow]{result.status}[/]", note, *blanks, "—", "measured")
            if cut:
                reasons.append(f"{escape(result.label)} ({escape(result.features)}): {escape(result.note)}")
            continue
        metrics = result.metrics
        mae = _fmt(metrics["mae"])
        if best is not None and metrics["mae"] == best:
            mae = f"[bold green]{mae}[/]"
        cells = [mae, _fmt(metrics["mse"]), _fmt(metrics["rmse"])]
        if sequence:
            cells += [_fmt(metrics.get("smoothed_mae")), _fmt(metrics.get("smoothed_rmse"))]
        cells += [_fmt(result.fit_seconds), _fmt(result.predict_seconds, 3)]
        table.add_row(result.label, result.features, *cells, "measured")
    for row in published:
        cells = [_fmt(row.get("mae")), _fmt(row.get("mse")), _fmt(row.get("rmse"))]
        cells += ["—"] * (4 if sequence else 2)
        table.add_row(f"[dim]{row['method']}[/]", "[dim]published[/]", *cells, f"[dim]{escape(row['source'])}[/]")
    # A reason cut to fit its cell is given whole below the table (and in the CSV and JSON).
    table.caption = "\n".join(reasons) or None
    table.caption_justify = "left"
    return table


def _detector_spelling(backbone: str, descriptors: list[str] | None) -> tuple[str, list[str] | None]:
    """``--backbone centernet``: the detector's rows, as ``--descriptor detector`` gives them."""
    if backbone not in DETECTOR_BACKBONES:
        return backbone, descriptors
    backbone, meant = detector_spelling(backbone, "scores")
    given = list(descriptors or [])
    return backbone, given if meant in given else [*given, meant]


@with_groups
def compare(
    dataset: DatasetOption,
    root: RootOption,
    split: SplitOption = None,
    backbone: BackboneOption = defaults.BACKBONE,
    input_size: InputSizeOption = INPUT_SIZE_DEFAULT,
    grid: GridOption = GRID_DEFAULT,
    roi: RoiOption = True,
    descriptor: DescriptorsOption = None,
    chosen: ComparedMethods = ComparedMethods(),
    model: ModelFilesOption = None,
    seed: SeedOption = defaults.SEED,
    out: ComparisonFolderOption = Path("."),
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = False,
    progress: ProgressOption = PROGRESS_DEFAULT,
    quiet: QuietOption = False,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
) -> None:
    """Run ridge, exact and sparse GPs, the paper's AGP variants and the HOG detector on the same
    features and split; print one table with MAE / MSE / RMSE and fit / predict times beside the
    published figures, and write it as CSV, JSON and Markdown.

    Default split: mall 'train=1-600,test=601-800', shanghaitech and voc 'random:0.25:0', else 'standard'.
    `--grid ROWSxCOLS` (e.g. 3x3) adds the tiled rows: --tiled-methods on per-cell descriptors.
    `--model FILE` adds rows for trained models (density heads take minutes per head to train, so
    `counting train` makes them): each counts the test images and is scored like the methods.
    Per-class counts (voc): baselines and every regressor on whole-frame descriptors, scored with
    mRMSE / m-relRMSE (and their non-zero variants), beside the published VOC-2007 rows.
    """
    backbone, descriptor = _detector_spelling(backbone, descriptor)
    use_runtime(runtime, threads)
    say = informational(quiet)
    progress = progress and not quiet
    _refuse_an_empty_list(chosen.methods)
    check_smoothing(dataset, chosen.smooth)
    chosen = replace(chosen, methods=_methods_to_run(dataset, chosen))
    grid = None if dataset == "voc" else grid  # whole-frame descriptors: tiles need per-tile counts
    from counting.evaluate.comparison import load_comparison_data, published_rows, write_comparison

    cache = feature_cache(cache_dir, not no_cache)
    _refuse_outputs_on_inputs(out, dataset, model, root, cache, cache_dir)
    models = _read_models(model, dataset)
    data = load_comparison_data(
        dataset,
        root,
        split=split,
        backbone=backbone,
        input_size=input_size,
        grid=grid,
        use_roi=roi,
        cache=cache,
        descriptors=descriptor or (),
        progress=progress,
    )
    _check_models_count_what(models, data)
    if data.train_counts.ndim != 1:
        from counting.cli.multiclass_output import compare_per_class

        compare_per_class(
            data, dataset, root, chosen.methods, chosen.centers, seed, chosen.target_transform, chosen.gate, out,
            models, cache, progress=progress, say=say,
        )  # fmt: skip
        return
    announce = _announcer(say)
    results = _run_methods(data, chosen, seed, announce)
    window = chosen.smooth if data.is_sequence else 0
    for path, loaded in models:
        say(f"counting the {len(data.test_paths)} test images with {escape(printable(str(path)))}")
        result = _model_row(data, path, loaded, results, cache, window, Path(root), progress)
        announce(result)
        results.append(result)
    paths = write_comparison(data, results, out)
    console.print(results_table(data, results, published_rows(data.dataset), data.is_sequence))
    say("wrote " + ", ".join(escape(printable(str(path))) for path in paths.values()))


def _refuse_an_empty_list(methods: str) -> None:
    """``--methods ,`` would run no method and say nothing."""
    if methods.strip() and not _names(methods):
        raise typer.BadParameter(f"{methods!r} names no method", param_hint="'--methods'")


def _methods_to_run(dataset: str, chosen: ComparedMethods) -> str:
    """``--methods`` or the dataset's default list, every name checked before the methods'
    libraries are imported."""
    if dataset != "voc":
        methods = chosen.methods or ",".join(DEFAULT_METHODS)
        check_methods(_names(methods), chosen.tiled_names)
        return methods
    if option_given("grid") or option_given("tiled_methods"):  # were dropped in silence
        raise typer.BadParameter("voc has no per-tile counts to fit tiles on: leave out --grid and --tiled-methods")
    from counting.evaluate.comparison.voc import DEFAULT_VOC_METHODS, check_voc_methods

    methods = chosen.methods or ",".join(DEFAULT_VOC_METHODS)
    check_voc_methods(_names(methods))
    return methods


def _refuse_outputs_on_inputs(
    out: Path, dataset: str, model_files: list[Path] | None, root: Path, cache: Any, cache_dir: Path | None
) -> None:
    """The three tables are refused on an input (a model file, the data, the cache), and an
    interrupt says which of them were written."""
    refuse_outputs_on_inputs(
        [out, *(out / f"compare-{dataset}.{suffix}" for suffix in ("csv", "json", "md"))],
        inputs=list(model_files or ()),
        data_root=root,
        cache=cache,
        cache_dir=cache_dir,
    )
    say_outputs_on_interrupt([out / f"compare-{dataset}.csv"], cache)


def _read_models(model_files: list[Path] | None, dataset: str) -> list[tuple[Path, Any]]:
    """Every ``--model`` file read and checked before any work: a bad one wastes none."""
    if not model_files:
        return []
    from counting.evaluate.comparison.models import load_models

    return load_models(model_files, dataset)


def _check_models_count_what(models: list[tuple[Path, Any]], data: ComparisonData) -> None:
    """The models' classes against the dataset's, before any method runs."""
    if models:
        from counting.evaluate.comparison.models import check_models

        check_models(models, data)


def _announcer(say: Callable[..., None]) -> Callable[[MethodResult], None]:
    """One line per finished row, as the rows come: a comparison runs for minutes."""

    def announce(result: MethodResult) -> None:
        shown = _fmt(result.metrics.get("mae")) if result.status == "ok" else result.status
        say(f"  {result.label} · {result.features}: MAE {shown}")

    return announce


def _run_methods(
    data: ComparisonData, chosen: ComparedMethods, seed: int, announce: Callable[[MethodResult], None]
) -> list[MethodResult]:
    """Every method's row on the data's whole frames (and tiles, with a grid)."""
    from counting.evaluate.comparison import run_comparison

    return run_comparison(
        data,
        methods=chosen.names,
        tiled_methods=chosen.tiled_names,
        n_centers=chosen.centers,
        seed=seed,
        smoothing_window=chosen.smooth,
        max_hog_train_images=chosen.hog_train_images,
        on_result=announce,
    )


def _model_row(
    data: ComparisonData,
    path: Path,
    loaded: Any,
    results: list[MethodResult],
    cache: Any,
    window: int,
    root: Path,
    progress: bool,
) -> MethodResult:
    """A model's row: it counts the test images, scored like the methods."""
    from counting.evaluate.comparison.models import run_model

    result = run_model(data, path, cache=cache, window=window, root=root, progress=progress, model=loaded)
    # Rows are keyed by label, predictions by method and features: two files alike get their paths.
    if any(other.label == result.label for other in results):
        result.label = f"model {path}"
    if any((other.method, other.features) == (result.method, result.features) for other in results):
        result.features = f"{result.features} ({path})"
    return result
