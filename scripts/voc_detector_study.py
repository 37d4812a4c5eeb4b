"""Issue 22's detector-input study on coco-voc20: which view of the photo the detector should see.

    python scripts/voc_detector_study.py extract stretch       # one view kind -> its raw outputs
    python scripts/voc_detector_study.py extract letterbox     # (stretch flip letterbox letterbox448
    python scripts/voc_detector_study.py extract tiles         #  letterbox-black native512 native640
    python scripts/voc_detector_study.py study                 #  border512 border640 tiles)

``extract`` runs MB3-CenterNet on every photo of ``--split`` (train part first, then test) in one
way of feeding it and stores the raw top-100 detections (boxes in picture fractions), their
classes and scores, and the VOC classes' heat mass per 2x2 cell, in ``OUT/raw_VIEW.npz``:

- ``stretch``: the ``detector`` descriptor's input (the whole photo stretched to 512x512);
  ``flip``: the same, mirrored (boxes and heat mirrored back);
- ``letterbox``: the ``detector-letterbox`` input (aspect kept, long side 512, centred on grey
  114); ``letterbox448``: long side 448 (a grey border all round); ``letterbox-black``: grey 0;
- ``native512`` / ``native640``: aspect kept with no border, long side 512 / 640 (sides rounded
  to multiples of 32: 512x384 / 640x480 for COCO) and ``border512`` / ``border640``: the same with
  32 grey pixels all round (576x448 / 704x544). These inputs are not 512x512: the converted
  graph's three upsampling Resize nodes get a scale of 2 instead of their constant sizes (the
  same numbers at 512x512: checked, 2e-7), in a study-only copy of the graph;
- ``tiles``: SAHI-style second scale, 2x2 overlapping tiles (each 60 % of the photo's side, 20 %
  overlap) each stretched to 512x512 (4 passes).

``study`` builds descriptors from the raw outputs (the ``detector`` descriptor's columns, view
combinations, merged detections, size bins, grid counts) and scores each by 5-fold
cross-validation inside the train part only (the folds of ``scripts/voc_study.py``): univariate
AGP with 50 centres and ridge, both on square-root targets. Nothing here reads the test part's
counts. Figures: docs/voc.md ("The letterboxed input").
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from counting.core import voc_metrics  # noqa: E402
from counting.data import load_dataset  # noqa: E402
from counting.features import COCO_TO_VOC, decode_detections  # noqa: E402

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "coco-voc20" / "VOCdevkit" / "VOC2007"
FOLDS = 5
THRESHOLDS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)  # the detector descriptor's
VIEWS = (
    "stretch",
    "flip",
    "letterbox",
    "letterbox448",
    "letterbox-black",
    "native512",
    "native640",
    "border512",
    "border640",
    "tiles",
)
VOC_OF_COCO = np.full(80, -1)
VOC_OF_COCO[COCO_TO_VOC] = np.arange(20)


# ---------------------------------------------------------------- extraction


def _pil_resize(pixels: np.ndarray, rows: int, cols: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(pixels).resize((cols, rows), Image.BILINEAR), np.float32)


def _views(pixels: np.ndarray, view: str) -> list[tuple[np.ndarray, tuple]]:
    """``(input (3, h, w), (x0, y0, sx, sy, mirrored))``: picture px = x0 + input px * sx."""
    from counting.features import resize_tf_bilinear

    height, width = pixels.shape[:2]
    if view in ("stretch", "flip"):
        prepared = resize_tf_bilinear(pixels).transpose(2, 0, 1)
        mirrored = view == "flip"
        return [(prepared[:, :, ::-1] if mirrored else prepared, (0, 0, width / 512, height / 512, mirrored))]
    if view.startswith("letterbox"):
        side, grey = {"letterbox": (512, 114.0), "letterbox448": (448, 114.0), "letterbox-black": (512, 0.0)}[view]
        scale = side / max(height, width)
        rows, cols = round(height * scale), round(width * scale)
        canvas = np.full((512, 512, 3), grey, np.float32)
        top, left = (512 - rows) // 2, (512 - cols) // 2
        canvas[top : top + rows, left : left + cols] = _pil_resize(pixels, rows, cols)
        return [(canvas.transpose(2, 0, 1), (-left / scale, -top / scale, 1 / scale, 1 / scale, False))]
    if view.startswith(("native", "border")):
        side = int(view[-3:])
        border = 32 if view.startswith("border") else 0
        scale = side / max(height, width)
        rows, cols = max(32, round(height * scale / 32) * 32), max(32, round(width * scale / 32) * 32)
        canvas = np.full((rows + 2 * border, cols + 2 * border, 3), 114.0, np.float32)
        canvas[border : border + rows, border : border + cols] = _pil_resize(pixels, rows, cols)
        sx, sy = width / cols, height / rows
        return [(canvas.transpose(2, 0, 1), (-border * sx, -border * sy, sx, sy, False))]
    if view == "tiles":
        fraction, out = 0.6, []
        for ty in (0, 1):
            for tx in (0, 1):
                y0, x0 = round(ty * (1 - fraction) * height), round(tx * (1 - fraction) * width)
                y1, x1 = y0 + round(fraction * height), x0 + round(fraction * width)
                prepared = resize_tf_bilinear(pixels[y0:y1, x0:x1]).transpose(2, 0, 1)
                out.append((prepared, (x0, y0, (x1 - x0) / 512, (y1 - y0) / 512, False)))
        return out
    raise SystemExit(f"{view}: unknown view (expected one of {', '.join(VIEWS)})")


def _any_size_session(threads: int = 2) -> Any:
    """The converted detector with its upsampling Resize nodes by scale 2: any input side divisible by 32."""
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    from counting.features import ensure_detector_onnx as ensure_onnx

    model = onnx.load(str(ensure_onnx()))
    for k, node in enumerate(node for node in model.graph.node if node.op_type == "Resize"):
        scales = f"study/resize{k}/scales"
        model.graph.initializer.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), scales))
        source = node.input[0]
        del node.input[:]
        node.input.extend([source, "", scales])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def extract(view: str, root: Path, split: str, out: Path, limit: int | None = None) -> None:
    from counting.data import Sideways, load_image, to_rgb
    from counting.features import DETECTOR_INPUT_NAME as INPUT_NAME
    from counting.features import CenterNet

    data = load_dataset("voc", root, split=split)
    train, test = data.subset("train"), data.subset("test")
    paths = ([str(p) for p in train.paths] + [str(p) for p in test.paths])[:limit]
    fixed = CenterNet(threads=2)
    session = _any_size_session() if view.startswith(("native", "border")) else None
    n, per = len(paths), (4 if view == "tiles" else 1)
    boxes = np.zeros((n, per, 100, 4), np.float32)
    scores = np.zeros((n, per, 100), np.float32)
    classes = np.zeros((n, per, 100), np.int16)
    mass = np.zeros((n, per, 20, 2, 2), np.float32)
    started = time.perf_counter()
    for i, path in enumerate(paths):
        image = load_image(path)
        pixels = np.asarray(to_rgb(image.upright() if isinstance(image, Sideways) else image))
        height, width = pixels.shape[:2]
        for v, (prepared, (x0, y0, sx, sy, mirrored)) in enumerate(_views(pixels, view)):
            batch = np.ascontiguousarray(prepared[None], np.float32)
            if session is None:
                heat, sides = fixed.run(batch)
            else:
                heat, sides = session.run(None, {INPUT_NAME: batch})
            found = decode_detections(heat, sides)
            b = found.boxes[0].copy()
            if mirrored:
                b[:, [0, 2]] = prepared.shape[2] - b[:, [2, 0]]
            b[:, [0, 2]] = (x0 + b[:, [0, 2]] * sx) / width
            b[:, [1, 3]] = (y0 + b[:, [1, 3]] * sy) / height
            boxes[i, v], scores[i, v], classes[i, v] = b, found.scores[0], found.classes[0]
            planes = heat[0][COCO_TO_VOC]
            planes = planes[:, :, ::-1] if mirrored else planes
            rows, cols = planes.shape[1:]
            mass[i, v] = planes[:, : rows // 2 * 2, : cols // 2 * 2].reshape(20, 2, rows // 2, 2, cols // 2).sum((2, 4))
        if i % 100 == 0:
            print(f"{view}: {i}/{n} photos, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    counts = np.vstack([np.asarray(train.counts, float), np.asarray(test.counts, float)])[:n]
    np.savez(
        out / f"raw_{view}.npz",
        boxes=boxes,
        scores=scores,
        classes=classes,
        mass=mass,
        y=counts,
        n_train=min(n, len(train)),
    )
    print(f"{view}: {n} photos in {time.perf_counter() - started:.0f} s -> {out / f'raw_{view}.npz'}")


# ---------------------------------------------------------------- descriptors from raw outputs


def detections(raw: dict, views: list[int] | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per photo: boxes, scores and VOC classes of the chosen views' detections (VOC classes only)."""
    chosen = range(raw["boxes"].shape[1]) if views is None else views
    out = []
    for i in range(len(raw["boxes"])):
        b = np.concatenate([raw["boxes"][i, v] for v in chosen])
        s = np.concatenate([raw["scores"][i, v] for v in chosen])
        c = VOC_OF_COCO[np.concatenate([raw["classes"][i, v] for v in chosen])]
        keep = c >= 0
        out.append((b[keep], s[keep], c[keep]))
    return out


