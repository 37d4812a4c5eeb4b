"""A recipe: one TOML file that names the data, the settings and the steps that build a model.

``counting train --recipe recipes/crowd.toml -o crowd.npz`` rebuilds a shipped model from the
shared data and an empty cache, in place of commands and scripts run in order. The file::

    description = "what the model is"
    steps = ["train", "evaluate"]          # in order; see STEP_TABLES

    [data]                                 # the model's dataset, its root relative to the shared data
    dataset = "mall"
    root = "mall-train"
    split = "train=1-600,test=601-800"

    [train]                                # the step's settings (here TrainingConfig's fields)
    use_roi = false

This module reads and checks a recipe: every bad value, missing table or unknown key is one line
naming the file and the key, before any work. :mod:`counting.train.recipe_steps` runs it. The
shared data is ``$COUNTING_SHARED_DATA``, else ``../shared/data`` beside the checkout that holds
the recipe (the tests' convention, ``tests/conftest.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from counting.core import defaults
from counting.core.errors import TrainingError
from counting.train.crowd import COPY_FAMILIES, CrowdSettings
from counting.train.pipeline import TrainingConfig

__all__ = [
    "CROWD_DATASET",
    "FamiliaritySet",
    "Recipe",
    "RecipeData",
    "SpecialistSettings",
    "ZeroFloorSettings",
    "GateSettings",
    "read_recipe",
    "shared_data_root",
]

# The dataset name of the general crowd model's four shared sets (counting.data.read_crowd).
CROWD_DATASET = "crowd"
# What the settings of a recipe decide, beside the steps: these keys only.
TOP_KEYS = ("description", "steps", "data")


@dataclass(frozen=True)
class RecipeData:
    """The data a recipe trains on: a dataset reader, its folder under the shared data, its split."""

    dataset: str
    root: str
    split: str = "standard"
    counts_csv: str | None = None
    include_difficult: bool = False
    # Recorded in the model's dataset section (where the pictures come from, in words).
    trained_on: str | None = None


@dataclass(frozen=True)
class FamiliaritySet:
    """One dataset whose train part the familiarity score is fitted on."""

    dataset: str
    root: str
    split: str = "standard"


@dataclass(frozen=True)
class FamiliaritySettings:
    """The ``familiarize`` step: the score fitted on the train parts of several datasets."""

    data: tuple[FamiliaritySet, ...] = ()
    flag_rate: float = 0.01


@dataclass(frozen=True)
class GateSettings:
    """The ``gate`` step: the crowd model's sparse gate (counting.train.crowd.fit_crowd_gate)."""

    gate_copies: int = CrowdSettings.gate_copies
    gate_copy_family: str = CrowdSettings.gate_copy_family
    seed: int = 0


@dataclass(frozen=True)
class SpecialistSettings:
    """The ``specialists`` step: a head per set and the router (counting.train.crowd.add_specialists)."""

    sets: tuple[str, ...] = ("shanghaitech-B",)
    folds: int = 1
    steps: int = CrowdSettings.steps
    seed: int = 0
    gray_share: float = 0.25
    degraded_share: float = 0.25


@dataclass(frozen=True)
class ZeroFloorSettings:
    """The ``zero-floor`` step: a high end for zero-width routes (counting.train.zero_floor)."""

    sets: tuple[str, ...] = ("coco-voc20",)


# Each step and the table of settings it reads (None: it has none).
STEP_TABLES: dict[str, type | None] = {
    "train": TrainingConfig,
    "evaluate": None,
    "train-crowd": CrowdSettings,
    "familiarize": FamiliaritySettings,
    "gate": GateSettings,
    "specialists": SpecialistSettings,
    "zero-floor": ZeroFloorSettings,
}
# The steps that make a model from nothing: a recipe starts with one of them, and has one.
FIRST_STEPS = ("train", "train-crowd")
# The crowd model's steps, in the order each needs the ones before (a recipe may leave some out).
CROWD_ORDER = ("train-crowd", "familiarize", "gate", "specialists", "zero-floor")
# Values a recipe spells as words where the setting is None.
NATIVE_SIZE = "native"


