"""`counting train`: fit a counting model on a dataset's train split, or build one from a recipe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from counting.apply.distributed.session import ClusterExtraction
from counting.cli.common import (
    console,
    feature_cache,
    informational,
    on_interrupt,
    open_dataset,
    option_given,
    refuse_outputs_on_inputs,
    use_runtime,
)
from counting.cli.option_groups import PictureRun, with_groups
from counting.cli.options import ClusterOption, detector_spelling, out_option
from counting.cli.train_options import (
    RECIPE_OPTIONS,
    DensityChoice,
    DescriptorChoice,
    RecipeOption,
    RegressorChoice,
    TrainDatasetOption,
    TrainingSplit,
    TrainRootOption,
)
from counting.core.errors import TrainingError
from counting.core.files import printable

if TYPE_CHECKING:
    from counting.model.counting_model import CountingModel
    from counting.train.pipeline import TrainingConfig
    from counting.train.recipe import Recipe


def print_figures(rows: list[tuple[str, dict]]) -> None:
    """One table: a row per evaluation (held-out train images, test split), a column per metric."""
    rows = [(label, figures) for label, figures in rows if figures]
    if not rows:
        return
    keys = [k for k in ("mae", "mse", "rmse", "mrmse", "m_rel_rmse", "mrmse_nz", "m_rel_rmse_nz") if k in rows[0][1]]
    names = {"mae": "MAE", "mse": "MSE", "rmse": "RMSE", "mrmse": "mRMSE", "m_rel_rmse": "m-relRMSE"}
    names |= {"mrmse_nz": "mRMSE-nz", "m_rel_rmse_nz": "m-relRMSE-nz"}
    table = Table(title="Figures", title_justify="left")
    table.add_column("images")
    for key in keys:
        table.add_column(names[key], justify="right")
    for label, figures in rows:
        table.add_row(label, *("–" if figures.get(key) is None else f"{figures[key]:.3f}" for key in keys))
    console.print(table)


@dataclass(frozen=True)
class TrainingPlan:
    """What one run trains: the dataset and its folder, the settings, whether it is evaluated,
    and the recipe it follows (None: the options)."""

    dataset: str
    root: Path
    split: str
    counts_csv: Path | None
    include_difficult: bool
    config: TrainingConfig | None  # None: a recipe whose steps make the model themselves (crowd)
    evaluate: bool
    weights: Path | None = None
    recipe: Recipe | None = None
    trained_on: str | None = None


def _head_layers(text: str | None) -> tuple[str, ...] | None:
    """The maps ``--head-layers`` names (None: not given, the head kind's default). A list that
    names none (``,``) is refused: read as not given, it trained the default layers in silence."""
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise TrainingError(f"--head-layers {text!r} names no layer: give LAYER,... (e.g. block7,block10)")
    return names


def _check_density_options_given(density_head: bool) -> None:
    """Refuse ``--head-kind`` or ``--head-layers`` typed without ``--density-head``, whatever their
    value: ``--head-kind ridge`` (the default kind) asks for a density head as much as ``conv`` does,
    and the model trained would have none. Only the command line can tell typed from left out
    (click's parameter source); the settings' own check (``heads.kinds.check_head_choice``)
    covers the Python API."""
    if density_head:
        return
    typed = [
        flag for flag, name in (("--head-kind", "head_kind"), ("--head-layers", "head_layers")) if option_given(name)
    ]
    if typed:
        verb = "choose" if len(typed) > 1 else "chooses"
        raise TrainingError(f"{' and '.join(typed)} {verb} the density head: add --density-head")


def _missing(context: typer.Context, name: str) -> None:
    """Click's own "Missing option" usage error (exit code 2), for -d and -r without --recipe."""
    try:  # typer 0.29 runs commands on a click of its own (typer._click), earlier ones on click
        from typer._click.exceptions import MissingParameter
    except ImportError:
        from click.exceptions import MissingParameter  # type: ignore[assignment,no-redef]

    parameter = next(param for param in context.command.params if param.name == name)
    raise MissingParameter(ctx=context, param=parameter)


def _config(
    descriptors: DescriptorChoice, density: DensityChoice, regressor: RegressorChoice, batch_size: int
) -> TrainingConfig:
    """The training settings the options give."""
    from counting.train.pipeline import TrainingConfig

    backbone, descriptor = detector_spelling(descriptors.backbone, descriptors.descriptor)  # centernet: the detector
    return TrainingConfig(
        backbone=backbone,
        weights=None if descriptors.weights is None else str(descriptors.weights),
        input_size=descriptors.input_size,
        grid=descriptors.grid,
        layout=descriptors.layout,
        whole_frame_rows=descriptors.whole_frame_rows,
        use_roi=descriptors.roi,
        kernel=regressor.kernel,
        n_centers=regressor.centers,
        n_validation=regressor.validation,
        max_epochs=regressor.epochs,
        interval_level=regressor.interval_level,
        calibration=regressor.calibration,
        seed=regressor.seed,
        batch_size=batch_size,
        descriptor=descriptor,
        target_transform=regressor.target_transform,
        gate=regressor.gate,
        flip_average=descriptors.flip_average,
        density_head=density.density_head,
        density_kind=density.head_kind,
        density_layers=_head_layers(density.head_layers),
    )


def _options_plan(
    context: typer.Context,
    dataset: str | None,
    root: Path | None,
    data: TrainingSplit,
    choices: tuple[DescriptorChoice, DensityChoice, RegressorChoice],
    batch_size: int,
) -> TrainingPlan:
    """The run the options ask for (no recipe)."""
    from counting.heads.kinds import check_head_choice

    for name, value in (("dataset", dataset), ("root", root)):
        if value is None:
            _missing(context, name)
    descriptors, density, regressor = choices
    config = _config(descriptors, density, regressor, batch_size)
    _check_density_options_given(density.density_head)
    check_head_choice(config)  # a mistake in the options is said before the dataset loads
    return TrainingPlan(
        dataset,
        root,
        data.split,
        data.counts_csv,
        data.include_difficult,
        config,
        regressor.evaluate,
        weights=descriptors.weights,
    )


def _recipe_plan(context: typer.Context, path: Path, batch_size: int) -> TrainingPlan:
    """The run a recipe describes; an option it sets itself, given beside it, is refused."""
    from counting.train.recipe import read_recipe

    given = [param for param in context.command.params if param.name in RECIPE_OPTIONS and option_given(param.name)]
    if given:
        flag = max(given[0].opts, key=len)
        raise TrainingError(f"{path}: the recipe sets {flag} itself; leave out {flag} (or train without --recipe)")
    recipe = read_recipe(path)
    config = recipe.settings.get("train")
    data, root = recipe.data, recipe.data_root()
    return TrainingPlan(
        data.dataset,
        root,
        data.split,
        None if data.counts_csv is None else root / data.counts_csv,
        data.include_difficult,
        None if config is None else replace(config, batch_size=batch_size),
        "evaluate" in recipe.steps,
        weights=None if config is None or config.weights is None else Path(config.weights),
        recipe=recipe,
        trained_on=data.trained_on,
    )


def _fitted(
    plan: TrainingPlan, run: PictureRun, cache: Any, say: Callable[..., None], extract: Any
) -> tuple[CountingModel, Any]:
    """The model the plan trains (the recipe's steps, or counting train's pipeline), before any
    evaluation, and the dataset it was trained on (None: a recipe's steps read their own)."""
    if plan.config is None:
        from counting.train.recipe_steps import run_crowd_recipe

        return run_crowd_recipe(plan.recipe, cache=cache, progress=run.shows_progress, log=say), None
    from counting.train.pipeline import train_model

    data = open_dataset(plan.dataset, plan.root, plan.split, plan.counts_csv, plan.include_difficult)
    parts = data.describe()["splits"]
    say(
        f"[bold]{data.name}[/] at {escape(printable(str(data.root)))} (split {escape(str(plan.split))}): "
        + ", ".join(f"{part} {info.get('n')} images" for part, info in parts.items()),
        soft_wrap=True,
    )
    model = train_model(
        data, plan.config, cache=cache, progress=run.shows_progress, log=say, split=plan.split, extract=extract
    )
    if model.training.get("best_epoch") is not None:
        say(f"best epoch on the regressor's validation rows: {model.training['best_epoch']}")
    return model, data


def _scored(model: CountingModel, data: Any, plan: TrainingPlan, run: PictureRun, cache: Any, extract: Any) -> list:
    """The figures' rows: the held-out train figures, then (evaluate) the test split's, stored in the model."""
    from counting.evaluate.evaluation import evaluate_model

    held = "out-of-fold" if str(model.dataset.get("calibration")).startswith("cv") else "held out"
    rows = [(f"{model.dataset.get('n_calibration')} train, {held}", model.validation_metrics)]
    if not plan.evaluate or data is None or not len(data.subset("test")):
        return rows
    result = evaluate_model(
        model,
        data.subset("test"),
        cache=cache,
        weights=plan.weights,
        batch_size=run.batch_size,
        progress=run.shows_progress,
        split=plan.split,
        extract=extract,
    )
    model.test_metrics = result.to_dict()
    rows.append((f"{result.metrics.get('n')} test, per frame", result.metrics))
    if result.sequence_metrics is not None:
        rows.append((f"{result.metrics.get('n')} test, smoothed ({result.smoothing_window})", result.sequence_metrics))
    return rows


def _print_interval(model: CountingModel) -> None:
    if model.interval is None:
        return
    where = " on the test split" if model.test_metrics.get("interval") else ""
    interval = model.test_metrics.get("interval") or {}
    coverage = (
        f": coverage {interval['coverage']:.1%}, mean width {interval['mean_width']:.2f}{where}" if interval else ""
    )
    console.print(
        f"count interval: {model.interval.level:.0%} split conformal ({model.interval.scale} scale){coverage}"
    )


def _recorded(model: CountingModel, plan: TrainingPlan) -> None:
    """The recipe the model was built by, and where its pictures come from, in its metadata."""
    if plan.trained_on is not None:
        model.dataset["trained_on"] = plan.trained_on
    if plan.recipe is not None:
        model.training["recipe"] = plan.recipe.record()


def _saved(model: CountingModel, out: Path, loss_png: Path | None, saved: list, say: Callable[..., None]) -> None:
    """Write the model (atomically), then its loss curve beside it."""
    from counting.evaluate.plots import plot_loss

    path = model.save(out)
    saved.append(path)
    if loss_png is not None and model.history.get("train_loss"):  # a device (/dev/null) has no "beside"
        plot_loss(model.history, loss_png, model.training.get("best_epoch"))
        say(f"loss curve: {escape(printable(str(loss_png)))}")
    size = f" ({path.stat().st_size / 1024:.0f} KB)" if loss_png is not None else ""
    say(f"[green]model saved:[/] {escape(printable(str(path)))}{size}")


@with_groups
def train(
    context: typer.Context,
    *,  # keyword-only: the required --out may follow -d and -r, which a recipe replaces
    dataset: TrainDatasetOption = None,
    root: TrainRootOption = None,
    out: Annotated[Path, out_option("Model file to write (.npz).")],
    recipe: RecipeOption = None,
    data: TrainingSplit = TrainingSplit(),
    descriptors: DescriptorChoice = DescriptorChoice(),
    density: DensityChoice = DensityChoice(),
    regressor: RegressorChoice = RegressorChoice(),
    run: PictureRun = PictureRun(),
    cluster: ClusterOption = None,
) -> None:
    """Train a counting model (AGP on CNN descriptors) on a dataset's train split.

    Prints the loss per epoch, saves the model and its loss curve (MODEL_STEM.loss.png) beside it.
    --recipe recipes/NAME.toml builds a shipped model from its recipe (data, settings and steps).
    """
    from counting.core.files import check_writable, special_kind

    use_runtime(run.runtime, run.threads)
    say = informational(run.quiet)
    check_writable(out)  # before training: the model must have somewhere to go
    loss_png = None if special_kind(out) else out.with_name(f"{out.stem}.loss.png")
    cache = feature_cache(run.cache_dir, not run.no_cache)
    if recipe is not None:
        plan = _recipe_plan(context, recipe, run.batch_size)
    else:
        plan = _options_plan(context, dataset, root, data, (descriptors, density, regressor), run.batch_size)
    if cluster is not None and plan.config is None:  # was dropped in silence: the steps train here
        raise TrainingError(f"{recipe}: the crowd recipe's steps train on this machine: leave out --cluster")
    refuse_outputs_on_inputs(
        [out, loss_png],
        inputs=[plan.counts_csv, plan.weights, recipe],
        data_root=plan.root,
        cache=cache,
        cache_dir=run.cache_dir,
    )
    existed, saved = out.exists(), []
    on_interrupt(lambda: _kept_after_interrupt(out, existed, bool(saved), cache))
    extract = ClusterExtraction(cluster) if cluster is not None else None
    model, opened = _fitted(plan, run, cache, say, extract)
    figure_rows = _scored(model, opened, plan, run, cache, extract)
    if extract is not None:
        extract.close()
    _recorded(model, plan)
    print_figures(figure_rows)
    _print_interval(model)
    _saved(model, out, loss_png, saved, say)


def _kept_after_interrupt(out: Path, existed: bool, saved: bool, cache: Any) -> str:
    """What a Ctrl-C kept, in one line: the model file is written whole or not at all."""
    if saved:
        return f"model saved to {out}; its loss curve was not written"
    previous = f"{out} is unchanged" if existed else f"{out} was not created"
    cached = "; the descriptors computed so far are in the feature cache" if cache is not None and cache.enabled else ""
    return f"no model written ({previous}){cached}"
