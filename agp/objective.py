"""The regularised squared loss of eq. 5 and its analytic gradient, for any kernel kind.

Model (rows = evaluation points, columns = centers):
    Φ(X)[n, i] = k_i(c_i, x_n),   G = Φ(C),   α = (G + σ²I)⁺ t,   f(X) = Φ(X) α.

We solve with G = K̂ᵀ, where the paper writes K̂[i, j] = k_i(c_i, c_j): with the paper's
order f(c_j) = (K̂ᵀ (K̂ + σ²I)⁻¹ t)_j, which does not return the center targets when K̂ is
asymmetric; with G the model interpolates its centers as σ → 0, and for the symmetric
center-GP both are the same.

Gradient (one factorisation of the N × N system, LU or SVD (agp/solve.py), reused for α and
for the adjoint β):
    R = f - y,  ∂L/∂Φ = 2 R αᵀ,  β = (G + σ²I)⁻ᵀ Φᵀ 2R,  ∂L/∂G = -β αᵀ,
and since Φ = exp(-q/2), the kernel receives weights w = -½ (∂L/∂Φ) ∘ Φ for the batch rows
and the same for G, then returns Σ w ∂q/∂θ.  Cost per step: the kernel's quadratic form on
B + N rows plus O(N³) for the factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agp.kernels import Kernel, Params, Prepared
from agp.solve import Solver, factor_system


@dataclass
class CenterSystem:
    """Everything about the centers that stays fixed while the kernel parameters train."""

    kernel: Kernel
    centers: np.ndarray  # (N, D), standardised
    prepared: Prepared  # kernel.prepare(centers, centers)
    targets: np.ndarray  # (N, K), centred
    noise: float

    def factor(self, params: Params) -> tuple[np.ndarray, Solver]:
        gram = self.kernel.features(params, self.prepared, self.centers)
        system = gram + self.noise * np.eye(len(self.centers))
        return gram, factor_system(system)

    def weights(self, params: Params) -> np.ndarray:
        """(N, K) α."""
        return self.factor(params)[1].solve(self.targets)

    def predict(self, params: Params, prepared_rows: Prepared, alpha: np.ndarray) -> np.ndarray:
        return self.kernel.features(params, prepared_rows, self.centers) @ alpha


def loss_and_gradient(
    system: CenterSystem,
    params: Params,
    prepared_batch: Prepared,
    y_batch: np.ndarray,
    reg: float,
    weights: np.ndarray | None = None,
) -> tuple[float, Params]:
    """Σ_n w_n Σ_k (f_k(x_n) - y_nk)² + reg · R(θ) on one batch, and its gradient (``weights``
    (B,) the rows' w_n, ``None``: all 1)."""
    kernel, centers = system.kernel, system.centers
    phi = kernel.features(params, prepared_batch, centers)  # (B, N)
    gram, solver = system.factor(params)
    alpha = solver.solve(system.targets)  # (N, K)
    residual = phi @ alpha - y_batch  # (B, K)
    weighted = residual if weights is None else residual * weights[:, None]
    reg_value, reg_grads = kernel.regularisation(params)
    loss = float(np.sum(weighted * residual)) + reg * reg_value

    two_residual = 2.0 * weighted
    d_phi = two_residual @ alpha.T  # (B, N)
    beta = solver.solve_transposed(phi.T @ two_residual)  # (N, K)
    d_gram = -beta @ alpha.T  # (N, N)

    grads = kernel.quadratic_form_gradient(params, prepared_batch, centers, -0.5 * d_phi * phi)
    center_grads = kernel.quadratic_form_gradient(params, system.prepared, centers, -0.5 * d_gram * gram)
    return loss, {name: grads[name] + center_grads[name] + reg * reg_grads[name] for name in grads}