@dataclass(frozen=True)
class Recipe:
    """A checked recipe: where it is, its text's digest, its data, and each step's settings."""

    path: Path
    sha256: str  # of the file's bytes, as sha256sum prints it
    description: str
    data: RecipeData
    steps: tuple[str, ...]
    settings: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.stem

    def record(self) -> dict:
        """What the model file keeps of the recipe it was built by (``training.recipe``)."""
        return {"name": self.name, "sha256": self.sha256}

    def data_root(self) -> Path:
        """The recipe's data folder; TrainingError naming the recipe, ``data.root`` and where it
        was looked for when it is not there (before any work)."""
        shared = shared_data_root(self.path)
        root = shared / self.data.root
        if not root.is_dir():
            raise TrainingError(
                f"{self.path}: data.root {self.data.root!r}: no folder {root} (the shared data is "
                f"$COUNTING_SHARED_DATA, else {shared}: set it to the folder holding the shared sets)"
            )
        return root


def shared_data_root(recipe_path: Path) -> Path:
    """``$COUNTING_SHARED_DATA``, else ``../shared/data`` beside the checkout: the one holding the
    recipe when it lies in a checkout's ``recipes/`` folder, else the one counting runs from."""
    given = os.environ.get("COUNTING_SHARED_DATA")
    if given:
        return Path(given).expanduser().resolve()
    folder = recipe_path.resolve().parent
    checkout = folder.parent if folder.name == "recipes" else Path(__file__).resolve().parents[2]
    return checkout.parent / "shared" / "data"


def read_recipe(path: Path | str) -> Recipe:
    """The recipe at ``path``, checked: TrainingError (one line naming the file and the key)
    for a file that cannot be read, is not TOML, or holds a bad value or an unknown key."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TrainingError(f"{path}: cannot read the recipe ({getattr(error, 'strerror', None) or error})") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise TrainingError(f"{path}: not a TOML recipe ({error})") from None
    where = _Where(path)
    steps = _checked_steps(document, where)
    _refuse_unknown(document, (*TOP_KEYS, *(name for name in steps if STEP_TABLES[name])), where, "")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise where.error("description", "expected a string")
    data = _checked_data(document, where, steps)
    settings = {name: _step_settings(name, document, where) for name in steps if STEP_TABLES[name] is not None}
    return Recipe(path, hashlib.sha256(raw).hexdigest(), description, data, steps, settings)


class _Where:
    """Names a place in the recipe for an error line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, key: str, problem: str) -> TrainingError:
        return TrainingError(f"{self.path}: {key}: {problem}")


def _checked_steps(document: dict, where: _Where) -> tuple[str, ...]:
    steps = document.get("steps")
    if steps is None:
        raise where.error("steps", 'missing: list the steps in order, e.g. steps = ["train", "evaluate"]')
    if not isinstance(steps, list) or not steps or not all(isinstance(step, str) for step in steps):
        raise where.error("steps", "expected a list of step names")
    unknown = [step for step in steps if step not in STEP_TABLES]
    if unknown:
        raise where.error("steps", f"unknown step {unknown[0]!r} (steps: {', '.join(STEP_TABLES)})")
    if len(set(steps)) != len(steps):
        raise where.error("steps", "a step is named twice")
    if steps[0] not in FIRST_STEPS or sum(step in FIRST_STEPS for step in steps) != 1:
        raise where.error("steps", f"the first step, and only it, makes the model: one of {', '.join(FIRST_STEPS)}")
    crowd_only = [step for step in steps if step not in ("train", "evaluate")]
    if steps[0] == "train" and crowd_only:
        raise where.error("steps", f"step {crowd_only[0]!r} works on the crowd model (first step train-crowd)")
    if steps[0] == "train-crowd" and "evaluate" in steps:
        raise where.error("steps", "the crowd model is scored on its sets' validation parts, not by evaluate")
    if steps[0] == "train-crowd" and steps != [step for step in CROWD_ORDER if step in steps]:
        raise where.error("steps", f"the crowd steps go in this order: {', '.join(CROWD_ORDER)}")
    if "gate" in steps and "familiarize" not in steps:  # the gate reads each picture's familiarity
        raise where.error("steps", "the gate step needs the familiarize step before it")
    return tuple(steps)


def _refuse_unknown(table: dict, known: tuple[str, ...], where: _Where, prefix: str) -> None:
    unknown = [key for key in table if key not in known]
    if unknown:
        raise where.error(f"{prefix}{unknown[0]}", f"unknown key (known here: {', '.join(known)})")


