"""Robust solves with the asymmetric center system A = K̂ + σ²I.

The center kernel matrix is not symmetric, so Cholesky does not apply; the paper uses the SVD.
Singular values below ``rcond · s_max`` are dropped (a pseudo-inverse), so duplicate or
near-duplicate centers give finite weights instead of NaN/inf.  NumPy's batched SVD is used
directly because we need the same factorisation for A⁻¹y and A⁻ᵀg (the gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_RCOND = 1e-10


@dataclass(frozen=True)
class SVDSolver:
    """A = U diag(s) Vᵀ with the small singular values already inverted to 0.  Works batched."""

    u: np.ndarray
    inv_s: np.ndarray
    vt: np.ndarray

    @classmethod
    def factor(cls, A: np.ndarray, rcond: float = DEFAULT_RCOND) -> SVDSolver:
        u, s, vt = np.linalg.svd(A)
        cutoff = rcond * s[..., :1]
        inv_s = np.where(s > cutoff, 1.0 / np.where(s > cutoff, s, 1.0), 0.0)
        return cls(u, inv_s, vt)

    def solve(self, B: np.ndarray) -> np.ndarray:
        """A⁺ B = V diag(1/s) Uᵀ B."""
        return np.swapaxes(self.vt, -1, -2) @ (self.inv_s[..., :, None] * (np.swapaxes(self.u, -1, -2) @ B))

    def solve_transposed(self, B: np.ndarray) -> np.ndarray:
        """(A⁺)ᵀ B = U diag(1/s) Vᵀ B."""
        return self.u @ (self.inv_s[..., :, None] * (self.vt @ B))


def solve_center_system(
    kernel_matrix: np.ndarray, noise: float | np.ndarray, targets: np.ndarray, rcond: float = DEFAULT_RCOND
) -> np.ndarray:
    """α = (K̂ + σ²I)⁺ y; ``kernel_matrix`` may carry leading batch axes, ``noise`` broadcasts to them."""
    n = kernel_matrix.shape[-1]
    noise = np.asarray(noise, dtype=float)[..., None, None]
    return SVDSolver.factor(kernel_matrix + noise * np.eye(n), rcond).solve(targets)
