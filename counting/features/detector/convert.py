"""A small converter from a TensorFlow.js graph model (``model.json`` + weight shards) to ONNX.

No TensorFlow and no node at run time: the JSON topology is read node by node and each op is
written with ``onnx.helper``. Only the nodes the requested outputs depend on are converted
(MB3-CenterNet's in-graph top-100 decode, TopKV2 and friends, is left out: ``decode.py`` does it
in NumPy), and an op outside :data:`SUPPORTED_OPS` is refused with one line naming it.

Layout: TensorFlow runs NHWC, ONNX's Conv NCHW. Every 4-D activation of the converted graph is
NCHW; the ONNX input is the image batch already planar, ``(N, C, H, W)``, so no Transpose runs at
the input, and the outputs stay NCHW (a heat map ``(N, 80, 128, 128)`` is one plane per class,
what the per-class sums want). Constants that meet an activation (a per-channel vector, an NHWC
4-D tensor) and axis arguments (Mean, ConcatV2) are moved to NCHW at conversion time.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import CountingError

__all__ = ["SUPPORTED_OPS", "ConversionError", "TfjsGraph", "convert_tfjs_graph", "read_tfjs_graph"]

OPSET = 13
# NHWC axis -> NCHW axis.
NCHW_AXIS = {0: 0, 1: 2, 2: 3, 3: 1, -1: 1, -2: 3, -3: 2, -4: 0}

SUPPORTED_OPS = (
    "Placeholder",
    "Const",
    "Identity",
    "_FusedConv2D",
    "Conv2D",
    "FusedDepthwiseConv2dNative",
    "DepthwiseConv2dNative",
    "Mul",
    "Add",
    "AddV2",
    "Sub",
    "Relu",
    "Relu6",
    "Sigmoid",
    "Mean",
    "ConcatV2",
    "ResizeBilinear",
    "MaxPool",
)
# Activations a fused convolution may end with (tfjs's fused kernels).
FUSED_ACTIVATIONS = ("Relu", "Relu6", "Sigmoid")


class ConversionError(CountingError, ValueError):
    """A tfjs graph that cannot be converted (one line: the node, the op or the weight)."""


@dataclass
class TfjsGraph:
    """The parsed graph: nodes by name (in file order) and the constant arrays."""

    nodes: dict[str, dict[str, Any]]
    constants: dict[str, np.ndarray]
    signature: dict[str, Any]


# -- reading --------------------------------------------------------------------------------
def _decode_weights(manifest: list[dict[str, Any]], folder: Path) -> dict[str, np.ndarray]:
    """Arrays of a weightsManifest: each group's shards concatenated, weights laid end to end."""
    arrays: dict[str, np.ndarray] = {}
    plain = {"float32": np.float32, "int32": np.int32, "bool": np.bool_, "float16": np.float16}
    for group in manifest:
        data = b"".join((folder / name).read_bytes() for name in group["paths"])
        offset = 0
        for spec in group["weights"]:
            name, shape, dtype = spec["name"], tuple(int(s) for s in spec["shape"]), spec["dtype"]
            count = int(np.prod(shape, dtype=np.int64))
            quant = spec.get("quantization")
            if quant is not None:
                stored = {"float16": np.float16, "uint8": np.uint8, "uint16": np.uint16}.get(quant["dtype"])
                if stored is None:
                    raise ConversionError(f"weight {name}: unknown quantisation {quant['dtype']!r}")
            else:
                stored = plain.get(dtype)
                if stored is None:
                    raise ConversionError(f"weight {name}: unsupported dtype {dtype!r}")
            size = count * np.dtype(stored).itemsize
            if offset + size > len(data):
                raise ConversionError(f"weight {name}: the weight files end before it (truncated shard?)")
            raw = np.frombuffer(data, dtype=stored, count=count, offset=offset)
            offset += size
            if quant is not None and quant["dtype"] != "float16":
                # Affine quantisation (tfjs-converter --quantize_uint8/uint16): value = q * scale + min.
                raw = raw.astype(np.float32) * np.float32(quant["scale"]) + np.float32(quant["min"])
            target = np.int32 if dtype == "int32" else np.bool_ if dtype == "bool" else np.float32
            arrays[name] = np.asarray(raw, dtype=target).reshape(shape)
    return arrays