def _checked_data(document: dict, where: _Where, steps: tuple[str, ...]) -> RecipeData:
    table = document.get("data")
    if not isinstance(table, dict):
        raise where.error("data", "missing table [data] (dataset, root, split)")
    data = _dataclass_from(RecipeData, table, where, "data.")
    names = (CROWD_DATASET,) if steps[0] == "train-crowd" else defaults.DATASETS
    if data.dataset not in names:
        raise where.error("data.dataset", f"{data.dataset!r} is not one of {', '.join(names)}")
    _check_relative(data.root, where, "data.root")
    return data


def _check_relative(root: str, where: _Where, key: str) -> None:
    """A root is a folder under the shared data: a recipe names no machine's own paths."""
    if Path(root).is_absolute() or root.startswith("~") or ".." in Path(root).parts:
        raise where.error(key, f"{root!r}: give a folder relative to the shared data ($COUNTING_SHARED_DATA)")


def _step_settings(name: str, document: dict, where: _Where) -> Any:
    kind = STEP_TABLES[name]
    table = document.get(name, {})
    if not isinstance(table, dict):
        raise where.error(name, "expected a table of settings")
    if name == "train" and "batch_size" in table:  # how many pictures a pass takes: the run's choice
        raise where.error(f"{name}.batch_size", "a run option, not a setting of the model: give --batch-size")
    settings = _dataclass_from(kind, table, where, f"{name}.")
    if isinstance(settings, TrainingConfig) and not settings.density_head:
        chosen = [key for key in ("density_kind", "density_layers") if key in table]
        if chosen:  # as --head-kind without --density-head: the model would have no head
            raise where.error(f"{name}.{chosen[0]}", "chooses the density head: add density_head = true")
    if isinstance(settings, GateSettings) and settings.gate_copy_family not in COPY_FAMILIES:
        raise where.error(f"{name}.gate_copy_family", f"expected one of {', '.join(COPY_FAMILIES)}")
    if isinstance(settings, FamiliaritySettings):
        for position, member in enumerate(settings.data):
            _check_relative(member.root, where, f"{name}.data[{position}].root")
    return settings


def _dataclass_from(kind: type, table: dict, where: _Where, prefix: str) -> Any:
    """``kind`` built from ``table``: each key a field, each value of the field's type."""
    fields = {field.name: field for field in dataclasses.fields(kind)}
    _refuse_unknown(table, tuple(fields), where, prefix)
    hints = typing.get_type_hints(kind)
    values = {key: _coerce(value, hints[key], where, f"{prefix}{key}") for key, value in table.items()}
    missing = [
        name
        for name, field in fields.items()
        if name not in values and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING  # type: ignore[misc]
    ]
    if missing:
        raise where.error(f"{prefix}{missing[0]}", "missing")
    try:
        return kind(**values)
    except (ValueError, TypeError) as error:  # the settings' own checks (CrowdSettings.__post_init__)
        raise where.error(prefix.rstrip("."), str(error).splitlines()[0]) from None


def _coerce(value: Any, hint: Any, where: _Where, key: str) -> Any:
    """``value`` (as TOML read it) as the type ``hint`` names, or one line saying what was expected."""
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        kinds = [argument for argument in arguments if argument is not type(None)]
        if value == NATIVE_SIZE and key.endswith("input_size"):
            return None  # the picture's own size, as --input-size native
        return _coerce(value, kinds[0], where, key)
    if origin is tuple:
        return _coerce_tuple(value, arguments, where, key)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise where.error(key, "expected a table")
        return _dataclass_from(hint, value, where, f"{key}.")
    expected = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint in expected and type(value) is hint:
        return value
    raise where.error(key, f"expected {expected.get(hint, hint)}, got {value!r:.60}")


def _coerce_tuple(value: Any, arguments: tuple, where: _Where, key: str) -> tuple:
    if isinstance(value, dict) and len(arguments) == 2 and arguments[1] is Ellipsis:
        value = [list(item) for item in value.items()]  # shares = { mall = 0.5 }: (name, share) pairs in order
    if not isinstance(value, list):
        raise where.error(key, f"expected a list, got {value!r:.60}")
    if len(arguments) == 2 and arguments[1] is Ellipsis:
        return tuple(_coerce(item, arguments[0], where, f"{key}[{k}]") for k, item in enumerate(value))
    if len(value) != len(arguments):
        raise where.error(key, f"expected {len(arguments)} values, got {len(value)}")
    return tuple(_coerce(item, kind, where, f"{key}[{k}]") for k, (item, kind) in enumerate(zip(value, arguments)))
