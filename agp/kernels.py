"""Per-center squared-exponential kernels of the asymmetric GP (Pintea et al. 2018, eqs. 3-4, 8).

Every kind writes the kernel of center ``i`` as ``k_i(c_i, x) = exp(-q_i(x - c_i) / 2)`` with
the quadratic form ``q_i(d) = dᵀ P_i d``.  The kinds differ only in how ``P_i`` is
parametrised:

=============  ======================================  ======================================
kind           P_i                                     parameters (arrays in ``params``)
=============  ======================================  ======================================
center         I / l²  (one l shared by all centers)   log_lengthscale (1,)
univariate     I / l_i²                                log_lengthscale (N,) or lengthscale (N,)
diagonal       diag(d_i)                               log_precision (N, D)
lowrank        diag(d_i) + U_i U_iᵀ                     log_precision (N, D), factor (N, D, r)
full           P_i, symmetric PSD                      precision (N, D, D)
=============  ======================================  ======================================

A kernel never loops over samples or centers: everything is a matrix product or an einsum.
The estimator turns ``dL/dk`` into per-point weights ``w[n, i]`` and asks the kernel for
``Σ_n w[n, i] ∂q_i(x_n - c_i)/∂θ_i``; that is the only derivative a kernel has to know.

``prepare`` computes what does not change during training (for the isotropic kinds the
squared distances to the centers, so one SGD step then costs O(B·N) after an O(n·N·D)
one-off; for the others the rows and their squares).  Its result is a tuple of arrays whose
first axis is the row, so a minibatch is ``take_rows(prepared, idx)``.
"""

from __future__ import annotations

import numpy as np

Params = dict[str, np.ndarray]
Prepared = tuple[np.ndarray, ...]

KERNELS = ("center", "univariate", "diagonal", "lowrank", "full")

# Training keeps every lengthscale within start / 30 .. start · 30 of the grid-search start: far
# outside it a kernel column is constant (or a spike) and the center system turns singular
# long before the loss could profit.  Precisions are lengthscale⁻², hence twice the log-width.
LENGTHSCALE_RANGE = 30.0
_LOG_WIDTH = {"log_lengthscale": np.log(LENGTHSCALE_RANGE), "log_precision": 2.0 * np.log(LENGTHSCALE_RANGE)}


def take_rows(prepared: Prepared, rows: np.ndarray | slice) -> Prepared:
    """The prepared statistics of a subset of rows (a minibatch)."""
    return tuple(array[rows] for array in prepared)


