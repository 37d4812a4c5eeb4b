"""Solves with the asymmetric center system A = K̂ + σ²I, robust to ill-conditioning.

The center kernel matrix is not symmetric, so Cholesky does not apply.  The well-posed path is
an LU factorisation with partial pivoting (LAPACK ``getrf``), whose reciprocal condition number
is estimated in O(N²) (``gecon``): one O(N³/3·2) factorisation serves both A⁻¹y and A⁻ᵀg (the
gradient's adjoint), several times cheaper than an SVD.  When the estimate says the system is
numerically singular (rcond below ``rcond``) the SVD takes over as a pseudo-inverse: singular
values below ``rcond · s_max`` are dropped, so duplicate or near-duplicate centers give finite,
minimum-norm weights.  The SVD uses LAPACK's divide-and-conquer ``gesdd`` first and the slower
but more robust ``gesvd`` when ``gesdd`` does not converge (it rejects some finite, badly
conditioned systems that ``gesvd`` solves).  Only a non-finite system, or one that neither
driver can factor, raises ``numpy.linalg.LinAlgError``; training then keeps its best epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy.linalg import lapack

DEFAULT_RCOND = 1e-10


@dataclass(frozen=True)
class SVDSolver:
    """A = U diag(s) Vᵀ with the small singular values already inverted to 0.  Works batched."""

    u: np.ndarray
    inv_s: np.ndarray
    vt: np.ndarray

    @classmethod
    def factor(cls, A: np.ndarray, rcond: float = DEFAULT_RCOND) -> SVDSolver:
        if not np.all(np.isfinite(A)):
            raise np.linalg.LinAlgError("the center system holds NaN or infinity")
        try:
            u, s, vt = np.linalg.svd(A)
        except np.linalg.LinAlgError:
            u, s, vt = gesvd_batched(A)
        cutoff = rcond * s[..., :1]
        inv_s = np.where(s > cutoff, 1.0 / np.where(s > cutoff, s, 1.0), 0.0)
        return cls(u, inv_s, vt)

    def solve(self, B: np.ndarray) -> np.ndarray:
        """A⁺ B = V diag(1/s) Uᵀ B."""
        return np.swapaxes(self.vt, -1, -2) @ (self.inv_s[..., :, None] * (np.swapaxes(self.u, -1, -2) @ B))

    def solve_transposed(self, B: np.ndarray) -> np.ndarray:
        """(A⁺)ᵀ B = U diag(1/s) Vᵀ B."""
        return self.u @ (self.inv_s[..., :, None] * (self.vt @ B))


def gesvd_batched(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The SVD by LAPACK ``gesvd`` (NumPy only offers ``gesdd``), one matrix of a batch at a time."""
    flat = A.reshape(-1, *A.shape[-2:])
    parts = [scipy.linalg.svd(matrix, lapack_driver="gesvd", check_finite=False) for matrix in flat]
    u, s, vt = (np.stack([part[i] for part in parts]) for i in range(3))
    return u.reshape(A.shape), s.reshape(*A.shape[:-1]), vt.reshape(A.shape)


@dataclass(frozen=True)
class LUSolver:
    """A = P L U from ``getrf``; both A⁻¹B and A⁻ᵀB reuse it (one matrix, no batch axes)."""

    lu: np.ndarray
    pivots: np.ndarray

    def solve(self, B: np.ndarray) -> np.ndarray:
        return scipy.linalg.lu_solve((self.lu, self.pivots), B, check_finite=False)

    def solve_transposed(self, B: np.ndarray) -> np.ndarray:
        return scipy.linalg.lu_solve((self.lu, self.pivots), B, trans=1, check_finite=False)


Solver = LUSolver | SVDSolver


def factor_system(A: np.ndarray, rcond: float = DEFAULT_RCOND) -> Solver:
    """LU when A is well-conditioned (estimated reciprocal condition ≥ ``rcond``), else the SVD."""
    if not np.all(np.isfinite(A)):
        raise np.linalg.LinAlgError("the center system holds NaN or infinity")
    lu, pivots, info = lapack.dgetrf(A)
    if info == 0:
        estimate, gecon_info = lapack.dgecon(lu, float(np.abs(A).sum(axis=0).max()), norm="1")
        if gecon_info == 0 and estimate >= rcond:
            return LUSolver(lu, pivots)
    return SVDSolver.factor(A, rcond)


def solve_center_system(
    kernel_matrix: np.ndarray, noise: float | np.ndarray, targets: np.ndarray, rcond: float = DEFAULT_RCOND
) -> np.ndarray:
    """α = (K̂ + σ²I)⁺ y; ``kernel_matrix`` may carry leading batch axes, ``noise`` broadcasts to them."""
    n = kernel_matrix.shape[-1]
    noise = np.asarray(noise, dtype=float)[..., None, None]
    system = kernel_matrix + noise * np.eye(n)
    if system.ndim == 2:
        return factor_system(system, rcond).solve(targets)
    return SVDSolver.factor(system, rcond).solve(targets)