def nms(found: tuple, limit: float, overlap: str = "iou") -> tuple:
    """Class-wise greedy suppression; ``overlap`` "ios": intersection over the smaller box (tile cuts)."""
    b, s, c = found
    order = np.argsort(-s, kind="stable")
    b, s, c = b[order], s[order], c[order]
    keep = np.ones(len(s), bool)
    area = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    for i in range(len(s)):
        if not keep[i]:
            continue
        j = np.arange(i + 1, len(s))
        j = j[keep[j] & (c[j] == c[i])]
        w = np.clip(np.minimum(b[i, 2], b[j, 2]) - np.maximum(b[i, 0], b[j, 0]), 0, None)
        h = np.clip(np.minimum(b[i, 3], b[j, 3]) - np.maximum(b[i, 1], b[j, 1]), 0, None)
        inter = w * h
        union = area[i] + area[j] - inter if overlap == "iou" else np.minimum(area[i], area[j])
        keep[j[inter / np.maximum(union, 1e-9) > limit]] = False
    return b[keep], s[keep], c[keep]


def counts(found: list, thresholds: tuple = THRESHOLDS, soft: bool = True) -> np.ndarray:
    out = np.zeros((len(found), len(thresholds) + soft, 20))
    for i, (_, s, c) in enumerate(found):
        for q, t in enumerate(thresholds):
            np.add.at(out[i, q], c[s >= t], 1)
        if soft:
            np.add.at(out[i, len(thresholds)], c, s)
    return out.reshape(len(found), -1)


