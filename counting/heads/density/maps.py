"""Intermediate feature maps of image files on the density head's grid, cached on disk.

The head works on one grid per image: stride 16 of the network input (EfficientNet-Lite0's
block 5-10 resolution). Maps of finer layers are average-pooled onto it, coarser ones are
upsampled bilinearly, so any list of layers gives one ``(C, h, w)`` array per image from one
trunk pass. Each layer is cached on its own (a later run choosing other layers reuses it).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from rich.console import Console

from counting.core.terminal import on_terminal
from counting.data.imaging import image_size
from counting.features.backbones import Backbone, Preprocessing
from counting.features.backbones.base import FINAL, OutputTaps, adaptive_average_pool
from counting.features.cache import FeatureCache, settings_key
from counting.features.extract import (
    _prepared_batches,
    _progress_bar,
    batch_shape,
    extraction_settings,
    group_by_shape,
)

__all__ = ["HEAD_STRIDE", "MapSet", "extract_maps", "head_grid", "maps_on_grid"]

HEAD_STRIDE = 16


def head_grid(input_size: tuple[int, int], stride: int = HEAD_STRIDE) -> tuple[int, int]:
    """``(h, w)`` of the head's grid for a network input of ``(height, width)`` pixels."""
    height, width = input_size
    return math.ceil(height / stride), math.ceil(width / stride)


def resample(fmap: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(B, C, h, w)`` -> ``(B, C, *size)``: cell averages when finer, bilinear when coarser."""
    batch, channels, height, width = fmap.shape
    rows, cols = size
    if (height, width) == (rows, cols):
        return np.ascontiguousarray(fmap, dtype=np.float32)
    if height >= rows and width >= cols:
        pooled = adaptive_average_pool(fmap, (rows, cols))  # (B, rows*cols, C)
        return np.ascontiguousarray(pooled.transpose(0, 2, 1).reshape(batch, channels, rows, cols))
    upsampled = torch.nn.functional.interpolate(
        torch.from_numpy(np.ascontiguousarray(fmap, dtype=np.float32)), size=size, mode="bilinear", align_corners=False
    )
    return upsampled.numpy()


def maps_on_grid(
    backbone: Backbone, batch: np.ndarray | torch.Tensor, layers: Sequence[str], stride: int = HEAD_STRIDE
) -> np.ndarray:
    """The named layers of a prepared batch on the head grid, concatenated: ``(B, C, h, w)``."""
    maps = backbone.feature_maps(batch, list(layers))
    size = head_grid(batch_shape(batch)[-2:], stride)
    return np.concatenate([resample(maps[name], size) for name in layers], axis=1)


@dataclass
class MapSet:
    """Per-image ``(C, h, w)`` float32 maps (None where the image failed), in input order."""

    maps: list[np.ndarray | None]
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> np.ndarray:
        return np.array([item is not None for item in self.maps], dtype=bool)

    def stacked(self) -> np.ndarray:
        """``(n, C, h, w)`` when every image gave a map of one size."""
        return np.stack([item for item in self.maps if item is not None])


def _layer_key(backbone: Backbone, prep: Preprocessing, layer: str, stride: int = HEAD_STRIDE) -> tuple[str, dict]:
    settings = extraction_settings(backbone, prep, None, False) | {"output": f"map:{layer}:stride{stride}"}
    return settings_key(settings), settings


def extract_maps(
    paths: Sequence[str | os.PathLike[str]],
    backbone: Backbone,
    prep: Preprocessing,
    layers: Sequence[str],
    cache: FeatureCache | None = None,
    batch_size: int = 8,
    progress: bool = False,
    on_error: str = "raise",
    console: Console | None = None,
    stride: int = HEAD_STRIDE,
) -> MapSet:
    """Head-grid maps of ``layers`` for image files, one trunk pass per uncached image.

    ``stride``: input pixels per grid cell (16 for the closed-form heads, 8 for the conv head).
    """
    layers = list(layers)
    path_list = [str(path) for path in paths]
    per_layer: list[dict[int, np.ndarray]] = [{} for _ in layers]
    hashes: list[str | None] = [None] * len(path_list)
    keys = [_layer_key(backbone, prep, layer, stride) for layer in layers]
    if cache is not None and path_list:
        hashes = [cache.content_hash(path) for path in path_list]
        by_shape: dict[tuple[int, int], list[int]] = defaultdict(list)
        for index, path in enumerate(path_list):
            try:
                height, width = image_size(path)
            except Exception:  # noqa: BLE001 - the decoder reports it when the image is prepared
                continue
            target_width, target_height = prep.target_size(width, height)
            by_shape[head_grid((target_height, target_width), stride)].append(index)
        for position, (key, _settings) in enumerate(keys):
            channels = layer_channels(backbone, layer=layers[position])
            for size, indices in by_shape.items():
                wanted = [hashes[i] for i in indices if hashes[i] is not None]
                stored = cache.get_many(key, wanted, (channels, *size))
                for index in indices:
                    if hashes[index] in stored:
                        per_layer[position][index] = stored[hashes[index]]
    done = [all(index in found for found in per_layer) for index in range(len(path_list))]
    todo = [index for index, complete in enumerate(done) if not complete]
    errors: dict[str, str] = {}
    console = console if console is not None else Console(stderr=True)
    with _progress_bar(console, progress and on_terminal(console) and bool(path_list)) as bar:
        task = (
            bar.add_task(f"{backbone.name} maps", total=len(path_list), completed=len(path_list) - len(todo))
            if bar
            else None
        )
        for batch_indices, tensors, failures in _prepared_batches(
            todo,
            path_list,
            backbone,
            prep,
            batch_size,
            None,
            on_error,  # type: ignore[arg-type]
        ):
            for index, message in failures:
                errors[path_list[index]] = message
            for indices, batch in group_by_shape(batch_indices, tensors, backbone.runtime):
                maps = backbone.feature_maps(batch, layers)
                size = head_grid(batch_shape(batch)[-2:], stride)
                for position, layer in enumerate(layers):
                    grid_maps = resample(maps[layer], size)
                    for row, index in enumerate(indices):
                        per_layer[position][index] = grid_maps[row]
                        if cache is not None and hashes[index] is not None:
                            key, settings = keys[position]
                            cache.describe(key, settings)
                            cache.put(key, hashes[index], grid_maps[row])
            if bar is not None and task is not None:
                bar.advance(task, len(batch_indices) + len(failures))
    if cache is not None:
        cache.flush()
    result: list[np.ndarray | None] = []
    for index in range(len(path_list)):
        if all(index in found for found in per_layer):
            # Popped: each layer's copy is dropped once joined, so the maps are not held twice.
            result.append(np.concatenate([found.pop(index) for found in per_layer], axis=0))
        else:
            result.append(None)
    return MapSet(maps=result, errors=errors)


_CHANNELS: dict[tuple[str, str], int] = {}


def layer_channels(backbone: Backbone, layer: str) -> int:
    """Channels of one layer's map (one tiny pass per backbone and layer, remembered)."""
    key = (backbone.weights_sha256, layer)
    if key not in _CHANNELS:
        # Eager torch on a tiny input: asking the runtime would export a network for this one layer.
        modules = {} if layer == FINAL else {layer: backbone.tap_module(layer)}
        with torch.inference_mode():
            (output,) = OutputTaps(backbone.trunk, modules, [layer])(torch.zeros((1, 3, 32, 32)))
        _CHANNELS[key] = int(output.shape[1])
    return _CHANNELS[key]
