"""Explicit mean functions of the GP (Rasmussen & Williams 2006, Section 2.7, explicit basis functions).

The GP prior is zero-mean, so the estimator subtracts a mean function m(x) from the targets and
the AGP models what is left: f(x) = m(x) + AGP(x).

* ``zero``: m(x) = 0, the GP on the raw targets (a prior that decays to 0 far from the data,
  as for an image's dark background).
* ``constant``: m(x) = ȳ, the mean target of the non-validation rows (the paper's setting).
* ``linear``: m(x) = ȳ + x_sᵀ b, a ridge regression on the standardised inputs x_s, its penalty
  chosen by generalised cross-validation (scikit-learn ``RidgeCV``).  A handful of RBF centers
  cannot represent a linear trend in 1000 dimensions, while counts are close to linear in
  ImageNet class scores; the AGP then spends its centers on the non-linear rest.
* ``trees``: m(x) = ȳ_t + Σ_t tree_t(x_s), gradient-boosted regression trees (scikit-learn
  ``HistGradientBoostingRegressor`` with its default settings: at most 100 trees of 31 leaves)
  fitted on the non-validation rows, one ensemble per output; above 10 000 rows it stops early
  on the estimator's validation rows.  The trees are kept as plain arrays (:class:`TreeEnsemble`)
  and evaluated by a vectorised NumPy walk, so a model file holds them without pickle.  On the
  flight-delay data the AGP then learns what 100 trees left (docs/agp.md, "At scale").

Because the inputs are standardised with the same rows, their column means are 0 there and the
ridge intercept equals ȳ (up to rounding), so the constant and linear kinds share ``y_mean_`` and differ only in ``b``.
For the trees the constant is the boosting's starting value (the mean target of the rows the
trees were fitted on) and ``b`` is 0.

The AGP is trained on the mean function's in-sample residuals.  Leave-one-out residuals (r_i / (1 - h_ii))
would describe unseen rows better in principle, but measured worse for every kernel on Mall
(docs/agp.md, "Accuracy on Mall"), so the simpler choice stays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import RidgeCV

MEAN_FUNCTIONS = ("zero", "constant", "linear", "trees")
# Ridge penalties searched by GCV, for standardised inputs: wide enough for D from 1 to 1000s.
RIDGE_ALPHAS = np.logspace(-3, 7, 41)
# Rows the tree walk takes at once (measured fastest around 8192: larger blocks leave the cache).
TREE_WALK_ROWS = 8192
# The arrays of a TreeEnsemble, in the order of its fields (model files store them as mean_tree_NAME).
TREE_ARRAYS = ("feature", "threshold", "missing_left", "left", "right", "is_leaf", "value", "roots", "outputs")


@dataclass(frozen=True)
class TreeEnsemble:
    """Regression trees as plain arrays, the nodes of all trees concatenated.

    A row starts at each tree's root and goes to ``left`` when ``x[feature] <= threshold`` (a NaN
    goes left where ``missing_left``), else to ``right``, until a leaf; the ensemble's output ``k``
    is the sum of the leaf ``value`` of every tree with ``outputs == k``.  This is the rule of
    scikit-learn's ``TreePredictor`` for numerical features (leaf values with the learning rate
    applied), so the walk reproduces ``HistGradientBoostingRegressor.predict`` minus its constant.
    """

    feature: np.ndarray  # (nodes,) int64
    threshold: np.ndarray  # (nodes,) float64
    missing_left: np.ndarray  # (nodes,) bool
    left: np.ndarray  # (nodes,) int64, index into the concatenated nodes
    right: np.ndarray  # (nodes,) int64
    is_leaf: np.ndarray  # (nodes,) bool
    value: np.ndarray  # (nodes,) float64, used at leaves only
    roots: np.ndarray  # (trees,) int64
    outputs: np.ndarray  # (trees,) int64, the output column each tree adds to

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in TREE_ARRAYS}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> TreeEnsemble:
        """Rebuild from :meth:`arrays` (e.g. read from a model file), checking that every walk ends."""
        trees = cls(
            feature=np.asarray(arrays["feature"], dtype=np.int64),
            threshold=np.asarray(arrays["threshold"], dtype=np.float64),
            missing_left=np.asarray(arrays["missing_left"], dtype=bool),
            left=np.asarray(arrays["left"], dtype=np.int64),
            right=np.asarray(arrays["right"], dtype=np.int64),
            is_leaf=np.asarray(arrays["is_leaf"], dtype=bool),
            value=np.asarray(arrays["value"], dtype=np.float64),
            roots=np.asarray(arrays["roots"], dtype=np.int64),
            outputs=np.asarray(arrays["outputs"], dtype=np.int64),
        )
        n_nodes = len(trees.value)
        node_arrays = (trees.feature, trees.threshold, trees.missing_left, trees.left, trees.right, trees.is_leaf)
        inner = np.flatnonzero(~trees.is_leaf)
        consistent = all(a.shape == (n_nodes,) for a in node_arrays) and trees.roots.shape == trees.outputs.shape
        if consistent and len(trees.roots):
            # Trees lie one after another (roots[0] = 0, increasing) and a node's children come
            # after it inside its own tree (scikit-learn numbers nodes depth-first), so every walk
            # ends at a leaf of the tree it started in; anything else is a corrupt file.
            tree_of = np.searchsorted(trees.roots, np.arange(n_nodes), side="right") - 1
            children = np.concatenate([trees.left[inner], trees.right[inner]])
            parents = np.concatenate([inner, inner])
            consistent = (
                trees.roots[0] == 0
                and bool(np.all(np.diff(trees.roots) > 0))
                and bool(np.all((children > parents) & (children < n_nodes)))
                and bool(np.all(tree_of[np.minimum(children, n_nodes - 1)] == tree_of[parents]))
                and bool(np.all(trees.outputs >= 0))
                and bool(np.all(np.isfinite(trees.value)))
            )
        elif consistent:
            consistent = n_nodes == 0
        if not consistent:
            raise ValueError("mean_tree arrays are inconsistent (not a tree ensemble this agp wrote)")
        return trees

    @classmethod
    def from_histgradientboosting(cls, models: list) -> TreeEnsemble:
        """The trees of fitted ``HistGradientBoostingRegressor``s, one per output, as arrays.

        Reads ``_predictors`` (scikit-learn's per-iteration ``TreePredictor``, whose ``nodes`` is a
        structured array); the estimator's tests compare the walk with ``predict``.
        """
        fields: dict[str, list[np.ndarray]] = {name: [] for name in TREE_ARRAYS}
        offset = 0
        for output, model in enumerate(models):
            for (predictor,) in model._predictors:
                nodes = predictor.nodes
                if np.any(nodes["is_categorical"]):
                    raise ValueError("tree mean: categorical splits are not supported")
                leaf = nodes["is_leaf"].astype(bool)
                fields["feature"].append(np.where(leaf, 0, nodes["feature_idx"]).astype(np.int64))
                fields["threshold"].append(np.where(leaf, 0.0, nodes["num_threshold"]).astype(np.float64))
                fields["missing_left"].append(nodes["missing_go_to_left"].astype(bool))
                fields["left"].append(np.where(leaf, 0, nodes["left"].astype(np.int64) + offset))
                fields["right"].append(np.where(leaf, 0, nodes["right"].astype(np.int64) + offset))
                fields["is_leaf"].append(leaf)
                fields["value"].append(np.where(leaf, nodes["value"], 0.0).astype(np.float64))
                fields["roots"].append(np.array([offset], dtype=np.int64))
                fields["outputs"].append(np.array([output], dtype=np.int64))
                offset += len(nodes)
        empty = {"roots": np.int64, "outputs": np.int64, "threshold": np.float64, "value": np.float64}
        return cls.from_arrays(
            {
                name: np.concatenate(parts) if parts else np.zeros(0, dtype=empty.get(name, np.int64))
                for name, parts in fields.items()
            }
        )

    def _tree_depths(self) -> np.ndarray:
        """(trees,) the depth of each tree's deepest leaf (root = 0)."""
        depth = np.zeros(len(self.value), dtype=np.int64)
        inner = np.flatnonzero(~self.is_leaf)
        for _ in range(len(self.value)):  # one pass per level: children come after their parent
            new = depth.copy()
            new[self.left[inner]] = depth[inner] + 1
            new[self.right[inner]] = depth[inner] + 1
            if np.array_equal(new, depth):
                break
            depth = new
        return np.maximum.reduceat(depth, self.roots)

    def __call__(self, Xs: np.ndarray, n_outputs: int) -> np.ndarray:
        """(n, n_outputs) sum of the trees' leaf values at standardised rows ``Xs``.

        Tree by tree, all rows of a block at once, one gather per level; a leaf points to itself
        (threshold +inf), so every row simply takes as many steps as the tree is deep.
        """
        out = np.zeros((len(Xs), n_outputs))
        if len(self.roots) == 0:
            return out
        nodes = np.arange(len(self.value))
        left = np.where(self.is_leaf, nodes, self.left).astype(np.intp)
        right = np.where(self.is_leaf, nodes, self.right).astype(np.intp)
        threshold = np.where(self.is_leaf, np.inf, self.threshold)
        feature = np.where(self.is_leaf, 0, self.feature).astype(np.intp)
        depths = self._tree_depths()
        for first in range(0, len(Xs), TREE_WALK_ROWS):
            columns = np.ascontiguousarray(np.asarray(Xs[first : first + TREE_WALK_ROWS], dtype=np.float64).T)
            n_rows = columns.shape[1]
            flat, row = columns.ravel(), np.arange(n_rows)
            has_nan = bool(np.isnan(flat).any())
            for root, depth, output in zip(self.roots, depths, self.outputs):
                node = np.full(n_rows, root, dtype=np.intp)
                for _ in range(depth):
                    x = flat[feature[node] * n_rows + row]
                    go_left = x <= threshold[node]
                    if has_nan:
                        go_left |= np.isnan(x) & self.missing_left[node] & ~self.is_leaf[node]
                    node = np.where(go_left, left[node], right[node])
                out[first : first + n_rows, output] += self.value[node]
        return out


