"""Asymmetric-kernel Gaussian process regression (Pintea, van Gemert & Smeulders, PRL 2018), in NumPy."""

from agp import metrics
from agp.estimator import AGPRegressor
from agp.kernels import KERNELS

__all__ = ["KERNELS", "AGPRegressor", "metrics"]
