"""Sparse GP regression (SGPR, Titsias 2009) with GPyTorch: the inducing-point peer of AGP.

GPyTorch is the optional extra ``counting[sparse]``; without it ``SparseGPRegressor`` raises
``PeerUnavailable`` at fit, and the comparison reports that instead of a figure.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.cluster import KMeans
from sklearn.preprocessing import StandardScaler

from counting.evaluate.peers.errors import PeerUnavailable

INSTALL_HINT = "gpytorch not installed (pip install 'counting[sparse]')"


@contextmanager
def _single_thread(torch):
    """Run on one thread: the matrices are tiny (n x inducing), and on a busy 2-core machine
    torch's worker threads spin against other processes and make a 1 s fit take 30 s."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


# linear_operator (GPyTorch's algebra) decorates its functions with torch.jit.script when it is
# imported, and torch (2.13 here) warns that torch.jit.script is deprecated: a note to that library's
# authors, which `counting compare` printed to its users. Only that warning, only while importing.
JIT_SCRIPT_DEPRECATED = r"`torch\.jit\.script` is deprecated"


def _import_gpytorch():
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=JIT_SCRIPT_DEPRECATED, category=DeprecationWarning)
            import gpytorch
        import torch
    except ImportError:
        raise PeerUnavailable(INSTALL_HINT) from None
    return gpytorch, torch


class SparseGPRegressor(RegressorMixin, BaseEstimator):
    """SGPR with ``n_inducing`` inducing points, initialised at k-means centres (as AGP's centres).

    Inducing locations, RBF length scale, output scale and noise are fitted together by Adam on
    the collapsed (Titsias) bound, on standardised inputs and targets.
    """

    def __init__(self, n_inducing: int = 25, n_iter: int = 150, learning_rate: float = 0.05, seed: int = 0):
        self.n_inducing = n_inducing
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.seed = seed

    def fit(self, X: np.ndarray, y: np.ndarray) -> SparseGPRegressor:
        gpytorch, torch = _import_gpytorch()
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float).ravel()
        if X.ndim != 2 or X.shape[0] != y.shape[0]:
            raise ValueError(f"X {X.shape} and y {y.shape}: expected (n, D) and (n,)")
        self.scaler_ = StandardScaler().fit(X)
        self.y_mean_, self.y_std_ = float(y.mean()), float(y.std() or 1.0)
        inputs = self.scaler_.transform(X)
        n_inducing = min(self.n_inducing, X.shape[0])
        centres = KMeans(n_clusters=n_inducing, n_init=3, random_state=self.seed).fit(inputs).cluster_centers_

        torch.manual_seed(self.seed)
        train_x = torch.as_tensor(inputs, dtype=torch.float64)
        train_y = torch.as_tensor((y - self.y_mean_) / self.y_std_, dtype=torch.float64)
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        model = _build_sgpr(gpytorch, train_x, train_y, likelihood, torch.as_tensor(centres)).double()
        model.train()
        likelihood.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=self.learning_rate)
        objective = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        self.loss_curve_ = []
        with _single_thread(torch):
            for _ in range(self.n_iter):
                optimizer.zero_grad()
                loss = -objective(model(train_x), train_y)
                loss.backward()
                optimizer.step()
                self.loss_curve_.append(float(loss.detach()))
        model.eval()
        likelihood.eval()
        self.model_, self.likelihood_ = model, likelihood
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        gpytorch, torch = _import_gpytorch()
        inputs = torch.as_tensor(self.scaler_.transform(np.asarray(X, dtype=float)), dtype=torch.float64)
        with torch.no_grad(), gpytorch.settings.fast_pred_var(), _single_thread(torch):
            mean = self.model_(inputs).mean.numpy()
        return mean * self.y_std_ + self.y_mean_


def _build_sgpr(gpytorch, train_x, train_y, likelihood, inducing_points):
    class SGPRModel(gpytorch.models.ExactGP):
        def __init__(self) -> None:
            super().__init__(train_x, train_y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
            # Standardised D-dim inputs are about sqrt(2D) apart: start the length scale there.
            base.base_kernel.lengthscale = float(np.sqrt(train_x.shape[1]))
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                base, inducing_points=inducing_points.clone(), likelihood=likelihood
            )

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    return SGPRModel()