def heat_mass(raw: dict, views: list[int] | None = None) -> np.ndarray:
    chosen = raw["mass"] if views is None else raw["mass"][:, views]
    return chosen.sum(axis=(1, 3, 4)) / 16.0


def size_counts(found: list, threshold: float, edges: tuple = (0.01, 0.1)) -> np.ndarray:
    """Per class, detections above ``threshold`` by box area (fraction of the picture)."""
    out = np.zeros((len(found), len(edges) + 1, 20))
    for i, (b, s, c) in enumerate(found):
        keep = s >= threshold
        area = (b[keep, 2] - b[keep, 0]) * (b[keep, 3] - b[keep, 1])
        np.add.at(out[i], (np.digitize(area, edges), c[keep]), 1)
    return out.reshape(len(found), -1)


def grid_counts(found: list, threshold: float = 0.25, side: int = 2) -> np.ndarray:
    out = np.zeros((len(found), side * side, 20))
    for i, (b, s, c) in enumerate(found):
        keep = s >= threshold
        cx, cy = (b[keep, 0] + b[keep, 2]) / 2, (b[keep, 1] + b[keep, 3]) / 2
        cell = np.clip((cy * side).astype(int), 0, side - 1) * side + np.clip((cx * side).astype(int), 0, side - 1)
        np.add.at(out[i], (cell, c[keep]), 1)
    return out.reshape(len(found), -1)


def base(raw: dict, view: int = 0) -> np.ndarray:
    """The ``detector`` descriptor's 180 quantities of one view (before the square root)."""
    return np.hstack([counts(detections(raw, [view])), heat_mass(raw, [view])])


# ---------------------------------------------------------------- validation


def _regressor(name: str) -> Callable[[], Any]:
    from counting.heads import TransformedRegressor

    def build() -> Any:
        if name == "ridge":
            from counting.evaluate import build_ridge

            inner = build_ridge()
        else:
            from counting.train import TrainingConfig, make_regressor

            inner = make_regressor(TrainingConfig(kernel="univariate", n_centers=50), n_rows=335)
        return TransformedRegressor(inner, "sqrt")

    return build


