"""AGPRegressor: the asymmetric-kernel Gaussian process as a scikit-learn estimator."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Integral, Real
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from agp import persistence
from agp._sklearn_compat import Interval, RealNotInt, StrOptions, check_sample_weight, fit_context, validate_data
from agp.centers import CENTER_METHODS, Centers, explicit_centers, select_centers
from agp.grid import default_lengthscales, grid_search
from agp.kernels import KERNELS, Kernel, Params, make_kernel, squared_distances
from agp.mean import MEAN_FUNCTIONS, TREE_ARRAYS, TreeEnsemble, fit_mean
from agp.objective import CenterSystem, loss_and_gradient
from agp.optimizers import DEFAULT_MAX_EPOCHS, LR_SCHEDULES, make_optimizer, schedule_factor

DEFAULT_NOISE_GRID = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
PREDICT_BLOCK_ROWS = 4096
# Validation rows when ``validation_fraction`` is a fraction: never fewer than the floor (fewer
# rows make the best-epoch choice noise; below twice the floor there is no room and the
# training loss decides), never more than the cap (a few thousand rows already pin the MSE down,
# while every extra row costs time each epoch and is lost to training).
MIN_VALIDATION_ROWS = 20
MAX_VALIDATION_ROWS = 10_000
# Row subsamples that keep a fit's memory and time bounded on millions of rows: the median
# distance for the lengthscale grid, the grid search's evaluation rows, the training loss.
GRID_ROWS = 10_000
LOSS_ROWS = 10_000
STATS_BLOCK_ROWS = 65_536

# ``multivariate`` is the paper's name for its full-precision kernel (eq. 4).
KERNEL_ALIASES = {"multivariate": "full"}
_PUBLIC_METRIC_ATTRIBUTES = ("lengthscales_", "precisions_", "precision_factors_")
_ARRAY_HYPER_PARAMETERS = ("centers", "center_targets")
_UNSAVED_HYPER_PARAMETERS = ("callback",)
# Model-file entries of the tree mean (format version 4): mean_tree_feature, mean_tree_threshold, ...
MEAN_TREE_PREFIX = "mean_tree_"

# The scikit-learn estimator checks AGPRegressor is known to fail, with the reason, for
# ``check_estimator(AGPRegressor(), expected_failed_checks=EXPECTED_FAILED_CHECKS)`` and
# ``parametrize_with_checks(..., expected_failed_checks=lambda _: EXPECTED_FAILED_CHECKS)``.
# scikit-learn's own stochastic estimators (SGDRegressor, MLPRegressor, ...) are listed as failing
# the same check; since 1.6 such lists are passed to the checks, as here, no longer read from an
# ``_xfail_checks`` tag. The weighted fit cannot equal the fit on repeated rows: the validation
# rows, the centers (n_centers is capped by the row count; k-means++ seeds from rows), the
# minibatches and the loss subsample all draw rows, so the repeated data gives other draws.
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "sample_weight is not equivalent to removing/repeating samples: the validation rows, centers "
        "and minibatches are drawn from the rows, not their weights"
    ),
}


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
        Number of centers (ignored when ``centers`` is given).  More centers than the rows left
        after validation are reduced to that number, with a warning.
    kernel : {"center", "univariate", "diagonal", "lowrank", "full", "multivariate"}, default="univariate"
        ``center`` is the center-GP (grid search only, no training); ``univariate`` one lengthscale
        per center (eq. 3); ``diagonal`` one per center and dimension; ``lowrank``
        ``diag(d_i) + U_i U_iᵀ``; ``full`` the paper's full symmetric PSD precision matrix (eq. 4,
        small D only).  ``"multivariate"`` is the paper's name for ``"full"``.
    rank : int, default=5
        Rank of ``U_i`` for the lowrank kernel.
    center_method : {"kmeans", "sampling", "spectral", "gmm"}, default="kmeans"
        How centers are chosen.  k-means runs as mini-batch k-means above 100 000 rows.
    centers : array-like of shape (N, D), default=None
        Explicit centers in input units (overrides ``n_centers`` and ``center_method``).
    center_targets : array-like of shape (N,) or (N, K), default=None
        Targets of explicit centers; by default each takes the target of the training row nearest to it.
    optimizer : {"adam", "sgd"}, default="adam"
        ``adam``: Adam on log-lengthscales (univariate, center) and log-precisions (diagonal,
        lowrank) or on the precision matrices themselves (full, projected onto the PSD cone),
        with steps relative to each parameter's initial size, so one learning rate works across
        datasets.  ``sgd``: the paper's SGD with momentum on the plain lengthscales (univariate)
        or precision matrices (full).
    learning_rate : float > 0, default=None
        ``None`` means 0.03 for adam and the paper's 1e-5 for sgd.
    warmup_steps : int >= 0, default=100
        The learning rate ramps up linearly over this many steps (at most one epoch's worth).
    lr_schedule : {"constant", "cosine"}, default="constant"
        The learning rate after the warm-up: ``constant`` keeps it; ``cosine`` decays it as
        ½(1 + cos(π p)), p the fraction of the remaining planned steps (``max_epochs`` epochs)
        taken, reaching 0 at the last one.  A ``callback`` that stops early stops it partway.
    batch_size : int, default=64
        Rows per gradient step.
    momentum : float in [0, 1), default=0.9
        SGD momentum (the paper's value).
    max_epochs : int, default=30
        Passes over the training rows.
    reg : float >= 0, default=1e-5
        μ of eq. 5 (weight of Σ l_i² or Σ ||P_i||_F).
    noise : float >= 0, default=None
        Fixed σ²; ``None`` grid-searches it over ``noise_grid`` jointly with the lengthscale.
    noise_grid : tuple of float >= 0, default=(1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
        Candidate σ² for the grid search.
    lengthscale_grid : tuple of float > 0, default=None
        Lengthscales (standardised units) for the grid search; ``None`` uses the median
        row-to-center distance (of at most 10 000 rows) times 2^-4 .. 2^6.
    mean : {"zero", "constant", "linear", "trees"}, default="linear"
        Mean function the AGP's residual is taken from (Rasmussen & Williams 2006, Sec. 2.7):
        ``zero`` none (the GP models the raw targets and decays to 0 away from the centers);
        ``constant`` subtracts the mean target; ``linear`` a ridge regression on the standardised
        inputs with its penalty chosen by GCV (``RidgeCV``) on the non-validation rows;
        ``trees`` gradient-boosted trees (scikit-learn ``HistGradientBoostingRegressor`` with its
        defaults, one per output) on the non-validation rows, stopped early on the validation
        rows above 10 000 rows; they are kept as plain arrays, so the model still saves without
        pickle (format version 4).
    validation_fraction : float in [0, 1), int >= 0 or None, default=0.1
        Rows held out from centers, standardisation statistics and training; the grid search
        and the choice of the best epoch use them.  A float is a fraction of the samples, kept
        between 20 and 10 000 rows (and 0 below 40 samples); an int is an exact number of
        rows (as in scikit-learn's ``HistGradientBoostingRegressor``).  ``None`` or 0: no
        validation, the training rows decide instead.
    validation_loss : {"mse", "huber"}, default="mse"
        Statistic of the validation rows that picks the best epoch.  ``mse`` the mean squared
        error.  ``huber`` twice Huber's loss (r² within δ, 2δ|r| - δ² beyond), with δ = 1.345 ×
        1.4826 × the median absolute deviation of the grid start's validation residuals, fixed
        for the whole fit: on heavy-tailed targets (flight delays) a few outlying validation
        rows would otherwise decide which epoch is kept.  ``history_["val_loss"]`` holds it.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the centers and the minibatch order.
    verbose : bool, default=False
        Print one line per epoch.
    callback : callable, default=None
        Called as ``callback(epoch, train_loss, val_loss)`` after every epoch (epoch 0 is the
        grid-search start); returning ``True`` stops training.

    Attributes
    ----------
    centers_ : ndarray of shape (N, D)
        Centers in input units.
    center_targets_ : ndarray of shape (N, K)
        Center targets in target units (the AGP's residual targets plus the mean function).
    lengthscales_ : ndarray of shape (N,)
        Trained lengthscale of every center (kernels ``center`` and ``univariate`` only), in
        standardised input units, whatever the optimiser's parametrisation.
    precisions_ : ndarray of shape (N, D) or (N, D, D)
        Trained precisions (matrix kernels only): the diagonals d_i for ``diagonal`` and
        ``lowrank``, the full matrices P_i for ``full``.
    precision_factors_ : ndarray of shape (N, D, rank)
        The U_i of the ``lowrank`` kernel.
    alpha_ : ndarray of shape (N, K)
        Weights of the kernel columns.
    lengthscale_, noise_ : float
        Grid-search results (the center-GP the training starts from).
    x_mean_, x_scale_ : ndarray of shape (D,)
        Standardisation of the inputs (statistics of the non-validation rows).
    y_mean_ : ndarray of shape (K,)
        The mean function's constant.
    mean_coef_ : ndarray of shape (D, K)
        Its slope on standardised inputs (zeros unless ``mean="linear"``).  For ``mean="trees"``
        ``y_mean_`` is the boosting's starting value and the trees add the rest.
    mean_penalty_ : float or None
        The ridge penalty GCV chose for ``mean="linear"``.
    history_ : dict
        ``{"train_loss": [...], "val_loss": [...]}``, MSE per epoch (the validation loss: the
        ``validation_loss`` statistic), entry 0 = grid start.  The training loss is taken on at
        most 10 000 training rows.
    best_epoch_ : int
        The epoch whose parameters were kept.
    validation_indices_ : ndarray of int
        Rows of X used for validation.
    n_features_in_ : int
        Number of input dimensions.

    Examples
    --------
    >>> import numpy as np
    >>> from agp import AGPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, (300, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * X[:, 1] ** 2
    >>> model = AGPRegressor(n_centers=15, max_epochs=5, random_state=0).fit(X, y)
    >>> model.lengthscales_.shape
    (15,)
    >>> bool(model.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_centers": [Interval(Integral, 1, None, closed="left")],
        "kernel": [StrOptions({*KERNELS, *KERNEL_ALIASES})],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "center_method": [StrOptions(set(CENTER_METHODS))],
        "centers": ["array-like", None],
        "center_targets": ["array-like", None],
        "optimizer": [StrOptions({"adam", "sgd"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "warmup_steps": [Interval(Integral, 0, None, closed="left")],
        "lr_schedule": [StrOptions(set(LR_SCHEDULES))],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "momentum": [Interval(Real, 0, 1, closed="left")],
        "max_epochs": [Interval(Integral, 0, None, closed="left")],
        "reg": [Interval(Real, 0, None, closed="left")],
        "noise": [Interval(Real, 0, None, closed="left"), None],
        "noise_grid": ["array-like"],
        "lengthscale_grid": ["array-like", None],
        "mean": [StrOptions(set(MEAN_FUNCTIONS))],
        "validation_fraction": [
            Interval(RealNotInt, 0, 1, closed="left"),
            Interval(Integral, 0, None, closed="left"),
            None,
        ],
        "validation_loss": [StrOptions({"mse", "huber"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    def __init__(
        self,
        *,
        n_centers: int = 25,
        kernel: str = "univariate",
        rank: int = 5,
        center_method: str = "kmeans",
        centers: ArrayLike | None = None,
        center_targets: ArrayLike | None = None,
        optimizer: str = "adam",
        learning_rate: float | None = None,
        warmup_steps: int = 100,
        lr_schedule: str = "constant",
        batch_size: int = 64,
        momentum: float = 0.9,
        max_epochs: int = DEFAULT_MAX_EPOCHS,
        reg: float = 1e-5,
        noise: float | None = None,
        noise_grid: tuple[float, ...] = DEFAULT_NOISE_GRID,
        lengthscale_grid: tuple[float, ...] | None = None,
        mean: str = "linear",
        validation_fraction: float | None = 0.1,
        validation_loss: str = "mse",
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
        self.warmup_steps = warmup_steps
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.momentum = momentum
        self.max_epochs = max_epochs
        self.reg = reg
        self.noise = noise
        self.noise_grid = noise_grid
        self.lengthscale_grid = lengthscale_grid
        self.mean = mean
        self.validation_fraction = validation_fraction
        self.validation_loss = validation_loss
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    # ------------------------------------------------------------------ scikit-learn plumbing
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _kernel_kind(self) -> str:
        return KERNEL_ALIASES.get(self.kernel, self.kernel)

    def _make_kernel(self) -> Kernel:
        # The paper's plain-lengthscale SGD; Adam works on log-lengthscales.
        return make_kernel(self._kernel_kind(), rank=self.rank, log_parametrised=self.optimizer != "sgd")

    def _check_grids(self) -> None:
        """Value checks the declarative constraints cannot state (finite, positive entries)."""
        if self.noise is not None and not np.isfinite(self.noise):
            raise ValueError(f"The 'noise' parameter of AGPRegressor must be finite, got {self.noise!r}")
        grid = np.asarray(self.noise_grid, dtype=float)
        if self.noise is None and (grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid >= 0))):
            raise ValueError(
                f"The 'noise_grid' parameter of AGPRegressor must hold finite numbers >= 0, got {self.noise_grid!r}"
            )
        if self.lengthscale_grid is not None:
            grid = np.asarray(self.lengthscale_grid, dtype=float)
            if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
                raise ValueError(
                    "The 'lengthscale_grid' parameter of AGPRegressor must hold finite numbers > 0, "
                    f"got {self.lengthscale_grid!r}"
                )

    def _validation_count(self, n_samples: int) -> int:
        value = self.validation_fraction
        if value is None or value == 0:
            return 0
        if isinstance(value, Integral):
            if value > n_samples - 2:
                raise ValueError(
                    f"validation_fraction={value} rows leaves fewer than 2 of the {n_samples} samples to fit on"
                )
            return int(value)
        if n_samples < 2 * MIN_VALIDATION_ROWS:
            return 0
        return int(np.clip(round(value * n_samples), MIN_VALIDATION_ROWS, MAX_VALIDATION_ROWS))

    def _center_count(self, n_fit_rows: int) -> int:
        """``n_centers``, clamped (with a warning) to what the non-validation rows can provide."""
        # Sampled centers are rows that then leave the training loss: keep one row to train on.
        available = n_fit_rows - 1 if self.center_method == "sampling" else n_fit_rows
        if self.n_centers <= available:
            return int(self.n_centers)
        warnings.warn(
            f"n_centers={self.n_centers} is more than the {available} rows available for centers; "
            f"using {available} centers",
            UserWarning,
            stacklevel=6,  # the caller of fit (past _center_count, _select_centers, _fit, fit, fit_context)
        )
        return available

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> AGPRegressor:
        """Select centers, grid-search the center-GP, then train the per-center kernels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.  A memory-mapped ``.npy`` (``np.load(path, mmap_mode="r")``) is read
            in blocks; the fit holds one standardised float64 copy of X and no
            (n_samples, n_centers) matrix, so millions of rows fit in bounded memory.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Training targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's squared error everywhere the fit measures one:
            the standardisation statistics, the mean function, k-means (and the centers' mean
            targets), the grid search, the training loss and the validation loss that picks
            the best epoch.  ``None``: every row weighs 1.  The validation rows are still drawn
            at random, so a weight of 2 is not the same fit as the row given twice.

        Returns
        -------
        self : AGPRegressor
            The fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from agp import AGPRegressor
        >>> X = np.linspace(0, 6, 200)[:, None]
        >>> model = AGPRegressor(n_centers=10, max_epochs=3, random_state=0).fit(X, np.sin(X[:, 0]))
        >>> model.best_epoch_ <= 3
        True
        """
        # Every product in a fit is small (at most a block of rows by D by N); BLAS/OpenMP threads
        # cost far more than they save there (measured 60x slower per step on a busy 2-core machine).
        with threadpool_limits(limits=1):
            return self._fit(X, y, sample_weight)

    def _fit(self, X: Any, y: Any, sample_weight: Any) -> AGPRegressor:
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        n_samples = len(X)
        if n_samples < 2:
            raise ValueError(f"AGPRegressor needs at least 2 samples, got n_samples={n_samples}")
        # None stays None: the unweighted fit keeps its exact arithmetic (and its results).
        weights = None if sample_weight is None else _checked_weight_range(check_sample_weight(sample_weight, X))
        self._check_grids()
        self._y_ndim = y.ndim
        Y = y.reshape(n_samples, -1).astype(np.float64)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))

        n_val = self._validation_count(n_samples)
        order = rng.permutation(n_samples)
        val_rows, fit_rows = np.sort(order[:n_val]), np.sort(order[n_val:])
        self.validation_indices_ = val_rows

        fit_weights = None if weights is None else weights[fit_rows]
        if fit_weights is not None and not np.sum(fit_weights) > 0:
            raise ValueError("sample_weight: every row left to fit on (outside the validation rows) has weight 0")

        # Standardise with statistics of the non-validation rows (paper, Section 5.1).
        self.x_mean_, scale = _column_mean_std(X, fit_rows, fit_weights)
        self.x_scale_ = np.where(scale > 1e-12 * np.maximum(1.0, np.abs(self.x_mean_)), scale, 1.0)
        Xs = _standardised(X, self.x_mean_, self.x_scale_)
        if self.mean == "trees":
            # Its own seed is drawn only here, so the other means keep their random streams.
            validation = (Xs[val_rows], Y[val_rows], None if weights is None else weights[val_rows])
            mean = fit_mean("trees", Xs[fit_rows], Y[fit_rows], fit_weights, validation, int(rng.integers(2**31 - 1)))
        else:
            mean = fit_mean(self.mean, Xs[fit_rows] if self.mean == "linear" else Xs[:0], Y[fit_rows], fit_weights)
        self.y_mean_, self.mean_coef_, self.mean_penalty_ = mean.intercept, mean.coef, mean.penalty
        self._mean_trees = mean.trees
        Yc = Y - mean(Xs)

        centers = self._select_centers(Xs, Yc, fit_rows, rng, fit_weights)
        train_rows = np.setdiff1d(fit_rows, fit_rows[centers.sample_rows]) if len(centers.sample_rows) else fit_rows
        # The grid is judged on rows the center targets were not computed from: the validation
        # rows when the centers are cell means or samples of the training rows. Given centers
        # were fitted to no row (at most one row's target each), so every row can judge: on the
        # paper's blob task (1100 pixels) that is 10x the rows and a steadier center-GP.
        grid_rows = val_rows if n_val > 0 else train_rows
        if self.centers is not None:
            grid_rows = np.union1d(val_rows, train_rows)
        eval_rows = _subsample(grid_rows, GRID_ROWS, rng)

        # Center-GP by grid search (its result also initialises the asymmetric kernels).
        sq_centers = squared_distances(centers.points, centers.points)
        sq_eval = squared_distances(Xs[eval_rows], centers.points)
        if self.lengthscale_grid is None:
            sample = _subsample(train_rows, GRID_ROWS, rng)
            lengthscales = default_lengthscales(squared_distances(Xs[sample], centers.points))
        else:
            lengthscales = np.asarray(self.lengthscale_grid, dtype=float)
        noises = np.asarray([self.noise] if self.noise is not None else self.noise_grid, dtype=float)
        grid = grid_search(
            sq_centers,
            centers.targets,
            sq_eval,
            Yc[eval_rows],
            lengthscales,
            noises,
            None if weights is None else weights[eval_rows],
        )
        self.lengthscale_, self.noise_ = grid.lengthscale, grid.noise

        kernel = self._make_kernel()
        system = CenterSystem(
            kernel, centers.points, kernel.prepare(centers.points, centers.points), centers.targets, grid.noise
        )
        params = kernel.initial_params(grid.lengthscale, centers.points, rng)
        self._kernel_params, self.alpha_ = self._train(
            kernel, system, params, Xs, Yc, train_rows, val_rows, rng, weights
        )

        if self.centers is not None:
            self.centers_ = np.array(self.centers, dtype=float)
        elif len(centers.sample_rows):
            self.centers_ = X[fit_rows[centers.sample_rows]]  # exact rows, not a standardise round trip
        else:
            self.centers_ = centers.points * self.x_scale_ + self.x_mean_
        self._centers_standardised = centers.points
        self.center_targets_ = centers.targets + self._mean_at(centers.points)
        self._center_targets_centred = centers.targets
        self._set_public_metric(kernel)
        return self

    def _set_public_metric(self, kernel: Kernel) -> None:
        for name in _PUBLIC_METRIC_ATTRIBUTES:
            self.__dict__.pop(name, None)  # a refit with another kernel kind must not keep stale ones
        public = kernel.public_attributes(self._kernel_params)
        if kernel.kind == "center":  # one shared lengthscale, reported per center like the others
            public["lengthscales_"] = np.full(len(self._centers_standardised), public["lengthscales_"][0])
        for name, value in public.items():
            setattr(self, name, value)

    def _select_centers(
        self,
        Xs: np.ndarray,
        Yc: np.ndarray,
        fit_rows: np.ndarray,
        rng: np.random.Generator,
        weights: np.ndarray | None,
    ) -> Centers:
        if self.centers is None:
            n_centers = self._center_count(len(fit_rows))
            return select_centers(Xs[fit_rows], Yc[fit_rows], n_centers, self.center_method, rng, weights)
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
        return explicit_centers(points, Xs[fit_rows], Yc[fit_rows], targets, weights)

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
        weights: np.ndarray | None = None,
    ) -> tuple[Params, np.ndarray]:
        """Minibatch training (rows prepared batch by batch: streaming, no n × N matrix kept).

        Returns the best epoch's parameters and weights α.
        """
        loss_rows = _subsample(train_rows, LOSS_ROWS, rng)

        huber_delta: float | None = None  # set from the grid start's validation residuals

        def mse(rows: np.ndarray, alpha: np.ndarray, huber_delta: float | None = None) -> float:
            """(Weighted) mean squared error, or twice the Huber loss with ``huber_delta``."""
            total = 0.0
            row_weights = None if weights is None else weights[rows]
            if row_weights is not None and not np.sum(row_weights) > 0:
                row_weights = None  # only weight-0 rows: their plain MSE still ranks the epochs
            for first in range(0, len(rows), PREDICT_BLOCK_ROWS):
                block = rows[first : first + PREDICT_BLOCK_ROWS]
                prediction = system.predict(params, kernel.prepare(Xs[block], system.centers), alpha)
                squares = (prediction - Yc[block]) ** 2
                if huber_delta is not None:
                    # quadratic within δ, linear beyond: one delayed flight cannot pick the epoch
                    size = np.sqrt(squares)
                    squares = np.where(size <= huber_delta, squares, 2.0 * huber_delta * size - huber_delta**2)
                if row_weights is not None:
                    squares *= row_weights[first : first + PREDICT_BLOCK_ROWS, None]
                total += float(np.sum(squares))
            norm = len(rows) if row_weights is None else float(np.sum(row_weights))
            return total / (norm * Yc.shape[1])

        self.history_: dict[str, list[float]] = {"train_loss": [], "val_loss": []}
        start = {name: value.copy() for name, value in params.items()}
        best_val, self.best_epoch_, best_params, best_alpha = np.inf, 0, start, np.zeros(0)
        optimizer = make_optimizer(self.optimizer, self.learning_rate, self.momentum, kernel.step_scales(params))
        # The center-GP is the grid result itself; it has no per-center metric to train.
        epochs = 0 if kernel.kind == "center" else int(self.max_epochs)
        n_train, batch_size = len(train_rows), int(self.batch_size)
        steps_per_epoch = -(-n_train // batch_size)
        warmup = min(int(self.warmup_steps), steps_per_epoch)
        total_steps = epochs * steps_per_epoch
        step = 0
        for epoch in range(epochs + 1):
            try:
                if epoch > 0:
                    order = train_rows[rng.permutation(n_train)]
                    for first in range(0, n_train, batch_size):
                        batch = order[first : first + batch_size]
                        prepared = kernel.prepare(Xs[batch], system.centers)
                        _, grads = loss_and_gradient(
                            system, params, prepared, Yc[batch], self.reg, None if weights is None else weights[batch]
                        )
                        step += 1
                        optimizer.step(params, grads, schedule_factor(step, warmup, total_steps, self.lr_schedule))
                        kernel.project(params)
                        kernel.bound(params, start)
                alpha = system.weights(params)
            except np.linalg.LinAlgError as error:
                # Never lose the epochs already trained: keep the best one and say why we stopped.
                warnings.warn(
                    f"AGPRegressor stopped training in epoch {epoch} ({error}); keeping epoch {self.best_epoch_}",
                    ConvergenceWarning,
                    stacklevel=5,  # the caller of fit
                )
                break
            train_loss = mse(loss_rows, alpha)
            if epoch == 0 and self.validation_loss == "huber" and len(val_rows):
                huber_delta = _huber_delta(
                    system.predict(params, kernel.prepare(Xs[val_rows], system.centers), alpha) - Yc[val_rows]
                )
            val_loss = mse(val_rows, alpha, huber_delta) if len(val_rows) else train_loss
            if not np.isfinite(val_loss):
                break  # diverged (e.g. too large an SGD learning rate); keep the best so far
            self.history_["train_loss"].append(train_loss)
            self.history_["val_loss"].append(val_loss)
            if val_loss < best_val:
                best_val, self.best_epoch_ = val_loss, epoch
                best_params, best_alpha = {name: value.copy() for name, value in params.items()}, alpha
            if self.verbose:
                print(f"[AGPRegressor] epoch {epoch:3d}  train MSE {train_loss:.6g}  val MSE {val_loss:.6g}")
            if self.callback is not None and self.callback(epoch, train_loss, val_loss):
                break
        if not best_alpha.size:  # even the grid start could not be solved or evaluated
            raise ValueError("AGPRegressor could not solve its center system at the grid-search start")
        return best_params, best_alpha

    # ------------------------------------------------------------------ predict
    def _mean_at(self, Xs: np.ndarray) -> np.ndarray:
        """(n, K) mean function at standardised rows; the AGP models the targets minus this."""
        mean = Xs @ self.mean_coef_ + self.y_mean_
        trees = getattr(self, "_mean_trees", None)
        if trees is not None:
            mean += trees(Xs, len(self.y_mean_))
        return mean

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs, in the units given to :meth:`fit`.  Rows are predicted in blocks of 4096, so
            a memory-mapped array of any length needs only the output's memory.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictions, one- or two-dimensional like the ``y`` given to :meth:`fit`.

        Examples
        --------
        >>> import numpy as np
        >>> from agp import AGPRegressor
        >>> X = np.linspace(0, 6, 200)[:, None]
        >>> model = AGPRegressor(n_centers=10, max_epochs=3, random_state=0).fit(X, np.sin(X[:, 0]))
        >>> model.predict([[1.5], [4.5]]).round(1)
        array([ 1., -1.])
        """
        check_is_fitted(self, "alpha_")
        X = np.asarray(validate_data(self, X, reset=False, dtype=np.float64))
        kernel = self._make_kernel()
        centers = self._centers_standardised
        prediction = np.empty((len(X), self.alpha_.shape[1]))
        for first in range(0, len(X), PREDICT_BLOCK_ROWS):
            block = slice(first, first + PREDICT_BLOCK_ROWS)
            Xs = (X[block] - self.x_mean_) / self.x_scale_
            features = kernel.features(self._kernel_params, kernel.prepare(Xs, centers), centers)
            prediction[block] = features @ self.alpha_ + self._mean_at(Xs)
        return prediction.ravel() if self._y_ndim == 1 else prediction

    # ------------------------------------------------------------------ state and persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The fitted model as named arrays plus a JSON-serialisable document.

        Returns
        -------
        arrays : dict of str to ndarray
            ``centers``, ``centers_standardised``, ``center_targets`` (residual), ``alpha``,
            ``x_mean``, ``x_scale``, ``y_mean``, ``mean_coef``, ``validation_indices``, one
            ``param__NAME`` per internal kernel parameter and, for ``mean="trees"``, the trees'
            ``mean_tree_NAME`` arrays (``agp.mean.TreeEnsemble``).
        document : dict
            Kernel kind, hyper-parameters, shapes, grid result, history.  :meth:`from_state`
            rebuilds an identical estimator from both.
        """
        check_is_fitted(self, "alpha_")
        hyper = {
            key: value
            for key, value in self.get_params(deep=False).items()
            if key not in _ARRAY_HYPER_PARAMETERS + _UNSAVED_HYPER_PARAMETERS
        }
        if hyper["lr_schedule"] == "constant":
            # The default, and what files without the entry mean: readers that predate the
            # option (counting's model schema) then see no unknown field.
            del hyper["lr_schedule"]
        hyper["noise_grid"] = [float(v) for v in hyper["noise_grid"]]
        if not isinstance(hyper["random_state"], (int, np.integer)):
            hyper["random_state"] = None  # a RandomState object has no faithful JSON form
        if hyper["lengthscale_grid"] is not None:
            hyper["lengthscale_grid"] = [float(v) for v in hyper["lengthscale_grid"]]
        document = {
            "kernel": self._kernel_kind(),
            "hyper_parameters": hyper,
            "n_features_in": int(self.n_features_in_),
            "n_outputs": int(self.alpha_.shape[1]),
            "y_ndim": int(self._y_ndim),
            "standardisation": {
                "x": "per-dimension mean and std of the non-validation rows (arrays x_mean, x_scale)",
                "y": (
                    "mean function subtracted: y_mean + standardised x @ mean_coef (both 0 for the zero mean, "
                    "mean_coef = 0 for the constant mean; a GCV ridge on the non-validation rows for the linear mean)"
                ),
            },
            "lengthscale": float(self.lengthscale_),
            "noise": float(self.noise_),
            "mean_penalty": self.mean_penalty_,
            "best_epoch": int(self.best_epoch_),
            "history": {key: [float(v) for v in values] for key, values in self.history_.items()},
        }
        arrays = {
            "centers": self.centers_,
            "centers_standardised": self._centers_standardised,
            "center_targets": self._center_targets_centred,
            "alpha": self.alpha_,
            "x_mean": self.x_mean_,
            "x_scale": self.x_scale_,
            "y_mean": self.y_mean_,
            "mean_coef": self.mean_coef_,
            "validation_indices": self.validation_indices_,
            **{persistence.PARAM_PREFIX + name: value for name, value in self._kernel_params.items()},
        }
        trees = getattr(self, "_mean_trees", None)
        if trees is not None:
            arrays.update({MEAN_TREE_PREFIX + name: value for name, value in trees.arrays().items()})
            document["mean_trees"] = int(len(trees.roots))
        return arrays, document

    def _format_version(self) -> int:
        """The oldest file format that holds this model: 4 only for the tree mean, so that files
        without trees stay readable by agp versions that read format 3."""
        return 4 if getattr(self, "_mean_trees", None) is not None else 3

    @classmethod
    def from_state(
        cls, arrays: dict[str, np.ndarray], document: dict[str, Any], format_version: int = persistence.FORMAT_VERSION
    ) -> AGPRegressor:
        """Rebuild a fitted estimator from :meth:`get_state`'s output.

        Parameters
        ----------
        arrays, document
            As returned by :meth:`get_state` (or read from a model file).
        format_version : int, default=persistence.FORMAT_VERSION
            Version of the layout, for files written by earlier versions: version 1 predates
            the mean function (constant mean), versions 1-2 named the validation size
            ``n_validation`` and mapped ``kernel="multivariate"`` to ``diagonal``.

        Returns
        -------
        model : AGPRegressor
            A fitted estimator predicting exactly as the one that was exported.

        Raises
        ------
        ValueError
            If arrays are missing (the message names them).
        """
        required = {"centers", "centers_standardised", "center_targets", "alpha", "x_mean", "x_scale", "y_mean"}
        if format_version >= 2:
            required.add("mean_coef")
        missing = required - set(arrays)
        if missing:
            raise ValueError(f"incomplete {persistence.FORMAT_NAME} file (missing {', '.join(sorted(missing))})")
        hyper = dict(document["hyper_parameters"])
        # Version 1 predates the mean function: those models used the constant mean.
        hyper.setdefault("mean", "constant")
        if "n_validation" in hyper:
            hyper["validation_fraction"] = hyper.pop("n_validation")
        if format_version <= 2 and hyper.get("kernel") == "multivariate":
            hyper["kernel"] = "diagonal"  # what the alias meant then
        hyper["noise_grid"] = tuple(hyper["noise_grid"])
        if hyper.get("lengthscale_grid") is not None:
            hyper["lengthscale_grid"] = tuple(hyper["lengthscale_grid"])
        known = cls._get_param_names()
        model = cls(**{key: value for key, value in hyper.items() if key in known})
        model.n_features_in_ = int(document["n_features_in"])
        model._y_ndim = int(document["y_ndim"])
        model.centers_ = arrays["centers"]
        model._centers_standardised = arrays["centers_standardised"]
        model._center_targets_centred = arrays["center_targets"]
        model.alpha_ = arrays["alpha"]
        model.x_mean_ = arrays["x_mean"]
        model.x_scale_ = arrays["x_scale"]
        model.y_mean_ = arrays["y_mean"]
        model.mean_coef_ = arrays.get("mean_coef", np.zeros((model.n_features_in_, model.alpha_.shape[1])))
        model.mean_penalty_ = document.get("mean_penalty")
        model._mean_trees = None
        tree_arrays = {name: arrays.get(MEAN_TREE_PREFIX + name) for name in TREE_ARRAYS}
        if any(value is not None for value in tree_arrays.values()) or hyper.get("mean") == "trees":
            missing_trees = sorted(MEAN_TREE_PREFIX + name for name, value in tree_arrays.items() if value is None)
            if missing_trees:
                raise ValueError(f"incomplete {persistence.FORMAT_NAME} file (missing {', '.join(missing_trees)})")
            model._mean_trees = TreeEnsemble.from_arrays(tree_arrays)  # type: ignore[arg-type]
        model.center_targets_ = model._center_targets_centred + model._mean_at(model._centers_standardised)
        model.validation_indices_ = arrays.get("validation_indices", np.zeros(0, dtype=int))
        prefix = persistence.PARAM_PREFIX
        model._kernel_params = {name[len(prefix) :]: value for name, value in arrays.items() if name.startswith(prefix)}
        model.lengthscale_ = float(document["lengthscale"])
        model.noise_ = float(document["noise"])
        model.best_epoch_ = int(document["best_epoch"])
        model.history_ = {key: list(values) for key, values in document["history"].items()}
        model._set_public_metric(model._make_kernel())
        return model

    def save(self, path: str | Path, metadata: dict | None = None) -> None:
        """Write the fitted model to one ``.npz`` file (arrays + JSON metadata, no pickle).

        Parameters
        ----------
        path : str or Path
            Written exactly (any extension), through a temporary file renamed into place.
        metadata : dict, default=None
            JSON-serialisable caller data, returned by :meth:`load` as ``metadata_``.
        """
        arrays, document = self.get_state()
        persistence.write_model_file(path, arrays, document, metadata, format_version=self._format_version())

    @classmethod
    def load(cls, path: str | Path) -> AGPRegressor:
        """Read a model written by :meth:`save`; ``.metadata_`` holds the caller's metadata.

        Parameters
        ----------
        path : str or Path
            A model file.

        Returns
        -------
        model : AGPRegressor
            The fitted estimator.

        Raises
        ------
        ValueError
            ``"{path}: {problem}"`` for anything that is not a readable model file.
        """
        arrays, document, version = persistence.read_model_file(path)
        try:
            model = cls.from_state(arrays, document, version)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None
        model.metadata_ = document.get("user_metadata", {})
        return model


def _huber_delta(residuals: np.ndarray) -> float:
    """Huber's δ = 1.345 σ̂ (95 % efficiency at the normal), σ̂ = 1.4826 · MAD of the residuals."""
    spread = 1.4826 * float(np.median(np.abs(residuals - np.median(residuals))))
    return 1.345 * spread if spread > 0 else np.inf


