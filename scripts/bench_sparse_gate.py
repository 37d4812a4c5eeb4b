"""Time fit_sparse_gate (counting.heads.crowd.sparse_gate) on synthetic gate rows of the crowd model's size.

    python scripts/bench_sparse_gate.py                  # 300 and 1,125 pictures, each with a copy
    python scripts/bench_sparse_gate.py --pictures 1125 --repeats 3

Rows as the crowd gate sees them (counting.train.crowd): each picture and an everyday copy of
it, held out together (``groups``), the threshold and head limit chosen on the pictures alone
(``originals``). The pictures are sparse photos (0-12 people) where the heads over-count
textures and the detector is right at score 0.3, and crowds (40-900) where the heads are right
and the detector saturates. Prints the CPU model and load average, the best and median wall
time of ``--repeats`` fits, and the gate it chose (C, axes, log-loss), which is the same on
every run.

Measured 2026-12-03 (AMD EPYC, AVX2 only, 2 cores, load 1.2-1.4): 1,125 pictures (2,250 rows)
26.2 s before commit 0719b10 (cross_val_predict per (axes, C) choice, the folds split 36 times),
2.2 s after; 300 pictures without copies 2.4 s -> 1.4 s. The gates were identical to the bit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from counting.features import DETECTOR_THRESHOLDS, PERSON_QUANTITIES, cpu_description
from counting.heads import fit_sparse_gate


def gate_rows(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """``(head, persons, familiarity, projected, truth)`` of ``n`` pictures (module docstring)."""
    rng = np.random.default_rng(seed)
    sparse = rng.random(n) < 0.5
    truth = np.where(sparse, rng.integers(0, 13, n), rng.integers(40, 900, n)).astype(float)
    head = np.where(sparse, truth + rng.gamma(1.0, 30.0, n), truth * rng.normal(1.0, 0.1, n))
    familiarity = np.where(sparse, rng.uniform(0.01, 0.3, n), rng.uniform(0.2, 1.0, n))
    persons = np.zeros((n, len(PERSON_QUANTITIES)))
    for k, threshold in enumerate(DETECTOR_THRESHOLDS):
        extra = np.round(max(0.0, 0.3 - threshold) * 20 * rng.random(n))
        persons[:, k] = np.sqrt(np.where(sparse, truth + extra, np.minimum(100, rng.integers(0, 30, n))))
    persons[:, -2] = np.sqrt(truth.clip(0, 40) * 0.6)
    persons[:, -1] = np.sqrt(np.where(sparse, truth, 40 + truth / 20))
    projected = rng.normal(size=(n, 16))
    projected[:, :2] += np.where(sparse, 1.5, -1.5)[:, None]
    return head, persons, familiarity, projected, truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pictures", type=int, nargs="+", default=[300, 1125])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"CPU: {cpu_description()}; load average {os.getloadavg()[0]:.2f} at start")
    for n in args.pictures:
        pictures = gate_rows(n)
        # Each picture with a copy whose heads count 5 % more: held out with it, not chosen on.
        rows = tuple(np.concatenate([part, part * 1.05 if k == 0 else part]) for k, part in enumerate(pictures))
        groups, originals = np.tile(np.arange(n), 2), np.arange(2 * n) < n
        seconds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            gate, _ = fit_sparse_gate(*rows, groups=groups, originals=originals)
            seconds.append(time.perf_counter() - started)
        settings = gate.settings
        print(
            f"{n:5d} pictures ({2 * n} rows): best {min(seconds):.2f} s, median {statistics.median(seconds):.2f} s; "
            f"C {settings['C']:g}, axes {settings['axes']}, log-loss {settings['log_loss']}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
