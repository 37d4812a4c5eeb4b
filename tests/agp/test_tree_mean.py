"""The tree mean (``mean="trees"``): boosted trees as plain arrays, the AGP on their residual."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils.estimator_checks import check_estimator

from agp import AGPRegressor, metrics
from agp.estimator import EXPECTED_FAILED_CHECKS
from agp.mean import TreeEnsemble


def _step_plus_oblique_wave(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A step in the last input (trees' strength, an RBF's weakness) plus a smooth wave along the
    diagonal of the other three (axis-aligned trees need many splits for it, a GP does not)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 4))
    return X, 2.0 * (X[:, 3] > 0) + np.sin(1.5 * X[:, :3].sum(axis=1))


@pytest.fixture(scope="module")
def wave_data():
    X, f = _step_plus_oblique_wave(14_000, seed=0)
    y = f + np.random.default_rng(1).normal(scale=0.1, size=len(f))
    return X[:12_000], y[:12_000], X[12_000:], f[12_000:]


def test_the_walk_reproduces_histgradientboosting_predict() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    X[::7, 2] = np.nan  # missing values take each split's learned side
    Y = np.column_stack([np.sin(2 * X[:, 0]) + np.nan_to_num(X[:, 2]), X[:, 1] * X[:, 3]])
    models = [HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(X, Y[:, k]) for k in range(2)]
    trees = TreeEnsemble.from_histgradientboosting(models)
    baseline = np.array([m._baseline_prediction.ravel()[0] for m in models])
    expected = np.column_stack([m.predict(X) for m in models])
    np.testing.assert_allclose(trees(X, 2) + baseline, expected, rtol=0, atol=1e-12)
    assert len(trees.roots) == sum(m.n_iter_ for m in models)
    rebuilt = TreeEnsemble.from_arrays(trees.arrays())
    np.testing.assert_array_equal(rebuilt(X, 2), trees(X, 2))


def test_tree_mean_plus_agp_beats_both_alone(wave_data) -> None:
    X, y, X_test, f_test = wave_data
    settings = {"n_centers": 30, "kernel": "diagonal", "max_epochs": 10, "batch_size": 256, "random_state": 0}
    trees_alone = HistGradientBoostingRegressor(random_state=0).fit(X, y)
    agp_alone = AGPRegressor(mean="linear", **settings).fit(X, y)
    both = AGPRegressor(mean="trees", **settings).fit(X, y)
    errors = {
        "trees": metrics.rmse(f_test, trees_alone.predict(X_test)),
        "agp": metrics.rmse(f_test, agp_alone.predict(X_test)),
        "both": metrics.rmse(f_test, both.predict(X_test)),
    }
    # Measured: trees 0.32, AGP (linear mean) 0.57, trees + AGP 0.25.
    assert errors["both"] < 0.9 * errors["trees"], errors
    assert errors["both"] < 0.6 * errors["agp"], errors
    # The tree mean's own part (at most 100 trees, stopped on the AGP's validation rows) is what
    # the trees alone reach; the AGP's kernels add the improvement.
    Xs = (X_test - both.x_mean_) / both.x_scale_
    assert errors["both"] < 0.9 * metrics.rmse(f_test, both._mean_at(Xs)[:, 0]), errors
    assert both.mean_penalty_ is None and not np.any(both.mean_coef_)


def test_tree_mean_round_trips_through_a_model_file(tmp_path, wave_data) -> None:
    X, y, X_test, _ = wave_data
    model = AGPRegressor(mean="trees", n_centers=10, max_epochs=2, random_state=0).fit(X[:3000], y[:3000])
    path = tmp_path / "trees.npz"
    model.save(path, metadata={"note": "tree mean"})
    loaded = AGPRegressor.load(path)
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    np.testing.assert_array_equal(loaded.center_targets_, model.center_targets_)
    assert loaded.get_params() == model.get_params()
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    assert "mean_tree_value.npy" in names and not any(name.endswith(".pkl") for name in names)
    with np.load(path, allow_pickle=False) as archive:  # no pickle anywhere in the file
        document = json.loads(str(archive["metadata"]))
    assert document["format_version"] == 4 and document["mean_trees"] == len(model._mean_trees.roots)

    # A model without trees stays format version 3, readable by agp versions before the tree mean.
    linear = AGPRegressor(n_centers=10, max_epochs=1, random_state=0).fit(X[:500], y[:500])
    linear.save(tmp_path / "linear.npz")
    with np.load(tmp_path / "linear.npz", allow_pickle=False) as archive:
        assert json.loads(str(archive["metadata"]))["format_version"] == 3


def _rewrite(path, change) -> None:
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    change(arrays)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_damaged_tree_arrays_are_refused_naming_the_file(tmp_path, wave_data) -> None:
    X, y, _, _ = wave_data
    model = AGPRegressor(mean="trees", kernel="center", n_centers=5, random_state=0).fit(X[:2000], y[:2000])
    missing = tmp_path / "missing.npz"
    model.save(missing)
    _rewrite(missing, lambda arrays: arrays.pop("mean_tree_left"))
    with pytest.raises(ValueError, match=r"missing\.npz: incomplete agp-model file \(missing mean_tree_left\)"):
        AGPRegressor.load(missing)

    cyclic = tmp_path / "cyclic.npz"
    model.save(cyclic)

    def point_back(arrays: dict) -> None:  # an inner node whose child is its parent: a walk that never ends
        inner = np.flatnonzero(~arrays["mean_tree_is_leaf"])
        arrays["mean_tree_left"][inner[-1]] = inner[0]

    _rewrite(cyclic, point_back)
    with pytest.raises(ValueError, match=r"cyclic\.npz: mean_tree arrays are inconsistent"):
        AGPRegressor.load(cyclic)


def test_tree_mean_multi_output_and_weights(wave_data) -> None:
    X, y, X_test, _ = wave_data
    Y = np.column_stack([y[:2000], -2.0 * y[:2000] + 1.0])
    model = AGPRegressor(mean="trees", n_centers=10, max_epochs=2, random_state=0).fit(X[:2000], Y)
    prediction = model.predict(X_test)
    assert prediction.shape == (len(X_test), 2) and model.y_mean_.shape == (2,)
    assert set(model._mean_trees.outputs) == {0, 1}
    # Weight 0 on half the rows: the trees (and the rest of the fit) ignore those rows' targets.
    weights = np.tile([1.0, 0.0], 1000)
    garbage = np.where(weights > 0, y[:2000], 1e3)
    weighted = AGPRegressor(mean="trees", n_centers=10, max_epochs=2, random_state=0)
    weighted.fit(X[:2000], garbage, sample_weight=weights)
    assert metrics.rmse(y[:2000], weighted.predict(X[:2000])) < 1.0


@pytest.mark.filterwarnings("ignore:n_centers=25 is more than")
def test_check_estimator_passes_with_the_tree_mean() -> None:
    results = check_estimator(AGPRegressor(mean="trees"), on_fail=None, expected_failed_checks=EXPECTED_FAILED_CHECKS)
    failures = [f"{r['check_name']}: {r['exception']!r}" for r in results if r["status"] == "failed"]
    assert not failures, "\n".join(failures)
