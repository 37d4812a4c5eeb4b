"""A ConvDensityHead inside a model file: JSON with its arrays as base64 little-endian float64.

Same envelope as the closed-form heads (:mod:`counting.heads.density.persistence`: ``kind``
``counting-density-head``, ``head_kind`` ``conv``), so readers that predate the conv head refuse
it with a one-line error instead of misreading it. Everything read is validated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from counting.heads.crowd.people_mask import PeopleMask
from counting.heads.crowd.routing import SetRouter
from counting.heads.density.conv.head import CONV_STRIDE, ConvDensityHead, folded_weights, parameter_shapes
from counting.heads.density.sections import (
    DensityHeadError,
    checked_layers,
    checked_settings,
    decode_array,
    encode_array,
)

__all__ = ["conv_head_from_document", "conv_head_to_document"]

KIND = "counting-density-head"
# Version 2: an ensemble (``members`` > 1, arrays ``member{m}_weight{n}`` for members after the
# first). A single head is still written as version 1, which earlier readers take.
# Version 3: ``specialists`` (set name -> a conv head section of the same layers) and the
# ``router`` that mixes them (counting.heads.crowd.routing); earlier readers refuse such a file
# in one line rather than count with the general head alone.
# Version 4: a ``people_mask`` (counting.heads.crowd.people_mask) that the density is multiplied
# by; earlier readers refuse such a file rather than count without it.
FORMAT_VERSION = 4
_MASK_MAGNITUDE = 1e6
_MASK_MIN_SCALE = 1e-8
_MASK_MAX_CONTEXT = 32
_MASK_MAX_HIDDEN = 1024
_MAX_SPECIALISTS = 16
# People per stride-8 cell (8x8 input pixels) a head may give on the typical probe: real heads give
# at most a few; ShanghaiTech A's densest cells hold about 10.
_MAX_TYPICAL_DENSITY = 1e4
_ROUTER_MAGNITUDE = 1e6
_ROUTER_MIN_SCALE = 1e-8
_MAX_SET_NAME = 100
_MAX_MEMBERS = 64
_MAX_CHANNELS = 100_000
_MAX_WIDTH = 1024
_MAX_DEPTH = 16
_MAX_GRID = 64
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_OUTPUT_SCALE_RANGE = (1e-6, 1e12)  # training uses 100
# Backbone maps hold values of some tens; the probe also feeds values this large, whatever the
# file's standardisation says.
_PROBE_MAGNITUDE = 1e3


def conv_head_to_document(head: ConvDensityHead) -> dict[str, Any]:
    """The head as a JSON-ready dict for a model file."""
    ensemble = {"members": len(head.members)} if head.more_weights else {}
    version = 4 if head.people_mask is not None else 3 if head.specialists else 2 if head.more_weights else 1
    routed = (
        {
            "specialists": {name: conv_head_to_document(member) for name, member in head.specialists.items()},
            "router": _router_to_document(head.router),
        }
        if head.specialists and head.router is not None
        else {}
    )
    more = {
        f"member{member}_weight{number}": encode_array(value)
        for member, weights in enumerate(head.more_weights, start=1)
        for number, value in enumerate(weights)
    }
    return (
        {
            "kind": KIND,
            "format_version": version,
            "head_kind": "conv",
            "layers": list(head.layers),
            "width": int(head.width),
            "depth": int(head.depth),
            "stride": int(head.stride),
            "output_scale": float(head.output_scale),
            "settings": head.settings,
            "arrays": {"x_mean": encode_array(head.x_mean), "x_scale": encode_array(head.x_scale)}
            | {f"weight{number}": encode_array(value) for number, value in enumerate(head.weights)}
            | more,
        }
        | ensemble
        | routed
        | ({"people_mask": _mask_to_document(head.people_mask)} if head.people_mask is not None else {})
    )


def _mask_to_document(mask: PeopleMask) -> dict[str, Any]:
    return {
        "context": int(mask.context),
        "low": float(mask.low),
        "high": float(mask.high),
        "settings": mask.settings,
        "arrays": {
            "x_mean": encode_array(mask.x_mean),
            "x_scale": encode_array(mask.x_scale),
            "hidden_weight": encode_array(mask.hidden_weight),
            "hidden_bias": encode_array(mask.hidden_bias),
            "out_weight": encode_array(mask.out_weight),
            "out_bias": encode_array(np.array([mask.out_bias])),
        },
    }


def _mask_from_document(document: Any, channels: int, fail) -> PeopleMask:
    """The people mask, validated: shapes that fit the head's channels, a ramp inside [0, 1], and
    values bounded so that no map of finite values gives a NaN share (the logits stay far from
    float overflow: standardised values below 1e14 times weights below 1e6)."""
    if not isinstance(document, dict):
        raise fail("people_mask must be a mapping")
    context = _integer(document, "context", 0, _MASK_MAX_CONTEXT, fail)
    low, high = document.get("low"), document.get("high")
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in (low, high)) or not (
        0.0 <= low < high <= 1.0
    ):
        raise fail(f"people_mask low and high must satisfy 0 <= low < high <= 1, got {low!r:.30} and {high!r:.30}")
    entries = document.get("arrays")
    names = {"x_mean", "x_scale", "hidden_weight", "hidden_bias", "out_weight", "out_bias"}
    if not isinstance(entries, dict) or set(entries) != names:
        raise fail(f"people_mask arrays must be {', '.join(sorted(names))}")
    arrays = {name: decode_array(f"people_mask {name}", entry, fail) for name, entry in entries.items()}
    if not all(np.all(np.isfinite(value)) and np.all(np.abs(value) <= _MASK_MAGNITUDE) for value in arrays.values()):
        raise fail(f"people_mask arrays must hold finite floats within {_MASK_MAGNITUDE:g} (file edited or corrupt)")
    hidden = arrays["hidden_bias"].shape[0] if arrays["hidden_bias"].ndim == 1 else 0
    if not 1 <= hidden <= _MASK_MAX_HIDDEN:
        raise fail(f"people_mask hidden_bias must be a 1-D array of 1 to {_MASK_MAX_HIDDEN} values")
    shapes = {
        "x_mean": (channels,),
        "x_scale": (channels,),
        "hidden_weight": (2 * channels, hidden),
        "hidden_bias": (hidden,),
        "out_weight": (hidden,),
        "out_bias": (1,),
    }
    for name, shape in shapes.items():
        if arrays[name].shape != shape:
            raise fail(f"people_mask {name} has shape {arrays[name].shape}, expected {shape}")
    if np.any(arrays["x_scale"] < _MASK_MIN_SCALE):
        raise fail(f"people_mask x_scale must be at least {_MASK_MIN_SCALE:g}")
    settings = document.get("settings", {})
    if not isinstance(settings, dict):
        raise fail("people_mask settings must be a mapping")
    return PeopleMask(
        x_mean=arrays["x_mean"],
        x_scale=arrays["x_scale"],
        hidden_weight=arrays["hidden_weight"],
        hidden_bias=arrays["hidden_bias"],
        out_weight=arrays["out_weight"],
        out_bias=float(arrays["out_bias"][0]),
        context=context,
        low=float(low),
        high=float(high),
        settings=settings,
    )


def _router_to_document(router: SetRouter) -> dict[str, Any]:
    return {
        "classes": list(router.classes),
        "settings": router.settings,
        "arrays": {
            "mean": encode_array(router.mean),
            "scale": encode_array(router.scale),
            "coef": encode_array(router.coef),
            "intercept": encode_array(router.intercept),
        },
    }


def _router_from_document(document: Any, dim: int, fail) -> SetRouter:
    if not isinstance(document, dict):
        raise fail("router must be a mapping")
    classes = document.get("classes")
    if (
        not isinstance(classes, list)
        or not 2 <= len(classes) <= _MAX_SPECIALISTS * 4
        or not all(isinstance(name, str) and 0 < len(name) <= _MAX_SET_NAME for name in classes)
        or len(set(classes)) != len(classes)
    ):
        raise fail("router classes must be a list of at least two distinct set names")
    entries = document.get("arrays")
    if not isinstance(entries, dict) or set(entries) != {"mean", "scale", "coef", "intercept"}:
        raise fail("router arrays must be mean, scale, coef and intercept")
    arrays = {name: decode_array(f"router {name}", entry, fail) for name, entry in entries.items()}
    if not all(np.all(np.isfinite(value)) for value in arrays.values()):
        raise fail("router arrays must hold finite floats")
    shapes = {"mean": (dim,), "scale": (dim,), "coef": (len(classes), dim), "intercept": (len(classes),)}
    for name, shape in shapes.items():
        if arrays[name].shape != shape:
            raise fail(f"router {name} has shape {arrays[name].shape}, expected {shape}")
    # Bounds that keep every logit finite for finite statistics (float64 overflows near 1e308): a
    # file with coefficients of 1e300 would otherwise give NaN weights, and NaN counts, at count
    # time. A trained router's values are of order 1 (the shipped one: |coef| <= 0.27).
    if np.any(arrays["scale"] < _ROUTER_MIN_SCALE):
        raise fail(f"router scale must be at least {_ROUTER_MIN_SCALE:g}")
    for name in ("mean", "coef", "intercept"):
        if np.any(np.abs(arrays[name]) > _ROUTER_MAGNITUDE):
            raise fail(f"router {name} holds values beyond {_ROUTER_MAGNITUDE:g} (file edited or corrupt)")
    settings = document.get("settings", {})
    if not isinstance(settings, dict):
        raise fail("router settings must be a mapping")
    return SetRouter(tuple(classes), arrays["mean"], arrays["scale"], arrays["coef"], arrays["intercept"], settings)


def _integer(document: dict, name: str, low: int, high: int, fail) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(f"{name} must be an integer from {low} to {high}, got {value!r:.60}")
    return value


def _check_float32(prefix: str, weights: list[np.ndarray], mean: np.ndarray, spread: np.ndarray, fail) -> None:
    """The network runs in float32 with the standardisation folded into its first conv (see
    :func:`counting.heads.density.conv.head.folded_weights`): every value it holds must be a finite
    float32, or each count would come out NaN without a word."""
    with np.errstate(over="ignore", invalid="ignore"):
        for number, value in enumerate(folded_weights(weights, mean, spread)):
            if not np.all(np.abs(value) <= _FLOAT32_MAX):
                which = f"{prefix}weight{number}" + (" over x_scale and x_mean" if number < 2 else "")
                raise fail(f"{which} overflows float32, in which the head runs")


def conv_head_from_document(document: Any, source: str) -> ConvDensityHead:
    """Inverse of :func:`conv_head_to_document`, validated (one-line errors name ``source``)."""

    def fail(problem: str) -> DensityHeadError:
        return DensityHeadError(f"{source}: conv density head: {problem}")

    if not isinstance(document, dict) or document.get("kind") != KIND or document.get("head_kind") != "conv":
        raise fail("not a conv density head section")
    version = document.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise fail(f"format version {version!r} is not one this version reads ({FORMAT_VERSION})")
    layers = checked_layers(document, fail)
    width = _integer(document, "width", 1, _MAX_WIDTH, fail)
    depth = _integer(document, "depth", 0, _MAX_DEPTH, fail)
    members = _integer(document, "members", 1, _MAX_MEMBERS, fail) if "members" in document else 1
    if members > 1 and version < 2:
        raise fail(f"{members} members need format version 2, the file says {version}")
    if document.get("stride") != CONV_STRIDE:
        raise fail(f"stride must be {CONV_STRIDE}, got {document.get('stride')!r:.60}")
    scale = document.get("output_scale")
    # The density is the network's float32 output over output_scale: a tiny scale (5e-324) turns
    # any output into inf and every count into NaN.
    low, high = _OUTPUT_SCALE_RANGE
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not low <= scale <= high:
        raise fail(f"output_scale must be a positive number from {low:g} to {high:g}, got {scale!r:.60}")
    settings = checked_settings(document, fail, _MAX_GRID, display_max=True)
    entries = document.get("arrays")
    if not isinstance(entries, dict):
        raise fail("no arrays")
    arrays: dict[str, np.ndarray] = {}
    for name, entry in entries.items():
        arrays[name] = decode_array(name, entry, fail)
        if not np.all(np.isfinite(arrays[name])):
            raise fail(f"array {name!r} must hold finite floats")
    mean, spread = arrays.get("x_mean"), arrays.get("x_scale")
    if mean is None or spread is None or mean.ndim != 1 or spread.shape != mean.shape:
        raise fail("x_mean and x_scale must be 1-D arrays of one length")
    channels = mean.shape[0]
    if not 1 <= channels <= _MAX_CHANNELS or np.any(spread <= 0):
        raise fail(f"{channels} channels with x_scale > 0 expected")
    shapes = parameter_shapes(channels, width, depth)
    prefixes = [""] + [f"member{member}_" for member in range(1, members)]
    expected = {"x_mean", "x_scale"} | {
        f"{prefix}weight{number}" for prefix in prefixes for number in range(len(shapes))
    }
    if set(arrays) != expected:
        raise fail(
            f"arrays {sorted(set(arrays) ^ expected)[:3]} missing or unknown for width {width}, depth {depth}, "
            f"{members} member(s)"
        )
    ensemble = [[arrays[f"{prefix}weight{number}"] for number in range(len(shapes))] for prefix in prefixes]
    for prefix, weights in zip(prefixes, ensemble, strict=True):
        for number, (value, shape) in enumerate(zip(weights, shapes, strict=True)):
            if value.shape != shape:
                raise fail(f"{prefix}weight{number} has shape {value.shape}, expected {shape}")
        _check_float32(prefix, weights, mean, spread, fail)
    head = ConvDensityHead(
        layers=tuple(layers),
        width=width,
        depth=depth,
        x_mean=mean,
        x_scale=spread,
        weights=ensemble[0],
        more_weights=ensemble[1:],
        output_scale=float(scale),
        settings=settings,
    )
    _check_probe(head, prefixes, fail)
    if "specialists" in document or "router" in document:
        if version < 3:
            raise fail(f"specialists need format version 3, the file says {version}")
        head.specialists, head.router = _specialists(document, head, source, fail)
    if "people_mask" in document:
        if version < 4:
            raise fail(f"a people mask needs format version 4, the file says {version}")
        head.people_mask = _mask_from_document(document["people_mask"], head.n_channels, fail)
    return head


def _specialists(document: dict, head: ConvDensityHead, source: str, fail) -> tuple[dict, SetRouter]:
    """The specialist heads (each validated as a head of its own) and their router."""
    entries = document.get("specialists")
    if not isinstance(entries, dict) or not 1 <= len(entries) <= _MAX_SPECIALISTS:
        raise fail(f"specialists must map 1 to {_MAX_SPECIALISTS} set names to heads")
    specialists = {}
    for name, entry in entries.items():
        if not 0 < len(name) <= _MAX_SET_NAME:
            raise fail("a specialist's set name must be 1 to 100 characters")
        if isinstance(entry, dict) and ("specialists" in entry or "router" in entry):
            raise fail(f"specialist {name!r:.60} has specialists of its own")
        member = conv_head_from_document(entry, f"{source}: specialist {name!r:.60}")
        if tuple(member.layers) != tuple(head.layers) or member.n_channels != head.n_channels:
            raise fail(f"specialist {name!r:.60} reads other maps than the head ({'+'.join(member.layers)})")
        specialists[name] = member
    router = _router_from_document(document.get("router"), 2 * head.n_channels, fail)
    missing = [name for name in specialists if name not in router.classes]
    if missing:
        raise fail(f"the router has no class for specialist {missing[0]!r:.60}")
    return specialists, router


def _check_probe(head: ConvDensityHead, prefixes: list[str], fail) -> None:
    """Weights that are finite float32 can still overflow inside the network (products of large
    weights); run every member on small inputs, so such a file is refused here rather than giving
    NaN counts for every image. The inputs: typical channel values (by the file's standardisation),
    and zeros and values up to a thousand whatever it says, since a file can shrink x_scale (and its
    first weights with it) so that typical values stay tiny while every real map overflows."""
    import torch

    rng = np.random.default_rng(0)
    shape = (1, head.n_channels, 6, 6)
    typical = np.clip(rng.standard_normal(shape), -3, 3)
    probes = [
        head.x_mean[None, :, None, None] + typical * head.x_scale[None, :, None, None],
        np.zeros(shape),
        rng.uniform(0.0, _PROBE_MAGNITUDE, shape),
        rng.uniform(-_PROBE_MAGNITUDE, _PROBE_MAGNITUDE, shape),
    ]
    batch = torch.from_numpy(np.concatenate(probes).astype(np.float32))
    with torch.inference_mode():
        for number, network in enumerate(head.networks(), start=1):
            which = f"member {number} of {len(prefixes)}" if len(prefixes) > 1 else "the network"
            # Before the final softplus: softplus(-inf) is a finite 0, so a network overflowing to
            # -inf on the probes passed, and gave NaN counts (inf - inf) on real maps.
            logits = network[:-1](batch).double().numpy()
            if not np.all(np.isfinite(logits)):
                raise fail(f"{which}: its weights overflow inside the network (file edited or corrupt)")
            # People per cell on typical maps: a trained head gives a few; an edited bias of 1e30 gave
            # counts of 1e31 without a word.
            typical_density = np.logaddexp(0.0, logits[0]) / (head.output_scale * len(prefixes))
            if np.max(typical_density) > _MAX_TYPICAL_DENSITY:
                raise fail(
                    f"{which}: gives {np.max(typical_density):.3g} people per cell on typical maps "
                    "(file edited or corrupt)"
                )
