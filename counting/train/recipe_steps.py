"""The crowd model's recipe steps, run in order: the steps the scripts ran one after another.

``train-crowd`` (the general heads, counting.train.crowd.train_crowd_model), ``familiarize``
(the score on several sets' train parts, counting.train.several_sets), ``gate`` (the sparse gate,
fit_crowd_gate), ``specialists`` (a head per set and the router, add_specialists) and
``zero-floor`` (counting.train.zero_floor). Between steps the model and the out-of-fold rows go
through files, as they went between the scripts (a model saved and read again; the rows with the
six decimals their CSV keeps), so the recipe builds the model the scripts built.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from counting.model.counting_model import CountingModel
from counting.train.crowd import (
    CrowdSettings,
    GateOutOfFold,
    add_specialists,
    fit_crowd_gate,
    read_gate_out_of_fold,
    read_out_of_fold,
    train_crowd_model,
    write_gate_out_of_fold,
    write_out_of_fold,
)
from counting.train.recipe import Recipe, shared_data_root
from counting.train.several_sets import DatasetPart, familiarize_on_several
from counting.train.zero_floor import calibrate_zero_floor

__all__ = ["CrowdRun", "run_crowd_recipe"]


@dataclass
class CrowdRun:
    """What the steps share: the recipe, the cache, where the files between steps go."""

    recipe: Recipe
    work: Path
    cache: Any = None
    progress: bool = False
    log: Callable[[str], None] | None = None

    @property
    def data(self) -> Path:
        return self.recipe.data_root()

    @property
    def model_file(self) -> Path:
        return self.work / "model.npz"

    @property
    def heads_out_of_fold(self) -> Path:
        return self.work / "heads-out-of-fold.csv"

    @property
    def gate_out_of_fold(self) -> Path:
        return self.work / "gate-out-of-fold.csv"

    def model(self) -> CountingModel:
        return CountingModel.load(self.model_file)

    def crowd(self, sets: tuple[str, ...] | None = None) -> Any:
        from counting.data import read_crowd

        return read_crowd(self.data, sets=sets)

    def say(self, line: str) -> None:
        if self.log is not None:
            self.log(line)


def run_crowd_recipe(
    recipe: Recipe, *, cache: Any = None, progress: bool = False, log: Callable[[str], None] | None = None
) -> CountingModel:
    """The model ``recipe`` (first step ``train-crowd``) builds, its steps run in order."""
    with tempfile.TemporaryDirectory(prefix="counting-recipe-") as work:
        run = CrowdRun(recipe, Path(work), cache=cache, progress=progress, log=log)
        for step in recipe.steps:
            run.say(f"recipe {recipe.name}: step {step}")
            STEPS[step](run, recipe.settings.get(step))
        return run.model()


def train_heads(run: CrowdRun, settings: CrowdSettings) -> None:
    out_of_fold: dict = {}
    model = train_crowd_model(
        run.crowd(), settings, cache=run.cache, progress=run.progress, log=run.log, out_of_fold=out_of_fold
    )
    model.save(run.model_file)
    write_out_of_fold(run.heads_out_of_fold, out_of_fold)


def familiarize(run: CrowdRun, settings: Any) -> None:
    root = shared_data_root(run.recipe.path)
    parts = [DatasetPart(member.dataset, root / member.root, member.split) for member in settings.data]
    model = run.model()
    # Without the feature cache, as scripts/familiarize_several.py fitted the shipped model's score.
    familiarize_on_several(model, parts, cache=None, flag_rate=settings.flag_rate, log=run.log)
    model.save(run.model_file)


def fit_gate(run: CrowdRun, settings: Any) -> None:
    found = GateOutOfFold()
    gated = fit_crowd_gate(
        replace(run.model(), sparse_gate=None),
        run.crowd(),
        CrowdSettings(gate_copies=settings.gate_copies, gate_copy_family=settings.gate_copy_family, seed=settings.seed),
        cache=run.cache,
        log=run.log,
        out_of_fold=read_out_of_fold(run.heads_out_of_fold),
        gate_out_of_fold=found,
    )
    gated.save(run.model_file)
    write_gate_out_of_fold(run.gate_out_of_fold, found)


def train_specialists(run: CrowdRun, settings: Any) -> None:
    crowd_settings = CrowdSettings(
        steps=settings.steps, seed=settings.seed, gray_share=settings.gray_share, degraded_share=settings.degraded_share
    )
    gate_found = read_gate_out_of_fold(run.gate_out_of_fold) if run.gate_out_of_fold.exists() else None
    routed = add_specialists(
        run.model(),
        run.crowd(),
        settings.sets,
        crowd_settings,
        cache=run.cache,
        progress=run.progress,
        log=run.log,
        folds=settings.folds,
        out_of_fold=read_out_of_fold(run.heads_out_of_fold),
        gate_out_of_fold=gate_found,
    )
    routed.save(run.model_file)


def floor_zero_routes(run: CrowdRun, settings: Any) -> None:
    found = calibrate_zero_floor(
        run.model(),
        run.crowd(settings.sets),
        settings.sets,
        cache=run.cache,
        command=f"counting train --recipe recipes/{run.recipe.path.name}",
        log=run.log,
    )
    if found is None:
        run.say("no interval route with a zero quantile: no floor")
        return
    found.model.save(run.model_file)
    run.say(
        f"routes {', '.join(found.model.training['zero_interval_floor']['routes'])} get a high end of at least {found.floor:g}"
    )


STEPS: dict[str, Callable[[CrowdRun, Any], None]] = {
    "train-crowd": train_heads,
    "familiarize": familiarize,
    "gate": fit_gate,
    "specialists": train_specialists,
    "zero-floor": floor_zero_routes,
}