@dataclass(frozen=True)
class MeanFunction:
    """m(x_s) = intercept + x_s @ coef (+ trees(x_s)), with x_s standardised inputs."""

    intercept: np.ndarray  # (K,)
    coef: np.ndarray  # (D, K), zeros for the zero, constant and tree means
    penalty: float | None  # the ridge penalty GCV chose (None for the other means)
    trees: TreeEnsemble | None = None  # the tree mean's ensemble

    def __call__(self, Xs: np.ndarray) -> np.ndarray:
        """(n, K) mean of standardised rows ``Xs``."""
        mean = Xs @ self.coef + self.intercept
        if self.trees is not None:
            mean += self.trees(Xs, len(self.intercept))
        return mean


def fit_mean(
    kind: str,
    Xs: np.ndarray,
    Y: np.ndarray,
    weights: np.ndarray | None = None,
    validation: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None,
    seed: int = 0,
) -> MeanFunction:
    """The mean function of ``kind`` fitted on standardised rows ``Xs`` (n, D) with targets ``Y`` (n, K),
    each row counted with its weight (``None``: all 1).

    ``validation`` (rows, targets, weights) and ``seed`` are for the tree mean only: its early
    stopping (above 10 000 rows) and its random state.
    """
    if kind == "zero":
        return MeanFunction(np.zeros(Y.shape[1]), np.zeros((Xs.shape[1], Y.shape[1])), None)
    if kind == "constant":
        return MeanFunction(np.average(Y, axis=0, weights=weights), np.zeros((Xs.shape[1], Y.shape[1])), None)
    if kind == "linear":
        ridge = RidgeCV(alphas=RIDGE_ALPHAS, fit_intercept=True).fit(Xs, Y, sample_weight=weights)
        return MeanFunction(
            np.atleast_1d(ridge.intercept_).astype(float),
            np.asarray(ridge.coef_, dtype=float).reshape(Y.shape[1], Xs.shape[1]).T.copy(),
            float(ridge.alpha_),
        )
    if kind == "trees":
        return _fit_trees(Xs, Y, weights, validation, seed)
    raise ValueError(f"unknown mean {kind!r}; choose one of {', '.join(MEAN_FUNCTIONS)}")


def _fit_trees(
    Xs: np.ndarray,
    Y: np.ndarray,
    weights: np.ndarray | None,
    validation: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None,
    seed: int,
) -> MeanFunction:
    """One ``HistGradientBoostingRegressor`` (default settings) per output column, as arrays."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    models = []
    for k in range(Y.shape[1]):
        extra: dict = {}
        if validation is not None and len(validation[0]):
            # Used for early stopping, which scikit-learn turns on above 10 000 rows ("auto").
            X_val, Y_val, w_val = validation
            extra = {"X_val": X_val, "y_val": Y_val[:, k], "sample_weight_val": w_val}
        model = HistGradientBoostingRegressor(random_state=seed)
        models.append(model.fit(Xs, Y[:, k], sample_weight=weights, **extra))
    intercept = np.array([float(np.ravel(model._baseline_prediction)[0]) for model in models])
    trees = TreeEnsemble.from_histgradientboosting(models)
    return MeanFunction(intercept, np.zeros((Xs.shape[1], Y.shape[1])), None, trees)
