"""One recipe per shipped model (recipes/NAME.toml, run by `counting train --recipe`).

Each recipe must hold the settings its shipped model records (`training`, `dataset`, the crowd
model's steps), so that running it rebuilds that model; a bad recipe is one line naming the file
and the key; `--recipe` refuses the options it sets itself; a model built by a recipe records it
(name and the sha256 of its text) and equals the model the same options train.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from counting.cli.app import app
from counting.core.errors import TrainingError
from counting.model.counting_model import load_model
from counting.train.crowd import CrowdSettings
from counting.train.recipe import read_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
TRAINED = ("default", "mall-sums", "mall-accurate", "voc20")
# What the shipped files record of the settings a recipe decides (the rest: figures, sizes, seconds).
SETTING_KEYS = (
    "backbone",
    "weights",
    "input_size",
    "grid",
    "layout",
    "whole_frame_rows",
    "use_roi",
    "kernel",
    "n_centers",
    "n_validation",
    "max_epochs",
    "interval_level",
    "calibration",
    "calibration_fraction",
    "min_calibration",
    "seed",
    "batch_size",
    "descriptor",
    "target_transform",
    "gate",
    "flip_average",
    "density_head",
    "density_kind",
    "density_layers",
)


def test_every_shipped_model_has_a_recipe() -> None:
    shipped = {path.stem for path in (ROOT / "models").glob("*.npz")}
    assert shipped == {path.stem for path in RECIPES.glob("*.toml")}


@pytest.mark.parametrize("name", TRAINED)
def test_a_recipe_holds_its_shipped_model_settings(name: str) -> None:
    recipe = read_recipe(RECIPES / f"{name}.toml")
    model = load_model(ROOT / "models" / f"{name}.npz")
    record = recipe.settings["train"].record()
    compared = [key for key in SETTING_KEYS if key in model.training]
    # Older files record fewer keys (mall-sums has no density_head): the ones every file has.
    assert {"backbone", "input_size", "grid", "use_roi", "kernel", "n_centers", "seed"} <= set(compared)
    assert {key: record[key] for key in compared} == {key: model.training[key] for key in compared}
    assert model.dataset["name"] == recipe.data.dataset
    assert model.dataset["split"] == recipe.data.split
    assert Path(model.dataset["root"]).parts[-len(Path(recipe.data.root).parts) :] == Path(recipe.data.root).parts
    assert model.dataset.get("trained_on") == recipe.data.trained_on
    assert (model.descriptor is None) == (record["descriptor"] == "scores")


def test_the_crowd_recipe_holds_the_crowd_model_steps_and_settings() -> None:
    recipe = read_recipe(RECIPES / "crowd.toml")
    model = load_model(ROOT / "models" / "crowd.npz")
    assert recipe.steps == ("train-crowd", "familiarize", "gate", "specialists", "zero-floor")
    heads = recipe.settings["train-crowd"].record()
    recorded = {key: value for key, value in model.training["crowd"].items() if key != "seconds"}
    assert set(recorded) <= set(heads)
    assert {key: heads[key] for key in recorded} == recorded
    assert model.dataset["name"] == recipe.data.dataset == "crowd" and model.dataset["split"] == recipe.data.split

    parts = model.familiarity.settings["trained_on"].split(" + ")
    familiar = recipe.settings["familiarize"]
    assert [(part.split(":", 2)[0], part.split(":", 2)[2]) for part in parts] == [
        (member.dataset, member.split) for member in familiar.data
    ]
    assert [Path(part.split(":", 2)[1]).name for part in parts] == [Path(member.root).name for member in familiar.data]
    assert model.familiarity.settings["flag_rate"] == familiar.flag_rate

    gate = recipe.settings["gate"]
    assert model.sparse_gate.settings["copies"] == gate.gate_copies
    assert model.sparse_gate.settings["copy_family"] == gate.gate_copy_family

    specialists = recipe.settings["specialists"]
    assert model.training["specialists"]["sets"] == list(specialists.sets)
    assert model.training["specialists"]["folds"] == specialists.folds
    for name in specialists.sets:
        trained = model.density_head.specialists[name].settings["training"]
        assert (trained["max_steps"], trained["seed"], trained["folds"]) == (
            specialists.steps,
            specialists.seed,
            specialists.folds,
        )
        assert (trained["gray_share"], trained["degraded_share"]) == (
            specialists.gray_share,
            specialists.degraded_share,
        )
    floor = model.training["zero_interval_floor"]["measured_on"]
    assert floor.startswith(f"validation parts of {', '.join(recipe.settings['zero-floor'].sets)} ")


def _recipe(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


GOOD = 'steps = ["train"]\n[data]\ndataset = "mall"\nroot = "mall-train"\n'


def test_a_recipe_whose_data_is_not_there_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Was: "<shared>/no-such-set: folder not found" from the reader, naming neither the recipe nor
    # data.root, and for a recipe outside a checkout's recipes/ the shared data three folders up.
    monkeypatch.delenv("COUNTING_SHARED_DATA", raising=False)
    path = _recipe(tmp_path, GOOD.replace('"mall-train"', '"no-such-set"'))
    out = tmp_path / "model.npz"
    out.write_bytes(b"before")
    result = CliRunner().invoke(app, ["train", "--recipe", str(path), "-o", str(out)])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    checkout = Path(__file__).resolve().parents[2]
    assert line.startswith(f"error: {path}: data.root 'no-such-set': no folder {checkout.parent / 'shared' / 'data'}")
    assert "$COUNTING_SHARED_DATA" in line and out.read_bytes() == b"before"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (GOOD + '[train]\nn_centers = "many"\n', "train.n_centers: expected an integer"),
        (GOOD + "[train]\ncentres = 25\n", "train.centres: unknown key"),
        (GOOD + "[train]\ngrid = [2]\n", "train.grid: expected 2 values"),
        (GOOD + "[train]\nbatch_size = 8\n", "train.batch_size: a run option"),
        (
            GOOD + '[train]\ndensity_kind = "conv"\n',
            "train.density_kind: chooses the density head: add density_head = true",
        ),
        (GOOD + "colour = 1\n", "colour: unknown key"),
        (GOOD.replace('"mall-train"', '"/data/mall"'), "data.root: '/data/mall': give a folder relative"),
        (GOOD.replace('"mall-train"', '"../../etc"'), "data.root: '../../etc': give a folder relative"),
        (GOOD.replace('"mall"', '"crowd"', 1), "data.dataset: 'crowd' is not one of"),
        (GOOD.replace('["train"]', '["evaluate"]'), "steps: the first step, and only it, makes the model"),
        (GOOD.replace('["train"]', '["train", "gate"]'), "steps: step 'gate' works on the crowd model"),
        (GOOD.replace('["train"]', '["train", "bake"]'), "steps: unknown step 'bake'"),
        (
            'steps = ["train-crowd", "gate", "familiarize"]\n[data]\ndataset = "crowd"\nroot = "."\n',
            "steps: the crowd steps go in this order: train-crowd, familiarize, gate, specialists, zero-floor",
        ),
        (
            'steps = ["train-crowd", "gate"]\n[data]\ndataset = "crowd"\nroot = "."\n',
            "steps: the gate step needs the familiarize step before it",
        ),
        ('steps = ["train"]\n', "data: missing table [data]"),
        (GOOD.replace('root = "mall-train"\n', ""), "data.root: missing"),
        (GOOD + "[train\n", "not a TOML recipe"),
        (
            'steps = ["train-crowd"]\n[data]\ndataset = "crowd"\nroot = "."\n[train-crowd]\nsampling = "random"\n'
            "gate_copies = 2\n",
            "train-crowd: gate_copies 2: expected 0 or 1",
        ),
    ],
)
def test_a_bad_recipe_is_one_line_naming_the_file_and_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = _recipe(tmp_path, text)
    with pytest.raises(TrainingError) as raised:
        read_recipe(path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert key in message, message


def test_train_refuses_a_bad_recipe_in_one_line_and_keeps_the_model_file(tmp_path: Path) -> None:
    out = tmp_path / "model.npz"
    out.write_bytes(b"before")
    path = _recipe(tmp_path, GOOD + "[train]\nkernel = 3\n")
    result = CliRunner().invoke(app, ["train", "--recipe", str(path), "-o", str(out)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"error: {path}: train.kernel: expected a string, got 3"]
    assert out.read_bytes() == b"before"


@pytest.mark.parametrize(
    ("given", "flag"), [(["-d", "mall"], "--dataset"), (["--centers", "9"], "--centers"), (["--no-roi"], "--roi")]
)
def test_train_refuses_an_option_the_recipe_sets_itself(tmp_path: Path, given: list[str], flag: str) -> None:
    recipe = RECIPES / "default.toml"
    result = CliRunner().invoke(app, ["train", "--recipe", str(recipe), "-o", str(tmp_path / "m.npz"), *given])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [f"error: {recipe}: the recipe sets {flag} itself; leave out {flag} (or train without --recipe)"]
    assert not (tmp_path / "m.npz").exists()


def test_the_crowd_recipe_refuses_a_cluster_it_would_not_use(tmp_path: Path) -> None:
    recipe = RECIPES / "crowd.toml"
    result = CliRunner().invoke(
        app, ["train", "--recipe", str(recipe), "-o", str(tmp_path / "m.npz"), "--cluster", "local:2"]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {recipe}: the crowd recipe's steps train on this machine: leave out --cluster"
    ]


def test_train_without_recipe_still_needs_its_dataset(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "-o", str(tmp_path / "m.npz"), "-r", str(tmp_path)])
    assert result.exit_code == 2
    assert "Missing option '--dataset' / '-d'" in result.output


SMALL = """steps = ["train", "evaluate"]
[data]
dataset = "mall"
root = "mall-train"
split = "train=1-40,test=41-50"
[train]
input_size = 112
n_centers = 8
max_epochs = 4
"""


def test_a_recipe_trains_the_model_its_options_train_and_is_recorded(
    tmp_path: Path, shared_data: Path, mall_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTING_SHARED_DATA", str(shared_data))
    recipe = tmp_path / "small.toml"
    recipe.write_text(SMALL)
    cache = ["--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    runner = CliRunner()
    built = runner.invoke(app, ["train", "--recipe", str(recipe), "-o", str(tmp_path / "recipe.npz"), *cache])
    assert built.exit_code == 0, built.output
    options = ["-d", "mall", "-r", str(mall_root), "--split", "train=1-40,test=41-50", "--input-size", "112"]
    options += ["--centers", "8", "--epochs", "4", "-o", str(tmp_path / "options.npz")]
    trained = runner.invoke(app, ["train", *options, *cache])
    assert trained.exit_code == 0, trained.output

    from_recipe, from_options = load_model(tmp_path / "recipe.npz"), load_model(tmp_path / "options.npz")
    assert from_recipe.training["recipe"] == {"name": "small", "sha256": hashlib.sha256(SMALL.encode()).hexdigest()}
    assert "recipe" not in from_options.training
    assert from_recipe.dataset == from_options.dataset
    assert {key: value for key, value in from_recipe.training.items() if key != "recipe"} == from_options.training
    assert from_recipe.test_metrics["per_frame"] == from_options.test_metrics["per_frame"]
    frames = [str(path) for path in sorted((mall_root / "frames").glob("*.jpg"))[40:44]]
    counted = [model.count_paths(frames, cache=None) for model in (from_recipe, from_options)]
    np.testing.assert_array_equal(counted[0].counts, counted[1].counts)
    assert (tmp_path / "recipe.loss.png").exists()


def test_crowd_settings_defaults_are_what_the_recipe_spells_out() -> None:
    """The crowd recipe names every setting (the shipped model's), not just the ones off the defaults."""
    heads = read_recipe(RECIPES / "crowd.toml").settings["train-crowd"]
    assert heads == CrowdSettings(degraded_share=0.25)


SMALL_CROWD_DATA = '[data]\ndataset = "crowd"\nroot = "."\n'
# Each step's table (a recipe holds the tables of its own steps only).
SMALL_CROWD_STEPS = {
    "train-crowd": "input_size = 128\nsteps = 10\nfolds = 2\n",
    "familiarize": '[[familiarize.data]]\ndataset = "mall"\nroot = "mall-train"\nsplit = "train=1-30,test=31-40"\n',
    "gate": "gate_copies = 0\n",
    "specialists": 'sets = ["shanghaitech-B"]\nfolds = 2\nsteps = 10\ngray_share = 0.0\ndegraded_share = 0.0\n',
    "zero-floor": 'sets = ["coco-voc20"]\n',
}


def small_crowd_recipe(steps: list[str]) -> str:
    tables = "".join(f"[{step}]\n{SMALL_CROWD_STEPS[step]}" for step in steps)
    return f"steps = {steps!r}\n".replace("'", '"') + SMALL_CROWD_DATA + tables


@pytest.fixture(scope="module")
def few_crowd_pictures(shared_data: Path):
    """ShanghaiTech B and coco-voc20 pictures of the crowd reader, one in 12 (train) or 25 (validation)."""
    from dataclasses import replace

    from counting.data import read_crowd

    whole = read_crowd(shared_data, sets=("shanghaitech-B", "coco-voc20"))
    train = [sample for sample in whole.samples if sample.split == "train"]
    test = [sample for sample in whole.samples if sample.split == "test"]
    return replace(whole, samples=train[::12] + test[::25])


def _run_small_crowd(steps: list[str], few, folder: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch):
    from dataclasses import replace

    from counting.features import FeatureCache
    from counting.train import recipe_steps

    def small_crowd(run, sets=None):  # the same reader's pictures, fewer of them
        return (
            few if sets is None else replace(few, samples=[s for s in few.samples if few.sources[str(s.path)] in sets])
        )

    monkeypatch.setattr(recipe_steps.CrowdRun, "crowd", small_crowd)
    monkeypatch.setenv("COUNTING_SHARED_DATA", str(shared_data))
    path = folder / "small-crowd.toml"
    path.write_text(small_crowd_recipe(steps))
    lines: list[str] = []
    cache = FeatureCache(folder.parent / "cache")  # the maps of the module's two runs
    model = recipe_steps.run_crowd_recipe(read_recipe(path), cache=cache, log=lines.append)
    assert [line for line in lines if line.startswith("recipe ")] == [f"recipe small-crowd: step {s}" for s in steps]
    assert model.input_size == 128 and model.training["crowd"]["folds"] == 2
    return model


@pytest.mark.slow  # small trainings, the detector on the gate's pictures
def test_the_crowd_steps_heads_familiarity_gate_and_floor_run_in_order(
    tmp_path: Path, shared_data: Path, few_crowd_pictures, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step works on what the one before wrote (a model file, the out-of-fold CSVs)."""
    steps = ["train-crowd", "familiarize", "gate", "zero-floor"]
    model = _run_small_crowd(steps, few_crowd_pictures, tmp_path, shared_data, monkeypatch)
    assert model.familiarity.settings["trained_on"] == f"mall:{shared_data / 'mall-train'}:train=1-30,test=31-40"
    assert model.sparse_gate is not None and model.sparse_gate.settings["copies"] == 0
    assert model.training["sparse_gate"]["copies"] == 0


@pytest.mark.slow  # small trainings
def test_the_crowd_steps_heads_and_specialists_run_in_order(
    tmp_path: Path, shared_data: Path, few_crowd_pictures, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _run_small_crowd(["train-crowd", "specialists"], few_crowd_pictures, tmp_path, shared_data, monkeypatch)
    assert list(model.density_head.specialists) == ["shanghaitech-B"]
    assert model.training["specialists"]["sets"] == ["shanghaitech-B"]
    assert model.density_head.specialists["shanghaitech-B"].settings["training"]["max_steps"] == 10
