"""Per-class density heads on coco-voc20 (boxes as cell-level supervision): every candidate on
validation, then the chosen one on the test part once.

    python scripts/voc_density_study.py [--root ...VOC2007] [--sizes 320 448] [--no-test]

Protocol (as scripts/voc_study.py): split ``random:0.25:0``; 5-fold cross-validation inside the
419 train photos (the same folds as voc_study.py); everything nested: for each outer fold the
head's per-class penalties are chosen on the other four folds (leave-one-fold-out among them),
the AGP/ridge rows of those four folds are their out-of-fold head sums (each summed by a head
fitted without its fold and without the outer fold), and gate thresholds come from 3-fold
out-of-fold predictions on those rows. Figures: the VOC metrics (clip, round; mRMSE and
m-relRMSE on all photos, -nz on the photos holding the class). Score = mRMSE + m-relRMSE.

Stage 1: head alone (the sum of each class's map, no regressor) over input size x layers x how a
box is spread (dot / Gaussian / uniform over the box), with and without the gate. Stage 2: on
the best two, a regressor on the 20 out-of-fold head sums (``--inputs``: whole photo; whole and
a 2x2 grid, 100 inputs; whole + class scores @320 with ``--with-scores``): ridge and the
univariate AGP-50 (multi-output), ``--transforms`` none / sqrt / log, with and without the gate.

The choice is the best AGP row (`counting train --density-head` ships a regressor on the sums:
it gives the intervals); the test step trains it through `train_model` on the 419 photos and
scores the 140 test photos once. When the best validation row is the head alone + gate, its
test figures follow, labelled as a second look. Runs of docs/voc.md ("Per-class density head"):

    python scripts/voc_density_study.py --sizes 448 320 576 --no-test
    python scripts/voc_density_study.py --sizes 320 --layer-sets final+block14 --spreads box \
        --transforms none sqrt log --inputs whole "whole + class scores" --with-scores --no-test
    python scripts/voc_density_study.py --sizes 320 --layer-sets final+block14 --spreads box \
        --transforms sqrt --inputs whole
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from counting.core import voc_metrics  # noqa: E402
from counting.data import (
    image_size,  # noqa: E402
    load_dataset,  # noqa: E402
)
from counting.features import (  # noqa: E402
    FeatureCache,  # noqa: E402
    Preprocessing,
    get_backbone,
)
from counting.heads import (  # noqa: E402  # noqa: E402
    TransformedRegressor,
    accumulate_grams,
    annotation_path,
    apply_gate,
    choose_gate,
    class_density_targets,
    extract_class_maps,
    layer_channels,  # noqa: E402
    read_boxes,
)

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "coco-voc20" / "VOCdevkit" / "VOC2007"
FOLDS = 5
INNER_FOLDS = 3
TOLERANCE = 0.005
LAYER_SETS = {"final": ("final",), "block14": ("block14",), "final+block14": ("final", "block14")}


def score(truth: np.ndarray, predicted: np.ndarray) -> dict:
    figures = voc_metrics(truth, predicted)
    figures["score"] = figures["mrmse"] + figures["m_rel_rmse"]
    return figures


def line(label: str, figures: dict, seconds: float) -> str:
    return (
        f"  {label:<52} mRMSE {figures['mrmse']:.3f}  m-relRMSE {figures['m_rel_rmse']:.3f}  "
        f"(-nz {figures['mrmse_nz']:.3f} / {figures['m_rel_rmse_nz']:.3f})  {seconds:5.1f}s"
    )


def fold_assignment(n: int, folds: int = FOLDS) -> np.ndarray:
    """voc_study.py's folds: a seeded permutation split into ``folds`` parts."""
    fold_of = np.empty(n, dtype=int)
    for fold, members in enumerate(np.array_split(np.random.default_rng(0).permutation(n), folds)):
        fold_of[members] = fold
    return fold_of


def targets_for(paths: list[str], maps: list[np.ndarray], classes: list[str], spread: str) -> list[np.ndarray]:
    out = []
    for path, item in zip(paths, maps, strict=True):
        boxes, labels = read_boxes(annotation_path(path), classes)
        height, width = image_size(path)
        out.append(class_density_targets(boxes, labels, (height, width), item.shape[1:], len(classes), spread))
    return out


