"""Comparison peers: regression baselines on small generated features, HOG on real Mall frames."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pytest

from counting.evaluate.peers import FEATURE_PEERS, CalibratedHOGCounter, HOGPeopleCounter, PeerUnavailable, make_peer
from counting.evaluate.peers import hog as hog_module
from counting.evaluate.peers.sparse_gp import SparseGPRegressor


@pytest.fixture(scope="module")
def generated() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Counts that depend smoothly (and partly non-linearly) on 20-d descriptors."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 20))
    y = 30 + 4 * X[:, 0] + 3 * np.tanh(2 * X[:, 1]) + rng.normal(scale=0.3, size=200)
    return X[:150], y[:150], X[150:], y[150:]


def _mae(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(np.asarray(a) - np.asarray(b))))


@pytest.mark.parametrize("name", ["ridge", "gp"])
def test_regression_peers_learn_the_counts(name: str, generated) -> None:
    X, y, X_test, y_test = generated
    model = make_peer(name, n_features=X.shape[1]).fit(X, y)
    predicted = model.predict(X_test)
    baseline = _mae(y_test, np.full_like(y_test, y.mean()))
    assert predicted.shape == y_test.shape
    assert _mae(y_test, predicted) < 0.4 * baseline


def test_exact_gp_beats_ridge_on_a_nonlinear_target() -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(260, 3))
    y = 10 + 5 * np.sin(2 * X[:, 0]) + rng.normal(scale=0.1, size=260)
    ridge = make_peer("ridge", n_features=3).fit(X[:200], y[:200])
    gp = make_peer("gp", n_features=3).fit(X[:200], y[:200])
    assert _mae(y[200:], gp.predict(X[200:])) < 0.5 * _mae(y[200:], ridge.predict(X[200:]))


@pytest.fixture(scope="module")
def low_dimensional() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(200, 4))
    y = 20 + 5 * np.sin(X[:, 0]) + 3 * X[:, 1] + rng.normal(scale=0.2, size=200)
    return X[:150], y[:150], X[150:], y[150:]


@pytest.mark.parametrize("name", ["center-gp", "agp-univariate", "agp-diagonal", "agp-lowrank"])
def test_paper_variants_are_agp_kernels_that_fit(name: str, low_dimensional) -> None:
    X, y, X_test, y_test = low_dimensional
    model = make_peer(name, n_centers=10, n_features=X.shape[1], n_rows=len(X))
    expected_kernel = {
        "center-gp": "center",
        "agp-univariate": "univariate",
        "agp-diagonal": "diagonal",
        "agp-lowrank": "lowrank",
    }[name]
    assert model.kernel == expected_kernel and model.n_centers == 10
    model.set_params(max_epochs=5)
    predicted = model.fit(X, y).predict(X_test)
    assert _mae(y_test, predicted) < 0.3 * _mae(y_test, np.full_like(y_test, y.mean()))


def test_sparse_gp_uses_as_many_inducing_points_as_centres(low_dimensional) -> None:
    pytest.importorskip("gpytorch")
    X, y, X_test, y_test = low_dimensional
    model = make_peer("sparse-gp", n_centers=12, n_features=X.shape[1])
    model.set_params(n_iter=60)
    model.fit(X, y)
    inducing = model.model_.covar_module.inducing_points
    assert tuple(inducing.shape) == (12, X.shape[1])
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    assert _mae(y_test, model.predict(X_test)) < 0.3 * _mae(y_test, np.full_like(y_test, y.mean()))


def test_sparse_gp_without_gpytorch_says_so(monkeypatch, generated) -> None:
    real_import = builtins.__import__

    def no_gpytorch(name, *args, **kwargs):
        if name == "gpytorch" or name.startswith("gpytorch."):
            raise ImportError("No module named 'gpytorch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_gpytorch)
    X, y, _, _ = generated
    with pytest.raises(PeerUnavailable, match=r"counting\[sparse\]"):
        SparseGPRegressor(n_inducing=5).fit(X, y)


def test_unknown_peer_is_named() -> None:
    with pytest.raises(KeyError, match="lasso"):
        make_peer("lasso")
    assert {"ridge", "gp", "sparse-gp", "center-gp", "agp-univariate", "agp-diagonal"} <= set(FEATURE_PEERS)


# -- HOG detector on real frames -----------------------------------------------------------

needs_hog = pytest.mark.skipif(not hog_module.hog_available(), reason=hog_module.INSTALL_HINT)


@pytest.fixture(scope="module")
def mall_frames(mall_root: Path) -> tuple[list[Path], np.ndarray, np.ndarray]:
    from counting.data.datasets import load_dataset

    dataset = load_dataset("mall", mall_root, split="train=1-6,test=7-8")
    return dataset.paths, dataset.counts, dataset.roi_mask


@needs_hog
def test_hog_counts_people_on_a_real_mall_frame(mall_frames) -> None:
    paths, counts, roi = mall_frames
    detector = HOGPeopleCounter(roi_mask=roi)
    found = detector.count(paths[0])
    # Frame 1 has 29 annotated heads; the pedestrian detector finds some of the larger,
    # unoccluded people, never more than are there.
    assert 1 <= found <= counts[0]
    assert detector.count(paths[0]) <= len(detector.detect(paths[0]))


@needs_hog
def test_hog_finds_nobody_on_a_blank_image() -> None:
    detector = HOGPeopleCounter()
    assert detector.count(np.full((480, 640, 3), 128, dtype=np.uint8)) == 0


@needs_hog
def test_roi_that_excludes_everything_counts_nobody(mall_frames) -> None:
    paths, _, roi = mall_frames
    assert HOGPeopleCounter(roi_mask=np.zeros_like(roi)).count(paths[0]) == 0


@needs_hog
def test_calibrated_hog_fits_the_training_counts_at_least_as_well_as_raw_counts(mall_frames) -> None:
    paths, counts, roi = mall_frames
    calibrated = CalibratedHOGCounter(roi_mask=roi, max_train_images=4).fit(paths, counts)
    assert calibrated.n_train_ == 4
    raw = HOGPeopleCounter(roi_mask=roi).predict(paths)
    fitted = calibrated.predict(paths)
    assert fitted.shape == (len(paths),) and (fitted >= 0).all()
    chosen = np.unique(np.linspace(0, len(paths) - 1, 4).round().astype(int))
    # Least squares on the frames it was fitted on cannot do worse than the identity line.
    assert np.mean((fitted[chosen] - counts[chosen]) ** 2) <= np.mean((raw[chosen] - counts[chosen]) ** 2) + 1e-9


def test_unreadable_image_is_a_one_line_error(tmp_path: Path) -> None:
    if not hog_module.hog_available():
        pytest.skip(hog_module.INSTALL_HINT)
    from counting.core.errors import ImageError

    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    with pytest.raises(ImageError, match="broken.jpg"):
        HOGPeopleCounter().count(broken)


def test_missing_hog_support_is_reported(monkeypatch) -> None:
    monkeypatch.setattr(hog_module, "hog_available", lambda: False)
    with pytest.raises(PeerUnavailable, match="opencv-contrib"):
        HOGPeopleCounter()
