"""First-order optimisers acting in place on a dict of parameter arrays.

Written here rather than taken from a library because the parameters are plain NumPy arrays
(keeping ``agp`` free of torch) and both rules are a few lines.
"""

from __future__ import annotations

import math

import numpy as np

Params = dict[str, np.ndarray]

DEFAULT_LEARNING_RATES = {"sgd": 1e-5, "adam": 0.03}
# AGPRegressor's max_epochs default; here, beside the rates, so a caller can show it without
# importing the estimator (and scikit-learn with it).
DEFAULT_MAX_EPOCHS = 30
# Learning-rate schedules after the warm-up: "constant" keeps the rate, "cosine" decays it to 0
# over the remaining planned steps (Loshchilov & Hutter 2017, without restarts).
LR_SCHEDULES = ("constant", "cosine")


class SGD:
    """Minibatch SGD with (heavy-ball) momentum, the paper's optimiser (momentum 0.9)."""

    def __init__(self, learning_rate: float, momentum: float = 0.9) -> None:
        self.learning_rate = learning_rate
        self.momentum = momentum
        self._velocity: Params = {}

    def step(self, params: Params, grads: Params, rate_factor: float = 1.0) -> None:
        rate = self.learning_rate * rate_factor
        for name, grad in grads.items():
            velocity = self._velocity.get(name)
            velocity = -rate * grad if velocity is None else self.momentum * velocity - rate * grad
            self._velocity[name] = velocity
            params[name] = params[name] + velocity


class Adam:
    """Adam (Kingma & Ba) with per-parameter step scales.

    ``scales[name]`` is the natural size of one unit of that parameter (1 for log-parameters),
    so ``learning_rate`` is a relative step and one default works across datasets.
    """

    def __init__(
        self,
        learning_rate: float,
        scales: dict[str, float] | None = None,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
    ) -> None:
        self.learning_rate = learning_rate
        self.scales = scales or {}
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps
        self._m: Params = {}
        self._v: Params = {}
        self._t = 0

    def step(self, params: Params, grads: Params, rate_factor: float = 1.0) -> None:
        """One update; ``rate_factor`` scales the learning rate (the warm-up ramp)."""
        self._t += 1
        correction1 = 1.0 - self.beta1**self._t
        correction2 = 1.0 - self.beta2**self._t
        for name, grad in grads.items():
            m = self.beta1 * self._m.get(name, 0.0) + (1.0 - self.beta1) * grad
            v = self.beta2 * self._v.get(name, 0.0) + (1.0 - self.beta2) * grad * grad
            self._m[name], self._v[name] = m, v
            step = (m / correction1) / (np.sqrt(v / correction2) + self.eps)
            params[name] = params[name] - rate_factor * self.learning_rate * self.scales.get(name, 1.0) * step


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Linear learning-rate warm-up: step t (1-based) of ``warmup_steps`` uses t / warmup_steps of the rate.

    Adam's first steps are full-size whatever the gradient's scale (its moment estimates are
    still one sample), which overshot at 200 centres on large data; the ramp lets them settle.
    """
    return 1.0 if warmup_steps <= 0 else min(1.0, step / warmup_steps)


def schedule_factor(step: int, warmup_steps: int, total_steps: int, schedule: str = "constant") -> float:
    """Fraction of the learning rate at step t (1-based) of ``total_steps`` planned steps.

    The linear warm-up first (:func:`warmup_factor`); after it ``"constant"`` keeps the full rate
    and ``"cosine"`` follows ½(1 + cos(π p)), p the fraction of the post-warm-up steps taken,
    so the rate falls smoothly from the full rate to 0 at the last planned step.
    """
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; choose one of {', '.join(LR_SCHEDULES)}")
    if schedule == "constant" or step <= warmup_steps:
        return warmup_factor(step, warmup_steps)
    span = total_steps - max(warmup_steps, 0)
    if span <= 0:
        return 1.0
    progress = min(1.0, (step - max(warmup_steps, 0)) / span)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(name: str, learning_rate: float | None, momentum: float, scales: dict[str, float]) -> SGD | Adam:
    if name not in DEFAULT_LEARNING_RATES:
        raise ValueError(f"unknown optimizer {name!r}; choose 'adam' or 'sgd'")
    rate = DEFAULT_LEARNING_RATES[name] if learning_rate is None else float(learning_rate)
    if name == "sgd":
        return SGD(rate, momentum)
    return Adam(rate, scales)
