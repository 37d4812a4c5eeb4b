"""AGPRegressor: the asymmetric-kernel Gaussian process as a scikit-learn estimator."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from agp.centers import CENTER_METHODS, Centers, explicit_centers, select_centers
from agp.grid import default_lengthscales, grid_search
from agp.kernels import KERNELS, Kernel, Params, make_kernel, squared_distances, take_rows
from agp.mean import MEAN_FUNCTIONS, fit_mean
from agp.objective import CenterSystem, loss_and_gradient
from agp.optimizers import make_optimizer

DEFAULT_NOISE_GRID = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
PREDICT_BLOCK_ROWS = 4096

# The umbrella name for the multivariate kernel; "diagonal" is the one that scales.
KERNEL_ALIASES = {"multivariate": "diagonal"}


class AGPRegressor(RegressorMixin, BaseEstimator):
    """Asymmetric-kernel Gaussian process regression (Pintea, van Gemert & Smeulders, PRL 2018).

    A GP on ``n_centers`` data centers whose kernel is asymmetric: center ``i`` measures distances
    with its own metric ``P_i`` (eqs. 3-4).  The metrics start from the center-GP found by grid
    search on the validation rows and are trained on the remaining rows by minibatch gradient
    descent on the regularised squared loss (eq. 5); the epoch with the lowest validation MSE is
    kept.  See docs/agp.md.

    Parameters
    ----------
    n_centers : int, default=25
        Number of centers (ignored when ``centers`` is given).
    kernel : {"center", "univariate", "diagonal", "lowrank", "full"}, default="univariate"
        ``center`` is the center-GP (grid search only, no training); ``univariate`` one lengthscale
        per center; ``diagonal`` one per center and dimension; ``lowrank`` ``diag(d_i) + U_i U_iᵀ``;
        ``full`` the paper's full precision matrix (small D only).  ``"multivariate"`` is an alias
        of ``"diagonal"``.
    rank : int, default=5
        Rank of ``U_i`` for the lowrank kernel.
    center_method : {"kmeans", "sampling", "spectral", "gmm"}, default="kmeans"
    centers : array of shape (N, D), default=None
        Explicit centers in input units (overrides ``n_centers`` and ``center_method``).
    center_targets : array of shape (N,) or (N, K), default=None
        Targets of explicit centers; by default each takes the mean target of its nearest rows.
    optimizer : {"adam", "sgd"}, default="adam"
        ``adam``: log-parametrised lengthscales/precisions and steps relative to each parameter's
        initial size, so one learning rate works across datasets.  ``sgd``: the paper's SGD with
        momentum on the plain lengthscales (univariate) or precision matrices (full).
    learning_rate : float, default=None
        ``None`` means 0.03 for adam and the paper's 1e-5 for sgd.
    batch_size : int, default=64
    momentum : float, default=0.9
        SGD momentum (the paper's value).
    max_epochs : int, default=30
    reg : float, default=1e-5
        μ of eq. 5 (weight of Σ l_i² or Σ ||P_i||_F).
    noise : float, default=None
        Fixed σ²; ``None`` grid-searches it over ``noise_grid`` jointly with the lengthscale.
    noise_grid : tuple of float, default=(1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    lengthscale_grid : tuple of float, default=None
        Lengthscales (standardised units) for the grid search; ``None`` uses the median
        row-to-center distance times 2^-4 .. 2^6.
    mean : {"constant", "linear"}, default="linear"
        Mean function the AGP's residual is taken from (Rasmussen & Williams 2006, Sec. 2.7):
        ``constant`` subtracts the mean target (the paper); ``linear`` a ridge regression on the
        standardised inputs with its penalty chosen by GCV (``RidgeCV``) on the non-validation
        rows, and the AGP models its residuals.
    n_validation : int or float, default=100
        Rows held out from centers, standardisation statistics and training; the grid search and
        the choice of the best epoch use them.  A float in (0, 1) is a fraction; 0 uses the
        training rows instead.
    random_state : int, RandomState instance or None, default=None
    verbose : bool, default=False
        Print one line per epoch.
    callback : callable, default=None
        Called as ``callback(epoch, train_loss, val_loss)`` after every epoch (epoch 0 is the
        grid-search start); returning ``True`` stops training.

    Attributes
    ----------
    centers_ : ndarray (N, D) in input units
    center_targets_ : ndarray (N, K), in target units (the AGP's residual targets plus the mean
        function at the centers)
    kernel_params_ : dict of ndarray, the trained (best-epoch) kernel parameters
    lengthscale_, noise_ : grid-search results (the center-GP)
    y_mean_ : ndarray (K,), the mean function's constant
    mean_coef_ : ndarray (D, K), its slope on standardised inputs (zeros for ``mean="constant"``)
    mean_penalty_ : float or None, the ridge penalty GCV chose for ``mean="linear"``
    history_ : {"train_loss": [...], "val_loss": [...]}, MSE per epoch, entry 0 = grid start
    best_epoch_ : int
    validation_indices_ : ndarray of rows of X used for validation
    n_features_in_ : int
    """

    def __init__(
        self,
        n_centers: int = 25,
        kernel: str = "univariate",
        rank: int = 5,
        center_method: str = "kmeans",
        centers: np.ndarray | None = None,
        center_targets: np.ndarray | None = None,
        optimizer: str = "adam",
        learning_rate: float | None = None,
        batch_size: int = 64,
        momentum: float = 0.9,
        max_epochs: int = 30,
        reg: float = 1e-5,
        noise: float | None = None,
        noise_grid: tuple[float, ...] = DEFAULT_NOISE_GRID,
        lengthscale_grid: tuple[float, ...] | None = None,
        mean: str = "linear",
        n_validation: float = 100,
        random_state: int | np.random.RandomState | None = None,
        verbose: bool = False,
        callback: Callable[[int, float, float], bool | None] | None = None,
    ) -> None:
        self.n_centers = n_centers
        self.kernel = kernel
        self.rank = rank
        self.center_method = center_method
        self.centers = centers
        self.center_targets = center_targets
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.momentum = momentum
        self.max_epochs = max_epochs
        self.reg = reg
        self.noise = noise
        self.noise_grid = noise_grid
        self.lengthscale_grid = lengthscale_grid
        self.mean = mean
        self.n_validation = n_validation
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    # ------------------------------------------------------------------ scikit-learn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _kernel_kind(self) -> str:
        kind = KERNEL_ALIASES.get(self.kernel, self.kernel)
        if kind not in KERNELS:
            raise ValueError(f"unknown kernel {self.kernel!r}; choose one of {', '.join(KERNELS)}")
        return kind

    def _make_kernel(self) -> Kernel:
        # The paper's plain-lengthscale SGD; Adam works on log-lengthscales.
        return make_kernel(self._kernel_kind(), rank=self.rank, log_parametrised=self.optimizer != "sgd")

    def _check_parameters(self) -> None:
        self._kernel_kind()
        if self.mean not in MEAN_FUNCTIONS:
            raise ValueError(f"unknown mean {self.mean!r}; choose one of {', '.join(MEAN_FUNCTIONS)}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose 'adam' or 'sgd'")
        if self.centers is None and self.center_method not in CENTER_METHODS:
            raise ValueError(f"unknown center_method {self.center_method!r}; choose one of {', '.join(CENTER_METHODS)}")
        for name in ("n_centers", "batch_size", "rank"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.max_epochs, numbers.Integral) or self.max_epochs < 0:
            raise ValueError(f"max_epochs must be a non-negative integer, got {self.max_epochs!r}")
        if self.noise is not None and not (np.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"noise must be a finite number >= 0, got {self.noise!r}")
        grid = np.asarray(self.noise_grid, dtype=float)
        if self.noise is None and (grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0)):
            raise ValueError(f"noise_grid must hold finite numbers >= 0, got {self.noise_grid!r}")

    def _validation_count(self, n_samples: int) -> int:
        value = self.n_validation
        if isinstance(value, numbers.Integral) and value >= 0:
            return int(value)
        if isinstance(value, numbers.Real) and 0.0 < value < 1.0:
            return round(value * n_samples)
        raise ValueError(f"n_validation must be an int >= 0 or a fraction in (0, 1), got {value!r}")

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> AGPRegressor:
        """Select centers, grid-search the center-GP, then train the per-center kernels."""
        # Every product in a fit is small (at most n x D by D x N); BLAS/OpenMP threads cost far
        # more than they save there (measured 60x slower per step on a busy 2-core machine).
        with threadpool_limits(limits=1):
            return self._fit(X, y)

    def _fit(self, X: Any, y: Any) -> AGPRegressor:
        self._check_parameters()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        self._y_ndim = y.ndim
        Y = y.reshape(len(y), -1).astype(np.float64)
        n_samples = len(X)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))

        n_val = self._validation_count(n_samples)
        explicit = self.centers is not None
        n_centers = 0 if explicit else int(self.n_centers)
        needed = n_centers + n_val + 1
        if n_samples < needed:
            noun = "sample" if n_samples == 1 else "samples"
            raise ValueError(
                f"AGPRegressor needs at least {needed} samples (n_centers={n_centers} + "
                f"n_validation={n_val} + 1 to train on), got {n_samples} {noun}"
            )

        order = rng.permutation(n_samples)
        val_rows, fit_rows = np.sort(order[:n_val]), np.sort(order[n_val:])
        self.validation_indices_ = val_rows

        # Standardise with statistics of the non-validation rows (paper, Section 5.1).
        self.x_mean_ = X[fit_rows].mean(axis=0)
        scale = X[fit_rows].std(axis=0)
        self.x_scale_ = np.where(scale > 1e-12 * np.maximum(1.0, np.abs(self.x_mean_)), scale, 1.0)
        Xs = (X - self.x_mean_) / self.x_scale_
        mean = fit_mean(self.mean, Xs[fit_rows], Y[fit_rows])
        self.y_mean_, self.mean_coef_, self.mean_penalty_ = mean.intercept, mean.coef, mean.penalty
        Yc = Y - mean(Xs)

        centers = self._select_centers(Xs[fit_rows], Yc[fit_rows], rng)
        train_rows = np.setdiff1d(fit_rows, fit_rows[centers.sample_rows]) if len(centers.sample_rows) else fit_rows
        eval_rows = val_rows if n_val > 0 else train_rows

        # Center-GP by grid search (its result also initialises the asymmetric kernels).
        sq_centers = squared_distances(centers.points, centers.points)
        sq_eval = squared_distances(Xs[eval_rows], centers.points)
        lengthscales = (
            default_lengthscales(squared_distances(Xs[train_rows], centers.points))
            if self.lengthscale_grid is None
            else np.asarray(self.lengthscale_grid, dtype=float)
        )
        noises = np.asarray([self.noise] if self.noise is not None else self.noise_grid, dtype=float)
        grid = grid_search(sq_centers, centers.targets, sq_eval, Yc[eval_rows], lengthscales, noises)
        self.lengthscale_, self.noise_ = grid.lengthscale, grid.noise

        kernel = self._make_kernel()
        system = CenterSystem(
            kernel, centers.points, kernel.prepare(centers.points, centers.points), centers.targets, grid.noise
        )
        params = kernel.initial_params(grid.lengthscale, centers.points, rng)
        self._train(kernel, system, params, Xs, Yc, train_rows, val_rows, rng)

        if self.centers is not None:
            self.centers_ = np.array(self.centers, dtype=float)
        elif len(centers.sample_rows):
            self.centers_ = X[fit_rows[centers.sample_rows]]  # exact rows, not a standardise round trip
        else:
            self.centers_ = centers.points * self.x_scale_ + self.x_mean_
        self._centers_standardised = centers.points
        self.center_targets_ = centers.targets + self._mean_at(centers.points)
        self._center_targets_centred = centers.targets
        self.alpha_ = system.weights(self.kernel_params_)
        return self

    def _select_centers(self, Xs: np.ndarray, Yc: np.ndarray, rng: np.random.Generator) -> Centers:
        if self.centers is None:
            return select_centers(Xs, Yc, int(self.n_centers), self.center_method, rng)
        points = np.asarray(self.centers, dtype=float)
        if points.ndim != 2 or points.shape[1] != self.n_features_in_ or not np.all(np.isfinite(points)):
            raise ValueError(
                f"centers must be a finite array of shape (N, {self.n_features_in_}), got shape {points.shape}"
            )
        points = (points - self.x_mean_) / self.x_scale_
        targets = None
        if self.center_targets is not None:
            targets = np.asarray(self.center_targets, dtype=float)
            if targets.size != len(points) * Yc.shape[1] or not np.all(np.isfinite(targets)):
                raise ValueError(
                    f"center_targets must hold {Yc.shape[1]} finite value(s) for each of the {len(points)} centers, "
                    f"got shape {targets.shape}"
                )
            targets = targets.reshape(len(points), Yc.shape[1])
            targets = targets - self._mean_at(points)
        return explicit_centers(points, Xs, Yc, targets)

    def _train(
        self,
        kernel: Kernel,
        system: CenterSystem,
        params: Params,
        Xs: np.ndarray,
        Yc: np.ndarray,
        train_rows: np.ndarray,
        val_rows: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        prepared_train = kernel.prepare(Xs[train_rows], system.centers)
        prepared_val = kernel.prepare(Xs[val_rows], system.centers) if len(val_rows) else None
        y_train, y_val = Yc[train_rows], Yc[val_rows]

        def epoch_losses() -> tuple[float, float]:
            alpha = system.weights(params)
            train = float(np.mean((system.predict(params, prepared_train, alpha) - y_train) ** 2))
            if prepared_val is None:
                return train, train
            return train, float(np.mean((system.predict(params, prepared_val, alpha) - y_val) ** 2))

        self.history_ = {"train_loss": [], "val_loss": []}
        best_val, self.best_epoch_, best_params = np.inf, 0, {k: v.copy() for k, v in params.items()}
        optimizer = make_optimizer(self.optimizer, self.learning_rate, self.momentum, kernel.step_scales(params))
        # The center-GP is the grid result itself; it has no per-center metric to train.
        epochs = 0 if kernel.kind == "center" else int(self.max_epochs)
        n_train = len(train_rows)
        for epoch in range(epochs + 1):
            if epoch > 0:
                order = rng.permutation(n_train)
                for start in range(0, n_train, self.batch_size):
                    batch = order[start : start + self.batch_size]
                    _, grads = loss_and_gradient(
                        system, params, take_rows(prepared_train, batch), y_train[batch], self.reg
                    )
                    optimizer.step(params, grads)
                    kernel.project(params)
            train_loss, val_loss = epoch_losses()
            if not np.isfinite(val_loss):
                break  # diverged (e.g. too large an SGD learning rate); keep the best so far
            self.history_["train_loss"].append(train_loss)
            self.history_["val_loss"].append(val_loss)
            if val_loss < best_val:
                best_val, self.best_epoch_ = val_loss, epoch
                best_params = {k: v.copy() for k, v in params.items()}
            if self.verbose:
                print(f"[AGPRegressor] epoch {epoch:3d}  train MSE {train_loss:.6g}  val MSE {val_loss:.6g}")
            if self.callback is not None and self.callback(epoch, train_loss, val_loss):
                break
        self.kernel_params_ = best_params

    # ------------------------------------------------------------------ predict
    def _mean_at(self, Xs: np.ndarray) -> np.ndarray:
        """(n, K) mean function at standardised rows; the AGP models the targets minus this."""
        return Xs @ self.mean_coef_ + self.y_mean_

    def predict(self, X: Any) -> np.ndarray:
        """Predicted targets, (m,) or (m, K) like the y given to fit."""
        check_is_fitted(self, "alpha_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        kernel = self._make_kernel()
        Xs = (X - self.x_mean_) / self.x_scale_
        centers = self._centers_standardised
        # Row blocks bound the kernels' temporaries (the full kernel holds N x rows x D floats).
        prediction = np.concatenate(
            [
                kernel.features(self.kernel_params_, kernel.prepare(block, centers), centers) @ self.alpha_
                for block in np.array_split(Xs, max(1, -(-len(Xs) // PREDICT_BLOCK_ROWS)))
            ]
        )
        prediction += self._mean_at(Xs)
        return prediction.ravel() if self._y_ndim == 1 else prediction

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, metadata: dict | None = None) -> None:
        """Write the fitted model to one ``.npz`` file (arrays + JSON metadata, no pickle)."""
        from agp.persistence import save_model

        save_model(self, path, metadata)

    @classmethod
    def load(cls, path: str | Path) -> AGPRegressor:
        """Read a model written by :meth:`save`; ``.metadata_`` holds the caller's metadata."""
        from agp.persistence import load_model

        return load_model(path)
