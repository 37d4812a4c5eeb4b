"""Analytic gradients of the eq. 5 loss against central finite differences, every kernel kind."""

from __future__ import annotations

import numpy as np
import pytest

from agp.kernels import KERNELS, make_kernel, symmetric_gradient
from agp.objective import CenterSystem, loss_and_gradient

N_CENTERS, DIM, BATCH, OUTPUTS = 4, 3, 7, 2


def _problem(kind: str, log_parametrised: bool = True):
    rng = np.random.default_rng(3)
    kernel = make_kernel(kind, rank=2, log_parametrised=log_parametrised)
    centers = rng.standard_normal((N_CENTERS, DIM))
    X = rng.standard_normal((BATCH, DIM))
    y = rng.standard_normal((BATCH, OUTPUTS))
    params = kernel.initial_params(1.3, centers, rng)
    # Move off the isotropic start so every parameter matters and centers differ.
    for name, value in params.items():
        if name == "precision":
            A = rng.standard_normal(value.shape) * 0.2
            params[name] = value + np.einsum("ide,ife->idf", A, A)
        else:
            params[name] = value + 0.3 * rng.standard_normal(value.shape)
    system = CenterSystem(
        kernel, centers, kernel.prepare(centers, centers), rng.standard_normal((N_CENTERS, OUTPUTS)), 0.05
    )
    return kernel, system, params, kernel.prepare(X, centers), y


def _numeric_gradient(system, params, prepared, y, reg, name, symmetric):
    eps = 1e-6
    value = params[name]
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        if symmetric and index[-2] > index[-1]:
            continue
        step = np.zeros_like(value)
        step[index] = eps
        if symmetric and index[-2] != index[-1]:
            # A free entry of a symmetric matrix moves both (k, l) and (l, k).
            mirrored = index[:-2] + (index[-1], index[-2])
            step[mirrored] = eps
        plus = dict(params, **{name: value + step})
        minus = dict(params, **{name: value - step})
        grad[index] = (
            loss_and_gradient(system, plus, prepared, y, reg)[0] - loss_and_gradient(system, minus, prepared, y, reg)[0]
        ) / (2 * eps)
        if symmetric:
            grad[index[:-2] + (index[-1], index[-2])] = grad[index]
    return grad


@pytest.mark.parametrize("kind,log_parametrised", [(k, True) for k in KERNELS] + [("univariate", False)])
def test_gradient_matches_finite_differences(kind: str, log_parametrised: bool) -> None:
    _, system, params, prepared, y = _problem(kind, log_parametrised)
    reg = 0.1  # large enough that an error in the regulariser's gradient would show
    _, analytic = loss_and_gradient(system, params, prepared, y, reg)
    assert set(analytic) == set(params)
    for name in params:
        numeric = _numeric_gradient(system, params, prepared, y, reg, name, symmetric=(name == "precision"))
        error = np.linalg.norm(analytic[name] - numeric) / np.linalg.norm(numeric)
        assert error < 1e-5, f"{kind}/{name}: relative error {error:.2e}"


def test_symmetric_gradient_is_eq8() -> None:
    G = np.array([[1.0, 2.0], [4.0, 3.0]])
    np.testing.assert_allclose(symmetric_gradient(G), [[1.0, 6.0], [6.0, 3.0]])
