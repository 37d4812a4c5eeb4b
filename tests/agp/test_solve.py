"""Solves of the asymmetric center system: LU when well-posed, SVD (gesdd, then gesvd) otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from agp.solve import LUSolver, SVDSolver, factor_system, solve_center_system


def test_matches_exact_solve_on_a_regular_asymmetric_system() -> None:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    B = rng.standard_normal((6, 2))
    solver = SVDSolver.factor(A)
    np.testing.assert_allclose(solver.solve(B), np.linalg.solve(A, B), rtol=1e-10)
    np.testing.assert_allclose(solver.solve_transposed(B), np.linalg.solve(A.T, B), rtol=1e-10)


def test_duplicate_centers_give_finite_minimum_norm_weights() -> None:
    # Two identical centers and no noise: the system is singular.
    K = np.array([[1.0, 1.0, 0.2], [1.0, 1.0, 0.2], [0.2, 0.2, 1.0]])
    alpha = solve_center_system(K, 0.0, np.array([[1.0], [1.0], [0.5]]))
    assert np.all(np.isfinite(alpha))
    # The pseudo-inverse splits the weight evenly between the duplicates and still fits the targets.
    assert np.isclose(alpha[0, 0], alpha[1, 0])
    np.testing.assert_allclose(K @ alpha, [[1.0], [1.0], [0.5]], atol=1e-8)


def test_batched_factorisation() -> None:
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 4, 4)) + 4 * np.eye(4)
    B = rng.standard_normal((4, 1))
    expected = np.stack([np.linalg.solve(a, B) for a in A])
    np.testing.assert_allclose(SVDSolver.factor(A).solve(B), expected, rtol=1e-10)


def test_well_conditioned_systems_take_the_lu_path_and_match() -> None:
    rng = np.random.default_rng(2)
    A = rng.standard_normal((8, 8)) + 8 * np.eye(8)
    B = rng.standard_normal((8, 3))
    solver = factor_system(A)
    assert isinstance(solver, LUSolver)
    np.testing.assert_allclose(solver.solve(B), np.linalg.solve(A, B), rtol=1e-12)
    np.testing.assert_allclose(solver.solve_transposed(B), np.linalg.solve(A.T, B), rtol=1e-12)


def test_numerically_singular_systems_fall_back_to_the_pseudo_inverse() -> None:
    K = np.array([[1.0, 1.0, 0.2], [1.0, 1.0, 0.2], [0.2, 0.2, 1.0]])
    solver = factor_system(K)
    assert isinstance(solver, SVDSolver)
    alpha = solver.solve(np.array([[1.0], [1.0], [0.5]]))
    assert np.isclose(alpha[0, 0], alpha[1, 0]) and np.all(np.isfinite(alpha))


def test_gesvd_takes_over_when_gesdd_does_not_converge(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    A = rng.standard_normal((2, 5, 5))
    B = rng.standard_normal((5, 1))
    expected = SVDSolver.factor(A).solve(B)

    def refuse(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", refuse)
    np.testing.assert_allclose(SVDSolver.factor(A).solve(B), expected, rtol=1e-10)


def test_non_finite_systems_raise_linalg_error() -> None:
    with pytest.raises(np.linalg.LinAlgError, match="NaN or infinity"):
        factor_system(np.array([[1.0, np.nan], [0.0, 1.0]]))