def squared_distances(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """(n, N) squared Euclidean distances, clipped at 0 against cancellation."""
    sq = np.einsum("nd,nd->n", X, X)[:, None] - 2.0 * X @ centers.T + np.einsum("id,id->i", centers, centers)[None, :]
    return np.maximum(sq, 0.0)


class Kernel:
    """Interface shared by the kernel kinds (see the module docstring)."""

    kind: str = ""

    def initial_params(self, lengthscale: float, centers: np.ndarray, rng: np.random.Generator) -> Params:
        """Parameters equivalent to (or, for lowrank, near) an isotropic kernel of ``lengthscale``."""
        raise NotImplementedError

    def prepare(self, X: np.ndarray, centers: np.ndarray) -> Prepared:
        raise NotImplementedError

    def quadratic_form(self, params: Params, prepared: Prepared, centers: np.ndarray) -> np.ndarray:
        """(n, N) values q_i(x_n - c_i)."""
        raise NotImplementedError

    def quadratic_form_gradient(
        self, params: Params, prepared: Prepared, centers: np.ndarray, weights: np.ndarray
    ) -> Params:
        """Gradient of Σ_{n,i} weights[n, i] q_i(x_n - c_i) with respect to every parameter."""
        raise NotImplementedError

    def regularisation(self, params: Params) -> tuple[float, Params]:
        """The unweighted regulariser of eq. 5 (Σ_i l_i² or Σ_i ||P_i||_F) and its gradient."""
        raise NotImplementedError

    def project(self, params: Params) -> None:
        """Restore constraints after an optimiser step (in place); most kinds have none."""

    def step_scales(self, params: Params) -> dict[str, float]:
        """Natural size of one unit of each parameter, so Adam's step is relative (no lr hunt)."""
        return {name: 1.0 for name in params}

    def bound(self, params: Params, start: Params) -> None:
        """Keep lengthscales within ``LENGTHSCALE_RANGE`` of their start ``start`` (in place)."""
        for name, width in _LOG_WIDTH.items():
            if name in params:
                params[name] = np.clip(params[name], start[name] - width, start[name] + width)
        if "lengthscale" in params:
            low, high = start["lengthscale"] / LENGTHSCALE_RANGE, start["lengthscale"] * LENGTHSCALE_RANGE
            params["lengthscale"] = np.clip(params["lengthscale"], low, high)

    def public_attributes(self, params: Params) -> dict[str, np.ndarray]:
        """The trained metric in plain units under names that do not depend on the optimiser."""
        raise NotImplementedError

    def features(self, params: Params, prepared: Prepared, centers: np.ndarray) -> np.ndarray:
        """(n, N) kernel values k_i(c_i, x_n)."""
        return np.exp(-0.5 * self.quadratic_form(params, prepared, centers))

    def lengthscales(self, params: Params) -> np.ndarray:
        """A per-center summary lengthscale (geometric mean over dimensions), for reports."""
        raise NotImplementedError


class IsotropicKernel(Kernel):
    """center (one shared lengthscale) and univariate (one lengthscale per center, eq. 3)."""

    def __init__(self, shared: bool, log_parametrised: bool = True) -> None:
        self.shared = shared
        self.log_parametrised = log_parametrised or shared
        self.kind = "center" if shared else "univariate"
        self._name = "log_lengthscale" if self.log_parametrised else "lengthscale"

    def initial_params(self, lengthscale, centers, rng):
        size = 1 if self.shared else len(centers)
        value = np.log(lengthscale) if self.log_parametrised else lengthscale
        return {self._name: np.full(size, float(value))}

    def _lengthscale(self, params: Params) -> np.ndarray:
        raw = params[self._name]
        return np.exp(raw) if self.log_parametrised else raw

    def lengthscales(self, params):
        return np.abs(self._lengthscale(params))

    def public_attributes(self, params):
        return {"lengthscales_": self.lengthscales(params)}

    def prepare(self, X, centers):
        return (squared_distances(X, centers),)

    def quadratic_form(self, params, prepared, centers):
        return prepared[0] / self._lengthscale(params)[None, :] ** 2

    def quadratic_form_gradient(self, params, prepared, centers, weights):
        q = self.quadratic_form(params, prepared, centers)
        # q = d² l⁻², so ∂q/∂log l = -2q and ∂q/∂l = -2q/l.
        per_center = -2.0 * np.einsum("ni,ni->i", weights, q)
        if not self.log_parametrised:
            per_center = per_center / self._lengthscale(params)
        if self.shared:
            per_center = np.array([per_center.sum()])
        return {self._name: per_center}

    def regularisation(self, params):
        lengthscale = self._lengthscale(params)
        value = float((lengthscale**2).sum())
        grad = 2.0 * (lengthscale**2 if self.log_parametrised else lengthscale)
        return value, {self._name: grad}

    def project(self, params):
        if not self.log_parametrised:
            # Plain SGD may push l through zero; the kernel only sees l², so fold the sign
            # and keep l away from 0 where q would blow up.
            params[self._name] = np.maximum(np.abs(params[self._name]), 1e-8)

    def step_scales(self, params):
        if self.log_parametrised:
            return {self._name: 1.0}
        return {self._name: float(np.mean(np.abs(params[self._name])))}


class DiagonalKernel(Kernel):
    """P_i = diag(d_i), d_i = exp(log_precision_i): one lengthscale per center and dimension."""

    kind = "diagonal"

    def initial_params(self, lengthscale, centers, rng):
        return {"log_precision": np.full(centers.shape, -2.0 * np.log(lengthscale))}

    def lengthscales(self, params):
        return np.exp(-0.5 * params["log_precision"].mean(axis=1))

    def public_attributes(self, params):
        return {"precisions_": np.exp(params["log_precision"])}

    def prepare(self, X, centers):
        return (X, X * X)

    @staticmethod
    def _diagonal_form(d: np.ndarray, prepared: Prepared, centers: np.ndarray) -> np.ndarray:
        # Σ_k d_ik (x_nk - c_ik)² expanded into three matrix products: O(n·N·D), no (n, N, D) array.
        X, X2 = prepared[0], prepared[1]
        return X2 @ d.T - 2.0 * X @ (d * centers).T + np.einsum("id,id->i", d, centers * centers)[None, :]

    @staticmethod
    def _diagonal_gradient(weights: np.ndarray, prepared: Prepared, centers: np.ndarray) -> np.ndarray:
        """∂/∂d of Σ w[n,i] Σ_k d_ik (x_nk - c_ik)², shape (N, D)."""
        X, X2 = prepared[0], prepared[1]
        return weights.T @ X2 - 2.0 * centers * (weights.T @ X) + centers**2 * weights.sum(axis=0)[:, None]

    def quadratic_form(self, params, prepared, centers):
        d = np.exp(params["log_precision"])
        return np.maximum(self._diagonal_form(d, prepared, centers), 0.0)

    def quadratic_form_gradient(self, params, prepared, centers, weights):
        d = np.exp(params["log_precision"])
        return {"log_precision": self._diagonal_gradient(weights, prepared, centers) * d}

    def regularisation(self, params):
        d = np.exp(params["log_precision"])
        norms = np.sqrt(np.einsum("id,id->i", d, d))
        return float(norms.sum()), {"log_precision": d * d / norms[:, None]}


class LowRankKernel(DiagonalKernel):
    """P_i = diag(d_i) + U_i U_iᵀ: D + D·r parameters per center, O(n·N·D·r) per evaluation."""

    kind = "lowrank"

    def __init__(self, rank: int) -> None:
        self.rank = int(rank)

    def initial_params(self, lengthscale, centers, rng):
        n_centers, dim = centers.shape
        precision = 1.0 / lengthscale**2
        # U = 0 is a saddle (∂q/∂U = 2δ(Uᵀδ)ᵀ = 0), so start slightly off it: UUᵀ adds about 1 %
        # to the isotropic form.
        factor = rng.standard_normal((n_centers, dim, self.rank)) * np.sqrt(0.01 * precision / self.rank)
        return {
            "log_precision": np.full(centers.shape, np.log(precision)),
            "factor": factor,
        }

    def lengthscales(self, params):
        d = np.exp(params["log_precision"]) + np.einsum("idr,idr->id", params["factor"], params["factor"])
        return np.exp(-0.5 * np.log(d).mean(axis=1))

    def public_attributes(self, params):
        return {"precisions_": np.exp(params["log_precision"]), "precision_factors_": params["factor"].copy()}

    def _projections(self, params: Params, prepared: Prepared, centers: np.ndarray) -> np.ndarray:
        """(n, N, r) values U_iᵀ (x_n - c_i)."""
        factor = params["factor"]
        n_centers, dim, rank = factor.shape
        # One (n, D) x (D, N·r) product instead of an einsum that would not use BLAS.
        stacked = np.transpose(factor, (1, 0, 2)).reshape(dim, n_centers * rank)
        projected = (prepared[0] @ stacked).reshape(-1, n_centers, rank)
        return projected - np.matmul(centers[:, None, :], factor)[:, 0, :][None]

    def quadratic_form(self, params, prepared, centers):
        d = np.exp(params["log_precision"])
        proj = self._projections(params, prepared, centers)
        return np.maximum(self._diagonal_form(d, prepared, centers) + np.einsum("nir,nir->ni", proj, proj), 0.0)

    def quadratic_form_gradient(self, params, prepared, centers, weights):
        d = np.exp(params["log_precision"])
        proj = self._projections(params, prepared, centers)
        weighted = weights[:, :, None] * proj  # (n, N, r)
        # ∂q/∂U_i = 2 δ (U_iᵀ δ)ᵀ with δ = x_n - c_i, summed over n with the weights.
        n_centers, dim, rank = params["factor"].shape
        x_weighted = (prepared[0].T @ weighted.reshape(len(weighted), n_centers * rank)).reshape(dim, n_centers, rank)
        factor_grad = 2.0 * (
            np.transpose(x_weighted, (1, 0, 2)) - centers[:, :, None] * weighted.sum(axis=0)[:, None, :]
        )
        return {
            "log_precision": self._diagonal_gradient(weights, prepared, centers) * d,
            "factor": factor_grad,
        }

    def regularisation(self, params):
        d = np.exp(params["log_precision"])
        U = params["factor"]
        row_sq = np.einsum("idr,idr->id", U, U)  # diag(U Uᵀ)
        gram = np.matmul(np.swapaxes(U, 1, 2), U)  # Uᵀ U, (N, r, r)
        # ||diag(d) + UUᵀ||_F² = Σ d² + 2 Σ d·diag(UUᵀ) + ||UᵀU||_F², in O(D·r²).
        sq_norm = (d * d).sum(axis=1) + 2.0 * (d * row_sq).sum(axis=1) + np.einsum("irs,irs->i", gram, gram)
        norms = np.sqrt(sq_norm)
        half_inv = 0.5 / norms
        grad_d = 2.0 * (d + row_sq) * half_inv[:, None]
        grad_U = (4.0 * d[:, :, None] * U + 4.0 * np.matmul(U, gram)) * half_inv[:, None, None]
        return float(norms.sum()), {"log_precision": grad_d * d, "factor": grad_U}

    def step_scales(self, params):
        d0 = float(np.exp(params["log_precision"]).mean())
        dim = params["factor"].shape[1]
        # A coordinated step of all D entries of a column moves Uᵀδ by about √D times one
        # entry's step; dividing by √D keeps Adam's relative step meaningful at D = 1000.
        return {"log_precision": 1.0, "factor": float(np.sqrt(d0 / dim))}


class FullKernel(Kernel):
    """The paper's multivariate kernel (eq. 4): a full symmetric PSD precision P_i per center.

    Costs O(n·N·D²) time and O(N·D²) memory per evaluation; meant for small D.  The gradient is
    the one for symmetric matrices (eq. 8) and ``project`` clips negative eigenvalues (the PSD
    cone projection of Weinberger & Saul) after each step.
    """

    kind = "full"

    def initial_params(self, lengthscale, centers, rng):
        n_centers, dim = centers.shape
        return {"precision": np.broadcast_to(np.eye(dim) / lengthscale**2, (n_centers, dim, dim)).copy()}

    def lengthscales(self, params):
        eigenvalues = np.linalg.eigvalsh(params["precision"])
        return np.exp(-0.5 * np.log(np.maximum(eigenvalues, 1e-300)).mean(axis=1))

    def public_attributes(self, params):
        return {"precisions_": params["precision"].copy()}

    def prepare(self, X, centers):
        return (X,)

    def quadratic_form(self, params, prepared, centers):
        X = prepared[0]
        P = params["precision"]
        XP = np.matmul(X[None], P)  # (N, n, D)
        CP = np.einsum("id,ide->ie", centers, P)
        q = (
            np.einsum("ine,ne->ni", XP, X)
            - 2.0 * np.einsum("ne,ie->ni", X, CP)
            + np.einsum("ie,ie->i", CP, centers)[None, :]
        )
        return np.maximum(q, 0.0)

    def quadratic_form_gradient(self, params, prepared, centers, weights):
        X = prepared[0]
        # Σ_n w δδᵀ with δ = x_n - c_i, expanded so no (n, N, D) difference array is needed.
        weighted_x = weights.T @ X  # (N, D)
        outer = np.einsum("ni,nd,ne->ide", weights, X, X, optimize=True)
        raw = (
            outer
            - np.einsum("id,ie->ide", weighted_x, centers)
            - np.einsum("id,ie->ide", centers, weighted_x)
            + weights.sum(axis=0)[:, None, None] * np.einsum("id,ie->ide", centers, centers)
        )
        return {"precision": symmetric_gradient(raw)}

    def regularisation(self, params):
        P = params["precision"]
        norms = np.sqrt(np.einsum("ide,ide->i", P, P))
        return float(norms.sum()), {"precision": symmetric_gradient(P / norms[:, None, None])}

    def project(self, params):
        P = params["precision"]
        P = 0.5 * (P + np.swapaxes(P, 1, 2))
        eigenvalues, eigenvectors = np.linalg.eigh(P)
        clipped = np.maximum(eigenvalues, 0.0)
        params["precision"] = np.einsum("ide,ie,ife->idf", eigenvectors, clipped, eigenvectors)

    def step_scales(self, params):
        P = params["precision"]
        dim = P.shape[1]
        diagonal_mean = float(np.einsum("idd->", P) / (P.shape[0] * dim))
        # A step of every one of the D² entries moves δᵀPδ by up to D times one entry's step.
        return {"precision": diagonal_mean / dim}


def symmetric_gradient(raw: np.ndarray) -> np.ndarray:
    """Eq. 8: the gradient with respect to a symmetric matrix's free entries, G + Gᵀ - diag(G)."""
    transposed = np.swapaxes(raw, -1, -2)
    diagonal = np.einsum("...dd->...d", raw)
    result = raw + transposed
    idx = np.arange(raw.shape[-1])
    result[..., idx, idx] -= diagonal
    return result


def make_kernel(kind: str, *, rank: int = 5, log_parametrised: bool = True) -> Kernel:
    """The kernel object of ``kind``; ``log_parametrised=False`` gives the paper's plain l_i."""
    if kind == "center":
        return IsotropicKernel(shared=True)
    if kind == "univariate":
        return IsotropicKernel(shared=False, log_parametrised=log_parametrised)
    if kind == "diagonal":
        return DiagonalKernel()
    if kind == "lowrank":
        return LowRankKernel(rank)
    if kind == "full":
        return FullKernel()
    raise ValueError(f"unknown kernel {kind!r}; choose one of {', '.join(KERNELS)}")
