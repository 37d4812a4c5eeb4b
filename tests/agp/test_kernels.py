"""Kernel kinds agree with each other and with the paper's formulas."""

from __future__ import annotations

import numpy as np
import pytest

from agp.kernels import KERNELS, make_kernel, squared_distances


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    return rng.standard_normal((9, 4)), rng.standard_normal((3, 4)), rng


def _q(kind, params, X, C, **kw):
    kernel = make_kernel(kind, **kw)
    return kernel.quadratic_form(params, kernel.prepare(X, C), C)


def test_univariate_is_eq3(points) -> None:
    X, C, _ = points
    lengthscales = np.array([0.5, 1.0, 2.0])
    kernel = make_kernel("univariate")
    k = kernel.features({"log_lengthscale": np.log(lengthscales)}, kernel.prepare(X, C), C)
    expected = np.exp(-((X[:, None, :] - C[None]) ** 2).sum(-1) / (2 * lengthscales**2))
    np.testing.assert_allclose(k, expected, rtol=1e-12)


def test_all_kinds_start_from_the_same_isotropic_kernel(points) -> None:
    X, C, rng = points
    reference = squared_distances(X, C) / 1.7**2
    for kind in KERNELS:
        kernel = make_kernel(kind, rank=2)
        params = kernel.initial_params(1.7, C, rng)
        q = kernel.quadratic_form(params, kernel.prepare(X, C), C)
        # lowrank starts about 1 % off the isotropic form so that U is not at a saddle point.
        tolerance = 0.1 if kind == "lowrank" else 1e-10
        np.testing.assert_allclose(q, reference, rtol=tolerance)


def test_diagonal_and_lowrank_equal_full_with_the_same_precision(points) -> None:
    X, C, rng = points
    d = np.exp(rng.standard_normal((3, 4)))
    U = rng.standard_normal((3, 4, 2))
    P_diag = np.stack([np.diag(row) for row in d])
    P_low = P_diag + np.einsum("idr,ier->ide", U, U)
    np.testing.assert_allclose(
        _q("diagonal", {"log_precision": np.log(d)}, X, C), _q("full", {"precision": P_diag}, X, C), rtol=1e-10
    )
    np.testing.assert_allclose(
        _q("lowrank", {"log_precision": np.log(d), "factor": U}, X, C, rank=2),
        _q("full", {"precision": P_low}, X, C),
        rtol=1e-10,
    )


def test_kernel_is_asymmetric_between_centers(points) -> None:
    _, C, _ = points
    kernel = make_kernel("univariate")
    G = kernel.features({"log_lengthscale": np.log([0.5, 1.0, 2.0])}, kernel.prepare(C, C), C)
    assert not np.allclose(G, G.T)
    np.testing.assert_allclose(np.diag(G), 1.0)


def test_full_projection_clips_negative_eigenvalues() -> None:
    kernel = make_kernel("full")
    P = np.array([[[2.0, 0.0], [0.0, -1.0]]])
    rotation = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    params = {"precision": rotation @ P @ rotation.T}
    kernel.project(params)
    eigenvalues = np.linalg.eigvalsh(params["precision"][0])
    np.testing.assert_allclose(eigenvalues, [0.0, 2.0], atol=1e-12)


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown kernel 'cubic'"):
        make_kernel("cubic")