def _subsample(rows: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` itself when it has at most ``limit`` entries, else a sorted random subset."""
    return rows if len(rows) <= limit else np.sort(rng.choice(rows, size=limit, replace=False))


# Limits on sample_weight beyond scikit-learn's finite and non-negative: past them the fit's
# float64 sums break down and NumPy/scikit-learn print multi-line RuntimeWarnings (squared
# gradients overflow above ~1e154; a row 1e16 times heavier than another makes the lighter rows
# vanish below the rounding and RidgeCV's leave-one-out divides by zero).
MAX_SAMPLE_WEIGHT = 1e100
MAX_SAMPLE_WEIGHT_RATIO = 1e12


def _checked_weight_range(weights: np.ndarray) -> np.ndarray:
    """``weights``, or a one-line ValueError when they are too large or too unequal to fit on."""
    positive = weights[weights > 0]
    if positive.size == 0:
        return weights  # all zero: the fit names that problem itself
    largest, smallest = float(positive.max()), float(positive.min())
    if largest > MAX_SAMPLE_WEIGHT:
        raise ValueError(
            f"sample_weight: the largest weight is {largest:.3g} (row {int(np.argmax(weights))}), above "
            f"{MAX_SAMPLE_WEIGHT:.0e}: divide them all by one factor (their ratios stay; the loss scales "
            "against `reg` with it)"
        )
    if largest / smallest > MAX_SAMPLE_WEIGHT_RATIO:
        raise ValueError(
            f"sample_weight: the largest weight ({largest:.3g}, row {int(np.argmax(weights))}) is "
            f"{largest / smallest:.3g} times the smallest non-zero one ({smallest:.3g}, row "
            f"{int(np.flatnonzero(weights == smallest)[0])}); at most {MAX_SAMPLE_WEIGHT_RATIO:.0e}, beyond which "
            "the lighter rows vanish below float64 precision: clip the weights or give such rows weight 0"
        )
    return weights


def _column_mean_std(
    X: np.ndarray, rows: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(Weighted) mean and std of ``X[rows]`` per column, two passes over row blocks (no copy of
    X[rows]); ``weights`` are the weights of ``rows``."""
    blocks = [slice(first, first + STATS_BLOCK_ROWS) for first in range(0, len(rows), STATS_BLOCK_ROWS)]
    if weights is None:
        total = np.zeros(X.shape[1])
        for block in blocks:
            total += X[rows[block]].sum(axis=0)
        mean = total / len(rows)
        squares = np.zeros(X.shape[1])
        for block in blocks:
            squares += ((X[rows[block]] - mean) ** 2).sum(axis=0)
        return mean, np.sqrt(squares / len(rows))
    mass = float(np.sum(weights))
    mean = sum((weights[block] @ X[rows[block]] for block in blocks), np.zeros(X.shape[1])) / mass
    variance = sum((weights[block] @ (X[rows[block]] - mean) ** 2 for block in blocks), np.zeros(X.shape[1])) / mass
    return mean, np.sqrt(variance)


def _standardised(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(X - mean) / scale as one new float64 array, filled block by block (X may be a memmap)."""
    out = np.empty(X.shape, dtype=np.float64)
    for first in range(0, len(X), STATS_BLOCK_ROWS):
        block = slice(first, first + STATS_BLOCK_ROWS)
        np.subtract(X[block], mean, out=out[block])
        out[block] /= scale
    return out
