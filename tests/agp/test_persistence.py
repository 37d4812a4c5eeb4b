"""One-file .npz + JSON persistence: exact round trip, no pickle, clear errors."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from agp import AGPRegressor


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    return X, np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])


@pytest.mark.parametrize("kind", ["center", "univariate", "diagonal", "lowrank", "full"])
def test_round_trip_gives_identical_predictions(tmp_path, data, kind: str) -> None:
    X, Y = data
    model = AGPRegressor(kernel=kind, n_centers=8, validation_fraction=30, rank=2, max_epochs=3, random_state=0).fit(
        X, Y
    )
    path = tmp_path / "model.agp"  # any name: save writes exactly this path
    model.save(path)
    loaded = AGPRegressor.load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params() == {**model.get_params(), "callback": None}
    assert loaded.history_ == model.history_ and loaded.best_epoch_ == model.best_epoch_
    np.testing.assert_array_equal(loaded.validation_indices_, model.validation_indices_)
    np.testing.assert_array_equal(loaded.centers_, model.centers_)
    assert loaded.metadata_ == {}


def test_single_output_stays_one_dimensional(tmp_path, data) -> None:
    X, Y = data
    model = AGPRegressor(n_centers=8, validation_fraction=30, max_epochs=2, random_state=0).fit(X, Y[:, 0])
    model.save(tmp_path / "m.npz")
    assert AGPRegressor.load(tmp_path / "m.npz").predict(X[:5]).shape == (5,)


def test_metadata_round_trips_exactly_and_file_has_no_pickle(tmp_path, data) -> None:
    X, Y = data
    model = AGPRegressor(kernel="center", n_centers=8, validation_fraction=30, random_state=0).fit(X, Y)
    metadata = {
        "kind": "counting-model",
        "version": 1,
        "nested": {"list": [1, 2.5, None, "x", [True, False]], "empty": {}},
        "metrics": {"mae": 1.2345678901234567, "rmse": 1e-300},
        "classes": None,
    }
    path = tmp_path / "m.npz"
    model.save(path, metadata=metadata)
    assert AGPRegressor.load(path).metadata_ == metadata
    with np.load(path, allow_pickle=False) as archive:  # would raise if any entry were pickled
        document = json.loads(str(archive["metadata"]))
        assert all(archive[name].dtype != object for name in archive.files)
    assert document["format"] == "agp-model" and document["format_version"] == 3
    assert document["kernel"] == "center" and document["n_features_in"] == 4
    assert document["user_metadata"] == metadata


def test_numpy_scalars_in_metadata_come_back_as_numbers(tmp_path, data) -> None:
    X, Y = data
    model = AGPRegressor(kernel="center", n_centers=8, validation_fraction=30, random_state=0).fit(X, Y)
    model.save(tmp_path / "m.npz", metadata={"mae": np.float64(0.25), "n": np.int64(3)})
    assert AGPRegressor.load(tmp_path / "m.npz").metadata_ == {"mae": 0.25, "n": 3}


@pytest.mark.parametrize(
    "metadata,message", [({"a": object()}, "JSON-serialisable"), ({1: "x"}, "keys must be strings"), ([1], "dict")]
)
def test_unserialisable_metadata_is_rejected(tmp_path, data, metadata, message) -> None:
    X, Y = data
    model = AGPRegressor(kernel="center", n_centers=8, validation_fraction=30, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match=message):
        model.save(tmp_path / "m.npz", metadata=metadata)


def _rewrite_metadata(path, change) -> None:
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    document = json.loads(str(arrays["metadata"]))
    change(document)
    arrays["metadata"] = np.array(json.dumps(document))
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_other_format_or_version_fails_naming_the_file(tmp_path, data) -> None:
    X, Y = data
    model = AGPRegressor(kernel="center", n_centers=8, validation_fraction=30, random_state=0).fit(X, Y)
    newer = tmp_path / "newer.npz"
    model.save(newer)
    _rewrite_metadata(newer, lambda d: d.update(format_version=5))
    with pytest.raises(ValueError, match=r"newer\.npz: agp-model format version 5 is not supported"):
        AGPRegressor.load(newer)

    other = tmp_path / "other.npz"
    model.save(other)
    _rewrite_metadata(other, lambda d: d.update(format="something-else"))
    with pytest.raises(ValueError, match=r"other\.npz: not an agp-model file \(format 'something-else'\)"):
        AGPRegressor.load(other)

    plain = tmp_path / "plain.npz"
    np.savez(plain, weights=np.zeros(3))
    with pytest.raises(ValueError, match=r"plain\.npz: not an agp-model file \(no metadata entry\)"):
        AGPRegressor.load(plain)

    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match=r"notes\.txt: not an agp-model file"):
        AGPRegressor.load(text)

    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, metadata=np.array([{"format": "agp-model"}], dtype=object))
    with pytest.raises(ValueError, match=r"pickled\.npz: not an agp-model file"):
        AGPRegressor.load(pickled)

    with pytest.raises(ValueError, match=r"missing\.npz: no such file"):
        AGPRegressor.load(tmp_path / "missing.npz")
    assert zipfile.is_zipfile(newer)


def test_saving_an_unfitted_model_fails(tmp_path) -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        AGPRegressor().save(tmp_path / "m.npz")


def test_the_shipped_model_loads_and_predicts_by_the_papers_formula() -> None:
    # models/default.npz is a format-2 file (n_validation, log-lengthscales): it must keep its predictions.
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "models" / "default.npz"
    model = AGPRegressor.load(path)
    assert model.validation_fraction == 100 and model.kernel == "univariate"
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files if name != "metadata"}
    np.testing.assert_allclose(model.lengthscales_, np.exp(arrays["param__log_lengthscale"]))
    X = np.random.default_rng(0).normal(size=(20, model.n_features_in_)) * model.x_scale_ + model.x_mean_
    Xs = (X - arrays["x_mean"]) / arrays["x_scale"]
    centers = arrays["centers_standardised"]
    sq = ((Xs[:, None, :] - centers[None]) ** 2).sum(axis=-1)
    expected = (
        np.exp(-0.5 * sq / model.lengthscales_**2) @ arrays["alpha"] + Xs @ arrays["mean_coef"] + arrays["y_mean"]
    )
    np.testing.assert_allclose(model.predict(X), expected[:, 0], rtol=1e-10)


def test_version_2_hyper_parameters_are_mapped(tmp_path, data) -> None:
    X, Y = data
    path = tmp_path / "v2.npz"
    AGPRegressor(kernel="diagonal", n_centers=8, validation_fraction=30, max_epochs=1, random_state=0).fit(X, Y).save(
        path
    )

    def as_version_2(document: dict) -> None:
        hyper = document["hyper_parameters"]
        document["format_version"] = 2
        hyper["n_validation"] = hyper.pop("validation_fraction")
        hyper["kernel"] = "multivariate"  # the version-2 alias of diagonal
        del hyper["warmup_steps"]

    _rewrite_metadata(path, as_version_2)
    loaded = AGPRegressor.load(path)
    assert loaded.validation_fraction == 30 and loaded.kernel == "diagonal" and loaded.precisions_.shape == (8, 4)


def test_state_export_round_trips_without_a_file(data) -> None:
    X, Y = data
    model = AGPRegressor(kernel="lowrank", rank=2, n_centers=8, max_epochs=2, random_state=0).fit(X, Y)
    arrays, document = model.get_state()
    json.dumps(document)  # plain JSON
    clone = AGPRegressor.from_state(arrays, document)
    np.testing.assert_array_equal(clone.predict(X), model.predict(X))
    np.testing.assert_array_equal(clone.precision_factors_, model.precision_factors_)


def test_saving_replaces_the_file_through_a_temporary_name(tmp_path, data) -> None:
    X, Y = data
    model = AGPRegressor(kernel="center", n_centers=8, random_state=0).fit(X, Y)
    path = tmp_path / "m.npz"
    path.write_text("old")
    model.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]
    assert AGPRegressor.load(path).n_features_in_ == 4


def test_persistence_does_not_import_the_estimator() -> None:
    import ast
    from pathlib import Path

    import agp.persistence

    tree = ast.parse(Path(agp.persistence.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(module and module.startswith("agp") for module in imported)
