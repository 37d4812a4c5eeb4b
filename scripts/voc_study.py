"""Multi-class counting on real photos (coco-voc20): every candidate setting on validation, then
the chosen one on the test part once.

    python scripts/voc_study.py [--root ../shared/data/coco-voc20/VOCdevkit/VOC2007] [--quick]

Validation is K-fold cross-validation inside the train part of ``--split`` (default
``random:0.25:0``); the test part is used once, by the chosen setting, through the same
``train_model`` / ``evaluate_model`` that ``counting train -d voc`` runs. Figures are the VOC
metrics of Chattopadhyay et al. (CVPR 2017): mRMSE and m-relRMSE on all images (predictions
clipped at 0 and rounded). A candidate's score is mRMSE + m-relRMSE (both count).

Stages: (1) descriptors with ridge (class scores vs pooled trunk features, input size, a 2x2
cell pyramid, flip averaging); (2) on the best descriptor, regressors (ridge, center-GP, AGP
multi-output with shared centres, AGP one fit per class, diagonal AGP) x target transform
(none, sqrt, log); (3) the per-class presence gate on the best two, chosen on inner folds (nested).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from counting.core import voc_metrics  # noqa: E402
from counting.data import load_dataset  # noqa: E402
from counting.features import FeatureCache, Preprocessing, extract_features, get_backbone  # noqa: E402  # noqa: E402
from counting.heads import PerClassRegressor, TransformedRegressor, apply_gate, choose_gate  # noqa: E402

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "coco-voc20" / "VOCdevkit" / "VOC2007"
FOLDS = 5
INNER_FOLDS = 3
# Validation score (mRMSE + m-relRMSE) differences below this are not taken as real.
TOLERANCE = 0.005


def descriptors(paths: list[str], spec: dict, cache: FeatureCache) -> np.ndarray:
    """``spec``: size, pooled, grid (pyramid: frame + cells concatenated), flip (average with the mirror)."""
    backbone = get_backbone("efficientnet-lite0")

    def view(flip: bool, grid: tuple[int, int] | None) -> np.ndarray:
        prep = Preprocessing(input_size=spec["size"], flip=flip)
        features = extract_features(
            paths, backbone, prep, grid=grid, cache=cache, progress=False, pooled=spec.get("pooled", False)
        ).features
        return features.reshape(len(paths), -1)

    def frame(flip: bool) -> np.ndarray:
        parts = [view(flip, None)]
        if spec.get("grid"):
            parts.append(view(flip, spec["grid"]))
        return np.hstack(parts)

    whole = frame(False)
    return (whole + frame(True)) / 2 if spec.get("flip") else whole


def extraction_cost(spec: dict) -> float:
    """Relative cost of a descriptor: pixels per view (native: COCO's 640x480) times views."""
    side = spec["size"] or 480
    return side * side * (2 if spec.get("flip") else 1) * (2 if spec.get("grid") else 1)


def ridge() -> Any:
    from counting.evaluate import build_ridge

    return build_ridge()


def agp(kernel: str, centers: int = 25) -> Callable[[], Any]:
    def build() -> Any:
        from counting.train import TrainingConfig, make_regressor

        return make_regressor(TrainingConfig(kernel=kernel, n_centers=centers), n_rows=335)

    return build


def score(truth: np.ndarray, predicted: np.ndarray) -> dict:
    figures = voc_metrics(truth, predicted)
    figures["score"] = figures["mrmse"] + figures["m_rel_rmse"]
    return figures


def out_of_fold(
    build: Callable[[], Any], X: np.ndarray, y: np.ndarray, positions: np.ndarray, folds: int
) -> np.ndarray:
    """Predictions of the rows ``positions`` from models fitted on the other folds among them."""
    predicted = np.full(y.shape, np.nan)
    order = np.random.default_rng(0).permutation(positions)
    for fold in np.array_split(order, folds):
        rest = np.setdiff1d(positions, fold)
        predicted[fold] = np.clip(build().fit(X[rest], y[rest]).predict(X[fold]), 0.0, None)
    return predicted


def nested_gate(build: Callable[[], Any], X: np.ndarray, y: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Outer out-of-fold predictions gated with thresholds chosen on inner folds of each outer train part."""
    gated = np.empty_like(plain)
    positions = np.arange(len(y))
    order = np.random.default_rng(0).permutation(positions)
    for fold in np.array_split(order, FOLDS):
        rest = np.setdiff1d(positions, fold)
        inner = out_of_fold(build, X, y, rest, INNER_FOLDS)
        gated[fold] = apply_gate(plain[fold], choose_gate(y[rest], inner[rest]))
    return gated


def line(label: str, figures: dict, seconds: float) -> str:
    return (
        f"  {label:<46} mRMSE {figures['mrmse']:.3f}  m-relRMSE {figures['m_rel_rmse']:.3f}  "
        f"(-nz {figures['mrmse_nz']:.3f} / {figures['m_rel_rmse_nz']:.3f})  {seconds:5.1f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--split", default="random:0.25:0")
    parser.add_argument("--quick", action="store_true", help="Stage 1 on 224/448 class scores only.")
    parser.add_argument("--no-test", action="store_true", help="Stop after the validation stages.")
    args = parser.parse_args()
    cache = FeatureCache(os.environ.get("COUNTING_CACHE_DIR") or None)
    data = load_dataset("voc", args.root, split=args.split)
    train = data.subset("train")
    paths = [str(path) for path in train.paths]
    y = np.asarray(train.counts, dtype=float)
    everything = np.arange(len(y))
    print(f"{data.root}: split {args.split}, {len(y)} train images, {FOLDS}-fold validation inside them")

    baselines = {
        "train mean": out_of_fold(lambda: TransformedRegressor(_Mean()), np.zeros((len(y), 1)), y, everything, FOLDS),
        "always 0": np.zeros_like(y),
    }
    print("baselines (validation)")
    for name, predicted in baselines.items():
        print(line(name, score(y, predicted), 0.0))

    specs = {
        "class scores @224": {"size": 224},
        "class scores @320": {"size": 320},
        "class scores @448": {"size": 448},
        "class scores @native": {"size": None},
        "class scores @448, flip-averaged": {"size": 448, "flip": True},
        "class scores @320, flip-averaged": {"size": 320, "flip": True},
        "pooled trunk @224": {"size": 224, "pooled": True},
        "pooled trunk @448": {"size": 448, "pooled": True},
        "pooled trunk @224 + 2x2 cells": {"size": 224, "pooled": True, "grid": (2, 2)},
        "class scores @224 + 2x2 cells": {"size": 224, "grid": (2, 2)},
    }
    if args.quick:
        specs = {key: specs[key] for key in ("class scores @224", "class scores @448")}
    print("stage 1: descriptors (ridge; best of transforms none / sqrt / log)")
    stage1 = {}
    for name, spec in specs.items():
        started = time.perf_counter()
        X = descriptors(paths, spec, cache)
        best = None
        for transform in ("none", "sqrt", "log"):
            figures = score(
                y, out_of_fold(lambda t=transform: TransformedRegressor(ridge(), t), X, y, everything, FOLDS)
            )
            if best is None or figures["score"] < best[1]["score"]:
                best = (transform, figures)
        assert best is not None
        stage1[name] = (best[1]["score"], X)
        print(line(f"{name} [{best[0]}]", best[1], time.perf_counter() - started))
    # Differences under TOLERANCE are noise on 419 photos: the cheapest descriptor within it wins.
    usable = [name for name in stage1 if "pooled" not in name and "cells" not in name]
    best_score = min(stage1[name][0] for name in usable)
    chosen_descriptor = min(
        (name for name in usable if stage1[name][0] <= best_score + TOLERANCE), key=lambda n: extraction_cost(specs[n])
    )
    overall = min(stage1, key=lambda n: stage1[n][0])
    print(
        f"chosen descriptor: {chosen_descriptor} (best overall: {overall}; pooled and cell descriptors are study-only)"
    )
    X = stage1[chosen_descriptor][1]

    print("stage 2: regressors x target transform")
    regressors = {
        "ridge": ridge,
        "center-GP 25": agp("center"),
        "AGP univariate 25, multi-output": agp("univariate"),
        "AGP univariate 25, per class": lambda: PerClassRegressor(agp("univariate")),
        "AGP diagonal 25, multi-output": agp("diagonal"),
        "AGP univariate 50, multi-output": agp("univariate", 50),
    }
    stage2 = {}
    for name, make in regressors.items():
        for transform in ("none", "sqrt", "log"):
            started = time.perf_counter()

            def build(make: Callable[[], Any] = make, transform: str = transform) -> Any:
                return TransformedRegressor(make(), transform)

            predicted = out_of_fold(build, X, y, everything, FOLDS)
            figures = score(y, predicted)
            stage2[(name, transform)] = (figures, build, predicted)
            print(line(f"{name} [{transform}]", figures, time.perf_counter() - started))

    print("stage 3: per-class presence gate (thresholds from inner folds: nested)")
    ranked = sorted(stage2, key=lambda key: stage2[key][0]["score"])
    agp_keys = [key for key in ranked if key[0].startswith("AGP")][:2]
    finals = {}
    for key in dict.fromkeys([ranked[0], *agp_keys]):
        figures, build, predicted = stage2[key]
        finals[(*key, False)] = figures
        started = time.perf_counter()
        gated = score(y, nested_gate(build, X, y, predicted))
        finals[(*key, True)] = gated
        print(line(f"{key[0]} [{key[1]}] + gate", gated, time.perf_counter() - started))
    agp_finals = {key: value for key, value in finals.items() if key[0].startswith("AGP")}
    choice = min(agp_finals, key=lambda key: agp_finals[key]["score"])
    print(f"chosen: {chosen_descriptor}, {choice[0]}, transform {choice[1]}, gate {'on' if choice[2] else 'off'}")
    if args.no_test:
        return
    test_once(args, chosen_descriptor, specs[chosen_descriptor], choice, cache)


class _Mean:
    def fit(self, X: np.ndarray, y: np.ndarray) -> _Mean:
        self.mean_ = y.mean(axis=0)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.tile(self.mean_, (len(X), 1))


def test_once(args: argparse.Namespace, descriptor: str, spec: dict, choice: tuple, cache: FeatureCache) -> None:
    """The chosen setting through `counting train`'s pipeline, scored on the test part once."""
    from counting.evaluate import evaluate_model
    from counting.train import TrainingConfig, train_model

    name, transform, gate = choice
    kernel = "diagonal" if "diagonal" in name else "univariate"
    centers = 50 if " 50" in name else 25
    if "per class" in name:
        print("(per-class AGP is a study row: the test figures below are the multi-output fit)")
    config = TrainingConfig(
        input_size=spec["size"],
        kernel=kernel,
        n_centers=centers,
        target_transform=transform,
        gate=gate,
        flip_average=bool(spec.get("flip")),
    )
    data = load_dataset("voc", args.root, split=args.split)
    started = time.perf_counter()
    model = train_model(data, config, cache=cache, split=args.split)
    result = evaluate_model(model, data.subset("test"), cache=cache, split=args.split)
    test = data.subset("test")
    truth = np.asarray(test.counts, dtype=float)
    print(f"test part ({len(truth)} images), once:")
    for label, predicted in (
        ("train mean", np.tile(np.asarray(data.subset("train").counts, float).mean(0), (len(truth), 1))),
        ("always 0", np.zeros_like(truth)),
    ):
        print(line(label, voc_metrics(truth, predicted), 0.0))
    print(
        line(
            f"{descriptor}, {kernel} AGP {centers}, {transform}, gate {gate}",
            result.metrics,
            time.perf_counter() - started,
        )
    )
    flip = " --flip-average" if spec.get("flip") else ""
    size = spec["size"] or "native"
    print(
        "reproduce: counting train -d voc -r ROOT --split "
        f"{args.split} --input-size {size} --kernel {kernel} --centers {centers} "
        f"--target-transform {transform} {'--gate' if gate else '--no-gate'}{flip} --out voc.npz"
    )


if __name__ == "__main__":
    main()