def ridge() -> Any:
    from counting.evaluate import build_ridge

    return build_ridge()


def agp50() -> Any:
    from counting.train import TrainingConfig, make_regressor

    return make_regressor(TrainingConfig(kernel="univariate", n_centers=50), n_rows=335)


def out_of_fold(build: Callable[[], Any], X: np.ndarray, y: np.ndarray, folds: int = INNER_FOLDS) -> np.ndarray:
    predicted = np.full(y.shape, np.nan)
    order = np.random.default_rng(0).permutation(len(y))
    for fold in np.array_split(order, folds):
        rest = np.setdiff1d(order, fold)
        predicted[fold] = np.clip(build().fit(X[rest], y[rest]).predict(X[fold]), 0.0, None)
    return predicted


def nested(
    grams: Any,
    y: np.ndarray,
    regressors: dict[str, Callable[[], Any]],
    transforms: tuple[str, ...] = ("log",),
    scores: np.ndarray | None = None,
    inputs: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Outer out-of-fold predictions of the head alone and of each regressor on its sums (+ gate)."""
    fold_of = grams.fold_of
    predictions: dict[str, np.ndarray] = {}

    def put(name: str, rows: np.ndarray, values: np.ndarray) -> None:
        predictions.setdefault(name, np.full(y.shape, np.nan))[rows] = values

    for outer in range(FOLDS):
        test_rows = np.flatnonzero(fold_of == outer)
        penalties = grams.choose_penalties(y, outside={outer})
        test_sums = grams.counts(test_rows, grams.solve_per_class({outer}, penalties))  # (n, K, regions)
        inner_rows, inner_sums = [], []
        for fold in range(FOLDS):
            if fold != outer:
                rows = np.flatnonzero(fold_of == fold)
                inner_rows.append(rows)
                inner_sums.append(grams.counts(rows, grams.solve_per_class({outer, fold}, penalties)))
        train_rows = np.concatenate(inner_rows)
        train_sums = np.concatenate(inner_sums)
        head_train = np.clip(train_sums[:, :, 0], 0, None)
        head_test = np.clip(test_sums[:, :, 0], 0, None)
        put("head alone", test_rows, head_test)
        put("head alone + gate", test_rows, apply_gate(head_test, choose_gate(y[train_rows], head_train)))
        inputs_of = {
            "whole": (train_sums[:, :, 0], test_sums[:, :, 0]),
            "whole+2x2": (train_sums.reshape(len(train_sums), -1), test_sums.reshape(len(test_sums), -1)),
        }
        if scores is not None:
            # The head's 20 sums beside the image-level descriptor (class scores).
            inputs_of["whole + class scores"] = (
                np.hstack([train_sums[:, :, 0], scores[train_rows]]),
                np.hstack([test_sums[:, :, 0], scores[test_rows]]),
            )
        chosen_inputs = {name: value for name, value in inputs_of.items() if inputs is None or name in inputs}
        for (input_name, (X_train, X_test)), (name, make), transform in itertools.product(
            chosen_inputs.items(), regressors.items(), transforms
        ):

            def build(make: Callable[[], Any] = make, transform: str = transform) -> Any:
                return TransformedRegressor(make(), transform)

            plain = np.clip(build().fit(X_train, y[train_rows]).predict(X_test), 0, None)
            label = f"{name} on {input_name} [{transform}]"
            put(label, test_rows, plain)
            inner = out_of_fold(build, X_train, y[train_rows])
            put(label + " + gate", test_rows, apply_gate(plain, choose_gate(y[train_rows], inner)))
    return predictions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--split", default="random:0.25:0")
    parser.add_argument("--sizes", type=int, nargs="+", default=[320, 448, 576])
    parser.add_argument("--layer-sets", nargs="+", default=list(LAYER_SETS))
    parser.add_argument("--spreads", nargs="+", default=["dot", "gauss", "box"])
    parser.add_argument("--no-test", action="store_true")
    parser.add_argument("--transforms", nargs="+", default=["log"], help="Target transforms of stage 2.")
    parser.add_argument("--inputs", nargs="+", help="Stage 2 inputs (whole, whole+2x2, whole + class scores).")
    parser.add_argument("--with-scores", action="store_true", help="Stage 2 also on head sums + class scores @320.")
    args = parser.parse_args()
    cache = FeatureCache(os.environ.get("COUNTING_CACHE_DIR") or None)
    data = load_dataset("voc", args.root, split=args.split)
    train = data.subset("train")
    classes = list(data.class_names)
    paths = [str(path) for path in train.paths]
    y = np.asarray(train.counts, dtype=float)
    fold_of = fold_assignment(len(y))
    backbone = get_backbone("efficientnet-lite0")
    print(f"{data.root}: split {args.split}, {len(y)} train photos, {FOLDS}-fold nested validation inside them")
    print(line("always 0", score(y, np.zeros_like(y)), 0.0))

    print("stage 1: head alone (sum of each class's map; per-class penalty chosen on inner folds)")
    stage1: dict[tuple, dict] = {}
    grams_of: dict[tuple, Any] = {}
    everything_of: dict[int, Any] = {}
    for size in args.sizes:
        all_layers = sorted({layer for name in args.layer_sets for layer in LAYER_SETS[name]})
        started = time.perf_counter()
        maps = extract_class_maps(paths, backbone, Preprocessing(input_size=size), all_layers, cache=cache)
        offsets = np.cumsum([0] + [layer_channels(backbone, layer) for layer in all_layers])
        started = time.perf_counter()
        # One pass over the maps for every layer set and spread: their Gram matrices are sub-blocks.
        targets = [
            np.concatenate(parts)
            for parts in zip(*(targets_for(paths, maps, classes, spread) for spread in args.spreads), strict=True)
        ]
        everything = accumulate_grams(maps, targets, fold_of)
        del maps, targets
        everything_of[size] = everything
        print(f"  (@{size}: maps and Gram matrices of {', '.join(all_layers)} in {time.perf_counter() - started:.0f}s)")
        for layer_name in args.layer_sets:
            keep = np.concatenate(
                [
                    np.arange(offsets[i], offsets[i + 1])
                    for i, layer in enumerate(all_layers)
                    if layer in LAYER_SETS[layer_name]
                ]
            )
            for number, spread in enumerate(args.spreads):
                started = time.perf_counter()
                columns = np.arange(number * len(classes), (number + 1) * len(classes))
                grams = everything.restricted(keep, columns)
                key = (size, layer_name, spread)
                for label, predicted in nested(grams, y, {}).items():
                    stage1[(*key, label)] = score(y, predicted)
                    print(
                        line(
                            f"@{size} {layer_name} {spread}: {label}",
                            stage1[(*key, label)],
                            time.perf_counter() - started,
                        ),
                        flush=True,
                    )
                grams_of[key] = (size, keep, columns)
    ranked = sorted(stage1, key=lambda key: stage1[key]["score"])
    best_heads = list(dict.fromkeys(key[:3] for key in ranked))[:2]
    print(f"best two heads: {best_heads}")

    print("stage 2: regressors on the out-of-fold head sums (nested)")
    regressors = {"ridge": ridge, "AGP univariate 50": agp50}
    stage2: dict[tuple, dict] = {}
    for key in best_heads:
        started = time.perf_counter()
        size, keep, columns = grams_of[key]
        scores = None
        if args.with_scores:
            from counting.features import extract_features

            scores = extract_features(
                paths, backbone, Preprocessing(input_size=320), cache=cache, progress=False
            ).features.reshape(len(paths), -1)
        grams = everything_of[size].restricted(keep, columns)
        for label, predicted in nested(grams, y, regressors, tuple(args.transforms), scores, args.inputs).items():
            stage2[(*key, label)] = score(y, predicted)
            print(
                line(f"@{key[0]} {key[1]} {key[2]}: {label}", stage2[(*key, label)], time.perf_counter() - started),
                flush=True,
            )
    best = min(stage2, key=lambda key: stage2[key]["score"])
    print(f"best validation row: {best} {stage2[best]['mrmse']:.3f} / {stage2[best]['m_rel_rmse']:.3f}")
    # `counting train` ships a regressor on the head's sums (it gives the intervals): the choice is
    # the best AGP row; within TOLERANCE of it, the row without the gate (one choice fewer).
    agp_rows = {key: value for key, value in stage2.items() if key[3].startswith("AGP")}
    top = min(value["score"] for value in agp_rows.values())
    near = [key for key in agp_rows if agp_rows[key]["score"] <= top + TOLERANCE]
    choice = min(near, key=lambda key: (key[3].endswith("+ gate"), agp_rows[key]["score"]))
    print(f"chosen: {choice} validation {agp_rows[choice]['mrmse']:.3f} / {agp_rows[choice]['m_rel_rmse']:.3f}")
    if args.no_test:
        return
    test_once(args, choice, best, cache)


def test_once(args: argparse.Namespace, choice: tuple, best: tuple, cache: FeatureCache) -> None:
    """The chosen setting through `counting train --density-head` on the 419 photos, scored on the
    140 test photos once; then the best validation row if it is the head alone (a second look)."""
    from counting.evaluate import evaluate_model
    from counting.heads import DEFAULT_CLASS_LAYERS, DEFAULT_SPREAD
    from counting.train import TrainingConfig, train_model

    size, layers, spread, label = choice
    if set(layers.split("+")) != set(DEFAULT_CLASS_LAYERS) or spread != DEFAULT_SPREAD:
        print(
            f"(train's head uses {'+'.join(DEFAULT_CLASS_LAYERS)} / {DEFAULT_SPREAD}, not the chosen {layers} / {spread})"
        )
    transform = label.split("[")[1].split("]")[0]
    gate = label.endswith("+ gate")
    grid = (2, 2) if "2x2" in label else None
    config = TrainingConfig(
        input_size=size,
        kernel="univariate",
        n_centers=50,
        target_transform=transform,
        gate=gate,
        density_head=True,
        grid=grid,
    )
    data = load_dataset("voc", args.root, split=args.split)
    test = data.subset("test")
    truth = np.asarray(test.counts, dtype=float)
    started = time.perf_counter()
    model = train_model(data, config, cache=cache, split=args.split)
    result = evaluate_model(model, test, cache=cache, split=args.split)
    print(f"test part ({len(truth)} photos), once:")
    train_counts = np.asarray(data.subset("train").counts, dtype=float)
    print(line("train mean", voc_metrics(truth, np.tile(train_counts.mean(0), (len(truth), 1))), 0.0))
    print(line("always 0", voc_metrics(truth, np.zeros_like(truth)), 0.0))
    print(line(f"chosen: {label} (train --density-head)", result.metrics, time.perf_counter() - started))
    print(
        "reproduce: counting train -d voc -r ROOT --split "
        f"{args.split} --input-size {size} --centers 50 --target-transform {transform} "
        f"{'--gate' if gate else '--no-gate'} --density-head{' --grid 2x2' if grid else ''} -o voc-head.npz"
    )
    if best[3] == "head alone + gate":
        # A second look at the test photos, reported as such: the best validation row has no
        # regressor, so `train` cannot ship it; its head is the model's, its gate comes from the
        # head's out-of-fold sums of the 419 train photos.
        from counting.heads import class_head_features, fit_class_head_descriptors

        train = data.subset("train")
        head, out_of_fold = fit_class_head_descriptors(
            list(train.samples), data, model.get_backbone(), model.preprocessing(), None, seed=config.seed, cache=cache
        )
        train_sums = out_of_fold.reshape(len(train_counts), head.n_classes, -1)[:, :, 0]
        thresholds = choose_gate(train_counts, np.clip(train_sums, 0, None))
        features, _ok, _errors = class_head_features(
            head, [str(path) for path in test.paths], model.get_backbone(), model.preprocessing(), cache
        )
        predicted = apply_gate(np.clip(features.reshape(len(truth), head.n_classes, -1)[:, :, 0], 0, None), thresholds)
        print(line("second look: head alone + gate", voc_metrics(truth, predicted), 0.0))


if __name__ == "__main__":
    main()