def read_tfjs_graph(model_json: str | Path) -> TfjsGraph:
    """Parse ``model.json`` and its weight shards (same folder)."""
    path = Path(model_json)
    try:
        document = json.loads(path.read_text())
        topology = document["modelTopology"]
        manifest = document["weightsManifest"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConversionError(f"{path}: not a tfjs graph model ({type(error).__name__}: {error})") from None
    try:
        constants = _decode_weights(manifest, path.parent)
    except OSError as error:
        raise ConversionError(f"{path}: cannot read a weight file ({error})") from None
    nodes = {node["name"]: node for node in topology.get("node", [])}
    return TfjsGraph(nodes=nodes, constants=constants, signature=document.get("signature") or {})


# -- attribute helpers ----------------------------------------------------------------------
def _attr(node: dict[str, Any], name: str, default: Any = None) -> Any:
    value = node.get("attr", {}).get(name)
    if value is None:
        return default
    if "list" in value:
        items = value["list"]
        if "i" in items:
            return [int(i) for i in items["i"]]
        if "s" in items:
            return [base64.b64decode(s).decode() for s in items["s"]]
        if "f" in items:
            return [float(f) for f in items["f"]]
        return []
    if "s" in value:
        return base64.b64decode(value["s"]).decode()
    if "i" in value:
        return int(value["i"])
    if "f" in value:
        return float(value["f"])
    if "b" in value:
        return bool(value["b"])
    return default


def _tensor_name(text: str) -> str:
    """``node:0`` and ``node`` are the same tensor."""
    return text[:-2] if text.endswith(":0") else text


def _data_inputs(node: dict[str, Any]) -> list[str]:
    return [_tensor_name(name) for name in node.get("input", []) if not name.startswith("^")]


# -- conversion -----------------------------------------------------------------------------
class _Builder:
    def __init__(self, graph: TfjsGraph) -> None:
        self.graph = graph
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.inputs: list[Any] = []
        self._names: set[str] = set()
        self.alias: dict[str, str] = {}

    def unique(self, base: str) -> str:
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}__{k}"
        self._names.add(name)
        return name

    def constant(self, base: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.unique(base)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, kind: str, inputs: Sequence[str], output: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        out = output or self.unique(f"{inputs[0]}/{kind}")
        if output is not None:
            self._names.add(output)
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def value(self, name: str) -> str:
        return self.alias.get(name, name)

    def const_array(self, name: str) -> np.ndarray | None:
        node = self.graph.nodes.get(name)
        if node is not None and node["op"] == "Const":
            if name not in self.graph.constants:
                raise ConversionError(f"node {name}: a Const without a weight in the manifest")
            return self.graph.constants[name]
        return None


def _conv(
    b: _Builder,
    node: dict[str, Any],
    x: str,
    weight: np.ndarray,
    depthwise: bool,
    output: str,
    bias: np.ndarray | None = None,
) -> str:
    """One Conv (NCHW) from a TF conv node's weights and attributes (HWIO or HW-C-mult)."""
    kh, kw = int(weight.shape[0]), int(weight.shape[1])
    if depthwise:
        channels, multiplier = int(weight.shape[2]), int(weight.shape[3])
        # TF's depthwise output channel c*mult+m: input channel c, filter m.
        onnx_weight = weight.reshape(kh, kw, channels * multiplier).transpose(2, 0, 1)[:, None]
        group = channels
    else:
        onnx_weight = weight.transpose(3, 2, 0, 1)
        group = 1
    strides = _attr(node, "strides", [1, 1, 1, 1])
    dilations = _attr(node, "dilations", [1, 1, 1, 1])
    if _attr(node, "data_format", "NHWC") != "NHWC":
        raise ConversionError(f"node {node['name']}: data_format {_attr(node, 'data_format')!r} (NHWC expected)")
    padding = _attr(node, "padding", "VALID")
    attrs: dict[str, Any] = {
        "kernel_shape": [kh, kw],
        "strides": [strides[1], strides[2]],
        "dilations": [dilations[1], dilations[2]],
        "group": group,
    }
    if padding == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"  # TF puts the odd extra pixel at the end, as SAME_UPPER
    elif padding == "VALID":
        attrs["pads"] = [0, 0, 0, 0]
    elif padding == "EXPLICIT":
        pads = _attr(node, "explicit_paddings", [])
        attrs["pads"] = [pads[2], pads[4], pads[3], pads[5]]
    else:
        raise ConversionError(f"node {node['name']}: padding {padding!r}")
    inputs = [x, b.constant(f"{node['name']}/weight", onnx_weight.astype(np.float32))]
    if bias is not None:  # in the Conv itself: onnxruntime then fuses a following Relu/Clip
        inputs.append(b.constant(f"{node['name']}/bias", np.asarray(bias, np.float32).reshape(-1)))
    return b.op("Conv", inputs, output, **attrs)


def _activation(b: _Builder, kind: str, x: str, output: str | None) -> str:
    if kind == "Relu":
        return b.op("Relu", [x], output)
    if kind == "Sigmoid":
        return b.op("Sigmoid", [x], output)
    low = b.constant("relu6/min", np.array(0.0, np.float32))
    high = b.constant("relu6/max", np.array(6.0, np.float32))
    return b.op("Clip", [x, low, high], output)


def _fused_conv(b: _Builder, node: dict[str, Any], depthwise: bool) -> None:
    name = node["name"]
    inputs = _data_inputs(node)
    weight = b.const_array(inputs[1])
    if weight is None:
        raise ConversionError(f"node {name}: its filter is not a constant")
    fused = _attr(node, "fused_ops", [])
    extra = [b.const_array(i) for i in inputs[2:]]
    if any(array is None for array in extra):
        raise ConversionError(f"node {name}: a fused argument is not a constant")
    ops = list(fused)
    bias: np.ndarray | None = None
    if ops and ops[0] == "BiasAdd":
        bias = np.asarray(extra[0], np.float32)
        ops = ops[1:]
    elif ops and ops[0] == "FusedBatchNorm":
        scale, offset, mean, variance = (np.asarray(a, np.float32) for a in extra[:4])
        factor = scale / np.sqrt(variance + np.float32(_attr(node, "epsilon", 0.0)))
        # Scale each output channel: HWIO's last axis; depthwise (H, W, C, M) holds channel c*M+m.
        weight = weight * (factor.reshape(weight.shape[2], weight.shape[3]) if depthwise else factor)
        bias = offset - mean * factor
        ops = ops[1:]
    if len(ops) > 1 or (ops and ops[0] not in FUSED_ACTIVATIONS):
        raise ConversionError(f"node {name}: unsupported fused ops {fused!r}")
    x = b.value(inputs[0])
    y = _conv(
        b, node, x, np.asarray(weight, np.float32), depthwise, name if not ops else b.unique(name + "/conv"), bias
    )
    if ops:
        _activation(b, ops[0], y, name)


def _nchw_constant(array: np.ndarray, node_name: str) -> np.ndarray:
    """A constant operand of an elementwise op with an NCHW activation, broadcast the same way."""
    if array.ndim == 0 or array.size == 1:
        return array.reshape(())
    if array.ndim == 1:
        return array.reshape(-1, 1, 1)
    if array.ndim == 4:
        return array.transpose(0, 3, 1, 2)
    raise ConversionError(f"node {node_name}: a {array.ndim}-D constant operand cannot be laid out as NCHW")


def _convert_node(b: _Builder, node: dict[str, Any]) -> None:
    name, kind = node["name"], node["op"]
    inputs = _data_inputs(node)
    if kind == "Const":
        return  # constants are written where they are used (in the layout that use needs)
    if kind == "Identity":
        b.alias[name] = b.value(inputs[0])
        return
    if kind in ("_FusedConv2D", "FusedDepthwiseConv2dNative"):
        _fused_conv(b, node, depthwise=kind == "FusedDepthwiseConv2dNative")
        return
    if kind in ("Conv2D", "DepthwiseConv2dNative"):
        weight = b.const_array(inputs[1])
        if weight is None:
            raise ConversionError(f"node {name}: its filter is not a constant")
        _conv(b, node, b.value(inputs[0]), np.asarray(weight, np.float32), kind == "DepthwiseConv2dNative", name)
        return
    if kind in ("Mul", "Add", "AddV2", "Sub"):
        operands = []
        for operand in inputs:
            array = b.const_array(operand)
            if array is None:
                operands.append(b.value(operand))
            else:
                operands.append(b.constant(operand, _nchw_constant(np.asarray(array, np.float32), name)))
        b.op({"Mul": "Mul", "Add": "Add", "AddV2": "Add", "Sub": "Sub"}[kind], operands, name)
        return
    if kind in ("Relu", "Relu6", "Sigmoid"):
        _activation(b, kind, b.value(inputs[0]), name)
        return
    if kind == "Mean":
        axes = b.const_array(inputs[1])
        if axes is None:
            raise ConversionError(f"node {name}: Mean over axes that are not a constant")
        nchw = sorted(NCHW_AXIS[int(a)] for a in np.atleast_1d(axes))
        b.op("ReduceMean", [b.value(inputs[0])], name, axes=nchw, keepdims=int(bool(_attr(node, "keep_dims", False))))
        return
    if kind == "ConcatV2":
        axis = b.const_array(inputs[-1])
        if axis is None:
            raise ConversionError(f"node {name}: ConcatV2 along an axis that is not a constant")
        b.op("Concat", [b.value(i) for i in inputs[:-1]], name, axis=NCHW_AXIS[int(axis)])
        return
    if kind == "ResizeBilinear":
        size = b.const_array(inputs[1])
        if size is None:
            raise ConversionError(f"node {name}: ResizeBilinear to a size that is not a constant")
        if _attr(node, "align_corners", False):
            mode = "align_corners"
        elif _attr(node, "half_pixel_centers", False):
            mode = "half_pixel"
        else:
            mode = "asymmetric"  # TF's legacy resize: source = destination * in/out
        x = b.value(inputs[0])
        shape = b.op("Shape", [x])
        batch_channels = b.op(
            "Slice",
            [
                shape,
                b.constant(f"{name}/start", np.array([0], np.int64)),
                b.constant(f"{name}/end", np.array([2], np.int64)),
            ],
        )
        sizes = b.op("Concat", [batch_channels, b.constant(f"{name}/hw", np.asarray(size, np.int64))], axis=0)
        b.op("Resize", [x, "", "", sizes], name, mode="linear", coordinate_transformation_mode=mode)
        return
    if kind == "MaxPool":
        ksize, strides = _attr(node, "ksize", [1, 1, 1, 1]), _attr(node, "strides", [1, 1, 1, 1])
        padding = _attr(node, "padding", "VALID")
        pad = {"auto_pad": "SAME_UPPER"} if padding == "SAME" else {"pads": [0, 0, 0, 0]}
        b.op("MaxPool", [b.value(inputs[0])], name, kernel_shape=ksize[1:3], strides=strides[1:3], **pad)
        return
    raise ConversionError(f"node {name}: op {kind!r} is not supported by the converter")


def _needed(graph: TfjsGraph, outputs: Sequence[str]) -> list[dict[str, Any]]:
    """The nodes the outputs depend on, in an order where inputs come first."""
    order: list[dict[str, Any]] = []
    seen: set[str] = set()
    for output in outputs:
        if output not in graph.nodes:
            raise ConversionError(f"output {output!r}: no such node in the graph")
        stack: list[tuple[str, bool]] = [(output, False)]
        while stack:
            name, expanded = stack.pop()
            if name in seen and not expanded:
                continue
            if expanded:
                order.append(graph.nodes[name])
                continue
            seen.add(name)
            node = graph.nodes.get(name)
            if node is None:
                raise ConversionError(f"node {name!r}: used as an input but not in the graph")
            stack.append((name, True))
            stack.extend((i.split(":")[0], False) for i in reversed(_data_inputs(node)) if i.split(":")[0] not in seen)
    return order


def convert_tfjs_graph(graph: TfjsGraph | str | Path, outputs: Sequence[str], input_channels: int = 3) -> bytes:
    """ONNX model bytes computing ``outputs`` (NCHW) of a tfjs graph from its Placeholder (NCHW).

    Unknown ops in the needed part of the graph raise :class:`ConversionError` naming the op;
    the model is checked with ``onnx.checker`` before it is returned.
    """
    import onnx
    from onnx import TensorProto, helper

    if not isinstance(graph, TfjsGraph):
        graph = read_tfjs_graph(graph)
    needed = _needed(graph, outputs)
    for node in needed:
        if node["op"] not in SUPPORTED_OPS:
            raise ConversionError(f"node {node['name']}: op {node['op']!r} is not supported by the converter")
    builder = _Builder(graph)
    for node in needed:
        builder._names.add(node["name"])
    graph_inputs = []
    for node in needed:
        if node["op"] == "Placeholder":
            graph_inputs.append(
                helper.make_tensor_value_info(
                    node["name"], TensorProto.FLOAT, ["batch", input_channels, "height", "width"]
                )
            )
        else:
            _convert_node(builder, node)
    if len(graph_inputs) != 1:
        raise ConversionError(f"the outputs depend on {len(graph_inputs)} placeholders (one image input expected)")
    graph_outputs = []
    for output in outputs:
        source = builder.value(output)
        if source != output:  # an Identity output: give it its own name
            builder.op("Identity", [source], output)
        graph_outputs.append(helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", None, None, None]))
    model = helper.make_model(
        helper.make_graph(builder.nodes, "tfjs-graph", graph_inputs, graph_outputs, builder.initializers),
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="counting.features.detector.convert",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()