def cross_validated(build: Callable[[], Any], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Out-of-fold predictions, the folds of scripts/voc_study.py."""
    positions = np.arange(len(y))
    predicted = np.full(y.shape, np.nan)
    for fold in np.array_split(np.random.default_rng(0).permutation(positions), FOLDS):
        rest = np.setdiff1d(positions, fold)
        predicted[fold] = np.clip(build().fit(X[rest], y[rest]).predict(X[fold]), 0, None)
    return predicted


def study(out: Path) -> None:
    raws = {view: dict(np.load(out / f"raw_{view}.npz")) for view in VIEWS if (out / f"raw_{view}.npz").is_file()}
    if "stretch" not in raws:
        raise SystemExit(f"{out}: run `extract stretch` first")
    n = int(raws["stretch"]["n_train"])
    y = raws["stretch"]["y"][:n]  # the train part only
    candidates: dict[str, np.ndarray] = {}
    for view, raw in raws.items():
        if view != "tiles":
            candidates[view] = np.sqrt(base(raw))
    stretch = base(raws["stretch"])
    found = detections(raws["stretch"], [0])
    candidates["stretch + box-size bins @0.15"] = np.sqrt(np.hstack([stretch, size_counts(found, 0.15)]))
    candidates["stretch + 2x2 grid counts @0.25"] = np.sqrt(np.hstack([stretch, grid_counts(found)]))
    candidates["stretch + counts @0.05, 0.1"] = np.sqrt(np.hstack([stretch, counts(found, (0.05, 0.1), False)]))
    if "flip" in raws:
        mirrored = base(raws["flip"])
        candidates["stretch, flip-averaged"] = (np.sqrt(stretch) + np.sqrt(mirrored)) / 2
        merged = [
            nms((np.vstack([a[0], b[0]]), np.concatenate([a[1], b[1]]), np.concatenate([a[2], b[2]])), 0.5)
            for a, b in zip(found, detections(raws["flip"], [0]))
        ]
        both = (heat_mass(raws["stretch"]) + heat_mass(raws["flip"])) / 2
        candidates["stretch + mirror, detections merged (NMS)"] = np.sqrt(np.hstack([counts(merged), both]))
    if "letterbox" in raws:
        candidates["stretch | letterbox"] = np.sqrt(np.hstack([stretch, base(raws["letterbox"])]))
    if "tiles" in raws:
        tiles = detections(raws["tiles"])
        per_tile = [nms(t, 0.5, "ios") for t in tiles]
        candidates["stretch | 2x2 tiles (IoS NMS)"] = np.sqrt(
            np.hstack([stretch, counts(per_tile), heat_mass(raws["tiles"])])
        )
        for limit, overlap in ((0.5, "iou"), (0.6, "ios")):
            merged = [
                nms(
                    (np.vstack([a[0], b[0]]), np.concatenate([a[1], b[1]]), np.concatenate([a[2], b[2]])),
                    limit,
                    overlap,
                )
                for a, b in zip(found, tiles)
            ]
            candidates[f"whole + tiles merged ({overlap.upper()} {limit})"] = np.sqrt(
                np.hstack([counts(merged), heat_mass(raws["stretch"]), heat_mass(raws["tiles"])])
            )
    print(f"{n} train photos, {FOLDS}-fold validation inside them (sqrt targets; mRMSE / m-relRMSE)")
    for name, X in candidates.items():
        cells = []
        for regressor in ("agp-50", "ridge"):
            figures = voc_metrics(y, cross_validated(_regressor(regressor), X[:n], y))
            cells.append(f"{regressor} {figures['mrmse']:.3f} / {figures['m_rel_rmse']:.3f}")
        print(f"  {name:<44} {X.shape[1]:>4}-d  " + "   ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("extract", "study"))
    parser.add_argument("view", nargs="?", help=f"extract: one of {', '.join(VIEWS)}")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--split", default="random:0.25:0")
    parser.add_argument("--out", type=Path, default=Path("voc-detector-study"), help="folder of the raw outputs")
    parser.add_argument("--photos", type=int, default=None, help="extract: only the first N photos (a quick check)")
    args = parser.parse_args()
    if args.action == "extract":
        if args.view not in VIEWS:
            raise SystemExit(f"extract: name a view ({', '.join(VIEWS)})")
        extract(args.view, args.root, args.split, args.out, args.photos)
    else:
        study(args.out)


if __name__ == "__main__":
    main()
