"""The tfjs -> ONNX converter on a small graph the test writes itself, against a NumPy reference (NHWC, as TF computes)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from counting.features.detector.convert import ConversionError, convert_tfjs_graph, read_tfjs_graph

RNG = np.random.default_rng(7)


def _s(text: str) -> dict:
    return {"s": base64.b64encode(text.encode()).decode()}


def _ints(values: list[int]) -> dict:
    return {"list": {"i": [str(v) for v in values]}}


def _conv_attrs(strides: int, padding: str, fused: list[str] | None = None) -> dict:
    attrs = {
        "strides": _ints([1, strides, strides, 1]),
        "dilations": _ints([1, 1, 1, 1]),
        "padding": _s(padding),
        "data_format": _s("NHWC"),
    }
    if fused is not None:
        attrs["fused_ops"] = {"list": {"s": [base64.b64encode(op.encode()).decode() for op in fused]}}
        attrs["num_args"] = {"i": str(len(fused) and 1)}
    return attrs


class GraphWriter:
    """Writes model.json + one weight shard the way tfjs-converter does (fp16, uint8, float32, int32)."""

    def __init__(self) -> None:
        self.nodes: list[dict] = []
        self.specs: list[dict] = []
        self.data: list[bytes] = []
        self.values: dict[str, np.ndarray] = {}  # what the weights decode to (the reference uses these)

    def const(self, name: str, value: np.ndarray, storage: str = "float32") -> str:
        value = np.asarray(value)
        spec = {"name": name, "shape": list(value.shape), "dtype": "int32" if value.dtype.kind == "i" else "float32"}
        if storage == "float16":
            stored = value.astype(np.float16)
            spec["quantization"] = {"dtype": "float16", "original_dtype": "float32"}
            decoded = stored.astype(np.float32)
        elif storage == "uint8":
            low, high = float(value.min()), float(value.max())
            scale = (high - low) / 255 or 1.0
            stored = np.round((value - low) / scale).astype(np.uint8)
            spec["quantization"] = {"dtype": "uint8", "scale": scale, "min": low, "original_dtype": "float32"}
            decoded = stored.astype(np.float32) * np.float32(scale) + np.float32(low)
        elif value.dtype.kind == "i":
            stored = decoded = value.astype(np.int32)
        else:
            stored = decoded = value.astype(np.float32)
        self.specs.append(spec)
        self.data.append(stored.tobytes())
        self.values[name] = decoded
        self.nodes.append({"name": name, "op": "Const", "attr": {}})
        return name

    def node(self, name: str, op: str, inputs: list[str], attrs: dict | None = None) -> str:
        self.nodes.append({"name": name, "op": op, "input": inputs, "attr": attrs or {}})
        return name

    def write(self, folder: Path) -> Path:
        (folder / "weights.bin").write_bytes(b"".join(self.data))
        document = {
            "format": "graph-model",
            "modelTopology": {"node": self.nodes},
            "weightsManifest": [{"paths": ["weights.bin"], "weights": self.specs}],
        }
        path = folder / "model.json"
        path.write_text(json.dumps(document))
        return path


# -- NumPy reference of the TF ops (NHWC) ------------------------------------------------------
def _same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def ref_conv(x: np.ndarray, w: np.ndarray, stride: int, padding: str, depthwise: bool = False) -> np.ndarray:
    kh, kw = w.shape[:2]
    if padding == "SAME":
        (top, bottom), (left, right) = _same_pads(x.shape[1], kh, stride), _same_pads(x.shape[2], kw, stride)
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    out_h = (x.shape[1] - kh) // stride + 1
    out_w = (x.shape[2] - kw) // stride + 1
    result = 0.0
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i : i + stride * out_h : stride, j : j + stride * out_w : stride, :]
            if depthwise:  # (kh, kw, C, M): channel c*M+m
                result = result + (patch[..., :, None] * w[i, j][None, None, None]).reshape(*patch.shape[:3], -1)
            else:
                result = result + patch @ w[i, j]
    return np.asarray(result, np.float64)


def ref_resize_legacy(x: np.ndarray, height: int, width: int) -> np.ndarray:
    def axis(source: int, target: int):
        position = np.arange(target) * source / target
        low = np.floor(position).astype(int)
        return low, np.minimum(low + 1, source - 1), position - low

    r0, r1, rw = axis(x.shape[1], height)
    c0, c1, cw = axis(x.shape[2], width)
    rows = x[:, r0] * (1 - rw)[None, :, None, None] + x[:, r1] * rw[None, :, None, None]
    return rows[:, :, c0] * (1 - cw)[None, None, :, None] + rows[:, :, c1] * cw[None, None, :, None]


def build_small_graph(folder: Path) -> tuple[Path, callable]:
    g = GraphWriter()
    g.node("images", "Placeholder", [])
    w1 = g.const("w1", RNG.normal(0, 0.3, (3, 3, 3, 8)), "float16")
    b1 = g.const("b1", RNG.normal(0, 0.1, (8,)), "float32")
    c1 = g.node("conv1", "_FusedConv2D", ["images", w1, b1], _conv_attrs(2, "SAME", ["BiasAdd", "Relu6"]))
    wd = g.const("wd", RNG.normal(0, 0.3, (3, 3, 8, 2)), "uint8")
    bd = g.const("bd", RNG.normal(0, 0.1, (16,)), "float16")
    d1 = g.node("dw1", "FusedDepthwiseConv2dNative", [c1, wd, bd], _conv_attrs(1, "SAME", ["BiasAdd", "Relu"]))
    scale = g.const("scale", RNG.uniform(0.5, 1.5, (16,)))
    m1 = g.node("mul1", "Mul", [scale, d1])
    three = g.const("three", np.array(3.0, np.float32))
    a1 = g.node("add1", "AddV2", [m1, three])
    axes = g.const("axes", np.array([1, 2], np.int32))
    mean = g.node("se_mean", "Mean", [a1, axes], {"keep_dims": {"b": True}})
    sig = g.node("se_sig", "Sigmoid", [mean])
    gated = g.node("se_mul", "Mul", [a1, sig])
    wp = g.const("wp", RNG.normal(0, 0.3, (1, 1, 16, 4)))
    p1 = g.node("project", "Conv2D", [gated, wp], _conv_attrs(1, "VALID"))
    wd2 = g.const("wd2", RNG.normal(0, 0.3, (3, 3, 16, 1)))
    d2 = g.node("dw2", "DepthwiseConv2dNative", [a1, wd2], _conv_attrs(2, "SAME"))
    size = g.const("size", np.array([8, 10], np.int32))
    up = g.node("up", "ResizeBilinear", [d2, size], {"align_corners": {"b": False}, "half_pixel_centers": {"b": False}})
    axis = g.const("axis", np.array(3, np.int32))
    cat = g.node("cat", "ConcatV2", [p1, up, axis])
    r6 = g.node("relu6", "Relu6", [cat])
    g.node("out", "Identity", [r6])
    g.node("unused_topk", "TopKV2", ["out"])  # not needed for "out": must not stop the conversion
    path = g.write(folder)
    v = g.values

    def reference(x: np.ndarray) -> np.ndarray:
        y = np.clip(ref_conv(x, v["w1"], 2, "SAME") + v["b1"], 0, 6)
        y = np.maximum(ref_conv(y, v["wd"], 1, "SAME", depthwise=True) + v["bd"], 0)
        a = v["scale"] * y + 3.0
        se = 1 / (1 + np.exp(-a.mean(axis=(1, 2), keepdims=True)))
        p = ref_conv(a * se, v["wp"], 1, "VALID")
        d = ref_conv(a, v["wd2"], 2, "SAME", depthwise=True)
        return np.clip(np.concatenate([p, ref_resize_legacy(d, 8, 10)], axis=3), 0, 6)

    return path, reference


def test_small_graph_matches_numpy_reference(tmp_path: Path) -> None:
    import onnxruntime

    path, reference = build_small_graph(tmp_path)
    model = convert_tfjs_graph(path, ["out"])
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = RNG.uniform(0, 1, (2, 16, 19, 3)).astype(np.float32)  # odd width: SAME pads unevenly
    (out,) = session.run(None, {"images": np.ascontiguousarray(x.transpose(0, 3, 1, 2))})
    expected = reference(x.astype(np.float64)).transpose(0, 3, 1, 2)
    assert out.shape == (2, 20, 8, 10)
    np.testing.assert_allclose(out, expected, atol=2e-5, rtol=1e-4)
    assert np.abs(expected).max() > 0.5  # the reference is not trivially zero


def test_weights_decode_every_storage(tmp_path: Path) -> None:
    path, _ = build_small_graph(tmp_path)
    graph = read_tfjs_graph(path)
    assert graph.constants["axes"].dtype == np.int32 and graph.constants["axes"].tolist() == [1, 2]
    assert graph.constants["w1"].dtype == np.float32 and graph.constants["w1"].shape == (3, 3, 3, 8)
    # uint8 affine quantisation comes back within half a step
    wd = graph.constants["wd"]
    assert wd.shape == (3, 3, 8, 2) and len(np.unique(wd)) <= 256


def test_unknown_op_is_refused_with_its_name(tmp_path: Path) -> None:
    g = GraphWriter()
    g.node("images", "Placeholder", [])
    g.node("odd", "Erf", ["images"])
    path = g.write(tmp_path)
    with pytest.raises(ConversionError, match="op 'Erf' is not supported"):
        convert_tfjs_graph(path, ["odd"])


def test_truncated_weights_are_refused(tmp_path: Path) -> None:
    path, _ = build_small_graph(tmp_path)
    data = (tmp_path / "weights.bin").read_bytes()
    (tmp_path / "weights.bin").write_bytes(data[:-10])
    with pytest.raises(ConversionError, match="truncated"):
        read_tfjs_graph(path)


def test_missing_output_is_refused(tmp_path: Path) -> None:
    path, _ = build_small_graph(tmp_path)
    with pytest.raises(ConversionError, match="no such node"):
        convert_tfjs_graph(path, ["nope"])
