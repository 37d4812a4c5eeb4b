"""Which training set a picture resembles: the router of a conv head's specialists.

A head trained on four sets at once is pulled between them: on ShanghaiTech B's street photos the
crowd model's four-head ensemble scores MAE 17.4 where one head trained on ShanghaiTech B alone
scores 13.3 (docs/density.md, "Specialists"). A *specialist* is such a head; the router says, per
picture, how much each set's specialist should count it, from the picture's feature-map statistics
(:func:`counting.heads.familiarity.map_statistics`, the same per-channel means and spreads the
familiarity probe holds, so it costs nothing more). The density is the mixture

    (1 - sum_s p_s) * general + sum_s p_s * specialist_s

over the sets ``s`` that have a specialist, ``p_s`` the router's probability of set ``s``; a
picture like none of them (an everyday photo, a set without a specialist) keeps the general head.
A mixture rather than a switch so that a video frame near the boundary does not jump between heads.

The router is scikit-learn's multinomial logistic regression on standardised statistics, its
inverse regularisation chosen by cross-validated log-loss on the training pictures. The model file
holds its coefficients (no pickle), and counting evaluates the softmax with NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ROUTE_GENERAL", "SetRouter", "fit_set_router"]

# The route of a picture the router leaves to the general heads (the specialists' are their sets'
# names): what a model's per-route intervals are keyed by (counting.heads.uncertainty).
ROUTE_GENERAL = "general"

# Inverse regularisations tried by the cross-validation (scikit-learn's C).
ROUTER_C = (0.01, 0.1, 1.0, 10.0)
# A head's weight below this is dropped (and the others rescaled), so a picture does not pay for
# running a network that would change its count by less than a hundredth of the heads' difference.
MIN_WEIGHT = 0.01
_SMALL = 1e-8


@dataclass
class SetRouter:
    """Multinomial logistic regression from a picture's map statistics to the set it resembles."""

    classes: tuple[str, ...]  # the training sets, in the order of coef's rows
    mean: np.ndarray  # (D,) statistics' means over the training pictures
    scale: np.ndarray  # (D,) their spreads (floored)
    coef: np.ndarray  # (K, D) on standardised statistics
    intercept: np.ndarray  # (K,)
    settings: dict[str, Any]

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def probabilities(self, statistics: np.ndarray) -> np.ndarray:
        """``(n, D)`` map statistics -> ``(n, K)`` probability of each set (rows sum to 1)."""
        array = np.asarray(statistics, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != self.dim:
            raise ValueError(f"router reads {self.dim} statistics per picture, got shape {array.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            logits = ((array - self.mean) / self.scale) @ self.coef.T + self.intercept
        # Statistics beyond any training picture's (maps of inf) give infinite logits: such a
        # picture's probabilities are NaN, as its count is, rather than a warning per picture.
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=1, keepdims=True)

    def mixture(self, statistics: np.ndarray, sets: list[str]) -> np.ndarray:
        """``(n, 1 + len(sets))``: each picture's weight of the general head (column 0), then of
        each listed set's specialist. Weights below MIN_WEIGHT are dropped (that head is not run
        for the picture) and each row is rescaled to sum to 1."""
        specialists = self.probabilities(statistics)[:, [self.classes.index(name) for name in sets]]
        weights = np.concatenate([1.0 - specialists.sum(axis=1, keepdims=True), specialists], axis=1)
        weights = np.where(weights >= MIN_WEIGHT, weights, 0.0)
        return weights / weights.sum(axis=1, keepdims=True)

    @staticmethod
    def routes(weights: np.ndarray, sets: list[str]) -> np.ndarray:
        """Each picture's route from its :meth:`mixture` weights over ``sets``: the set whose
        specialist has the largest weight, ROUTE_GENERAL where the general heads have it (and for
        a picture of NaN weights, one that could not be read: its count is NaN too)."""
        choices = np.array([ROUTE_GENERAL, *sets], dtype=object)
        return choices[np.nan_to_num(weights, nan=0.0).argmax(axis=1)]


def fit_set_router(statistics: np.ndarray, sets: np.ndarray, seed: int = 0) -> SetRouter:
    """A router fitted on training pictures' ``(n, D)`` map statistics and their ``(n,)`` set names.

    C is chosen among ROUTER_C by 5-fold stratified cross-validated log-loss (scikit-learn), then
    the regression is refitted on every picture."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    array = np.asarray(statistics, dtype=np.float64)
    labels = np.asarray(sets, dtype=str)
    classes = tuple(sorted(set(labels.tolist())))
    if len(classes) < 2:
        raise ValueError(f"a router needs pictures of at least two sets, got {list(classes)}")
    mean = array.mean(axis=0)
    scale = np.maximum(array.std(axis=0), _SMALL)
    standard = (array - mean) / scale
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    losses = {
        C: -float(
            np.mean(
                cross_val_score(
                    LogisticRegression(C=C, max_iter=5000), standard, labels, cv=folds, scoring="neg_log_loss"
                )
            )
        )
        for C in ROUTER_C
    }
    best = min(losses, key=lambda C: losses[C])
    fitted = LogisticRegression(C=best, max_iter=5000).fit(standard, labels)
    assert tuple(fitted.classes_) == classes  # scikit-learn sorts the labels as we did
    coef, intercept = np.asarray(fitted.coef_, dtype=np.float64), np.asarray(fitted.intercept_, dtype=np.float64)
    if len(classes) == 2:
        # scikit-learn's binary model is one logit for the second class: the softmax of (0, z) is its sigmoid.
        coef, intercept = np.vstack([np.zeros_like(coef), coef]), np.concatenate([[0.0], intercept])
    accuracy = float(np.mean(fitted.predict(standard) == labels))
    return SetRouter(
        classes=classes,
        mean=mean,
        scale=scale,
        coef=coef,
        intercept=intercept,
        settings={
            "C": best,
            "cross_validated_log_loss": {f"{C:g}": round(loss, 4) for C, loss in losses.items()},
            "train_accuracy": round(accuracy, 4),
            "pictures": {name: int(np.sum(labels == name)) for name in classes},
        },
    )
