"""Asymmetric-kernel Gaussian process regression (Pintea, van Gemert & Smeulders, PRL 2018), in NumPy."""

from typing import TYPE_CHECKING, Any

from agp import metrics
from agp.kernels import KERNELS

if TYPE_CHECKING:
    from agp.estimator import AGPRegressor

__all__ = ["KERNELS", "AGPRegressor", "metrics"]


def __getattr__(name: str) -> Any:
    # The estimator pulls in scikit-learn (~1.4 s): only on first use, so that reading KERNELS
    # (the command line's --help) stays fast.
    if name == "AGPRegressor":
        from agp.estimator import AGPRegressor

        return AGPRegressor
    raise AttributeError(f"module 'agp' has no attribute {name!r}")
