"""Training a ConvDensityHead with torch on cached, frozen feature maps.

Loss: squared error per stride-8 cell against the dot density (inside the ROI), plus
``count_weight`` times the squared error of each crop's count (divided by its cells, so both
terms have the same scale when cell errors are independent). Adam on random crops with
horizontal flips; every ``eval_every`` steps the whole images of the validation part are
counted, and the weights with the lowest validation count MAE are kept (early stopping after
``patience`` evaluations without a gain), or, with ``keep="last"``, the weights of the last step
(the validation part then only measures the head). ``ema`` evaluates and keeps an exponential
moving average of the weights instead of the last Adam iterate. The validation part must lie
inside the train range.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from counting.heads.density.conv.head import CONV_STRIDE, ConvDensityHead, build_network
from counting.heads.density.map_store import MapStore, maps_in_chunks
from counting.heads.density.maps import extract_maps, head_grid, resample
from counting.heads.density.regions import region_weights, roi_weights
from counting.heads.density.ridge.fitting import channel_statistics

__all__ = [
    "ConvFit",
    "ConvSettings",
    "fit_conv_head",
    "fit_conv_heads",
    "native_stride",
    "sampled_statistics",
    "stride8_maps",
]


@dataclass(frozen=True)
class ConvSettings:
    """How a conv head is built and trained (the defaults are the validated choice)."""

    width: int = 32
    depth: int = 3
    count_weight: float = 0.0
    crop: int = 32  # cells per side of a training crop (256 input pixels at stride 8)
    batch: int = 8
    learning_rate: float = 1e-3
    max_steps: int = 1500
    eval_every: int = 150
    patience: int = 4
    output_scale: float = 100.0
    seed: int = 0
    # "constant" learning rate, or "cosine": decayed to 0 at max_steps (evaluations then run to the end).
    schedule: str = "constant"
    # Exponential moving average of the weights (decay per step; 0: off). The validation count of
    # single Adam iterates jumps by +-1 person between evaluations on Mall; the average does not.
    ema: float = 0.0
    # Which weights are kept: "best" (lowest validation count MAE: early stopping) or "last" (the
    # weights at max_steps: the validation part is then only measured, so it may also score the head).
    keep: str = "best"
    # Heads trained by `train` (conv_training): 1, or K folds of the train images, each head
    # validated on one fold and trained on the rest, their densities averaged (an ensemble).
    folds: int = 1
    # Share of the training crops drawn from grayscale copies of the train pictures (0: none).
    # Each copy is drawn with its picture's chance times gray_share / (1 - gray_share), is never
    # validated on, and is left out of the head validated on its picture (no leak).
    gray_share: float = 0.0
    # Share drawn from degraded copies (counting.data.copies.degraded_pixels: blurred or smaller,
    # saved again), as gray_share; the two shares together stay under 1.
    degraded_share: float = 0.0
    # Fit a people mask (counting.heads.crowd.people_mask) on the heads' pictures and their
    # copies, and multiply their density by it: each head's out-of-fold sums then by a mask fitted
    # without its fold too.
    people_mask: bool = False

    def __post_init__(self) -> None:
        for name in ("gray_share", "degraded_share"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.gray_share + self.degraded_share >= 1.0:
            raise ValueError(
                f"gray_share + degraded_share must be under 1 (the pictures themselves keep the rest), "
                f"got {self.gray_share} + {self.degraded_share}"
            )

    def record(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class ConvFit:
    """A trained head and what training it measured."""

    head: ConvDensityHead
    validation_sums: np.ndarray  # (n_validation, 1 + cells) region sums by the kept weights
    best_step: int
    history: list[tuple[int, float]] = field(default_factory=list)  # (step, validation count MAE)
    seconds: float = 0.0


_STRIDES: dict[tuple[str, str], int] = {}


def native_stride(backbone, layer: str) -> int:
    """Input pixels per cell of a layer's own map (one tiny eager pass, remembered)."""
    key = (backbone.weights_sha256, layer)
    if key not in _STRIDES:
        from counting.features.backbones.base import OutputTaps

        with torch.inference_mode():
            (output,) = OutputTaps(backbone.trunk, {layer: backbone.tap_module(layer)}, [layer])(
                torch.zeros((1, 3, 64, 64))
            )
        _STRIDES[key] = 64 // int(output.shape[-1])
    return _STRIDES[key]


def stride8_maps(
    paths: Sequence[str],
    backbone,
    prep,
    layers: Sequence[str],
    cache=None,
    batch_size: int = 8,
    progress: bool = False,
    dtype: type = np.float16,
) -> MapStore:
    """Training maps on the stride-8 grid: each layer cached at its own stride (max(8, native)),
    then upsampled as :func:`counting.heads.density.maps.resample` does (the values inference sees).

    The maps go to a :class:`~counting.heads.density.map_store.MapStore` as they are made,
    ``map_store.MAP_CHUNK`` pictures at a time, and are read back a crop at a time, so memory
    stays flat in the number of pictures (close it, or use it in a ``with``, when done).
    ``dtype`` float16 halves the size of a training set (standardised channels lose nothing
    that matters at 1e-3 relative precision).
    """
    groups: dict[int, list[str]] = {}
    for layer in layers:
        groups.setdefault(max(CONV_STRIDE, native_stride(backbone, layer)), []).append(layer)

    def make(chunk: list[str], show: bool) -> list[np.ndarray]:
        return _stride8_chunk(chunk, backbone, prep, layers, groups, cache, batch_size, show)

    return maps_in_chunks(list(paths), make, dtype=dtype, progress=progress, label=f"{backbone.name} maps")


def _stride8_chunk(
    paths: Sequence[str],
    backbone,
    prep,
    layers: Sequence[str],
    groups: dict[int, list[str]],
    cache,
    batch_size: int,
    progress: bool,
) -> list[np.ndarray]:
    per_group = {
        stride: extract_maps(
            paths, backbone, prep, names, cache=cache, batch_size=batch_size, progress=progress, stride=stride
        )
        for stride, names in groups.items()
    }
    for found in per_group.values():
        if found.errors:
            path, message = next(iter(found.errors.items()))
            raise ValueError(message if path in message else f"{path}: {message}")
    result = []
    for index in range(len(paths)):
        fine = per_group[CONV_STRIDE].maps[index] if CONV_STRIDE in per_group else None
        size = fine.shape[1:] if fine is not None else None
        parts: dict[str, np.ndarray] = {}
        for stride, names in groups.items():
            item = per_group[stride].maps[index]
            assert item is not None
            per_group[stride].maps[index] = None  # dropped once joined: not held twice
            if size is None:
                size = tuple(side * stride // CONV_STRIDE for side in item.shape[1:])
            on_grid = resample(item[None], size)[0] if stride != CONV_STRIDE else item
            offset = 0
            for name in names:
                channels = _channels_of(backbone, name)
                parts[name] = on_grid[offset : offset + channels]
                offset += channels
        result.append(np.concatenate([parts[name] for name in layers], axis=0))
    return result


def _channels_of(backbone, layer: str) -> int:
    from counting.heads.density.maps import layer_channels

    return layer_channels(backbone, layer)


def _crop_batch(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    weights: Sequence[np.ndarray],
    choice: np.ndarray,
    crop: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random ``crop`` x ``crop`` windows (whole sides where smaller), half of them flipped.

    The map windows keep the maps' own type (float16 from the map store): widening the batch to
    float32 in torch afterwards gives the same numbers as numpy's cast during the copy, at a third
    of the time (numpy's float16 cast of a flipped window was a fifth of a crowd head's step)."""
    rows = min(crop, min(maps[i].shape[1] for i in choice))
    cols = min(crop, min(maps[i].shape[2] for i in choice))
    stored = np.result_type(*(maps[i].dtype for i in choice))
    x = np.empty((len(choice), maps[choice[0]].shape[0], rows, cols), stored)
    y = np.empty((len(choice), rows, cols), np.float32)
    w = np.empty((len(choice), rows, cols), np.float32)
    for slot, index in enumerate(choice):
        height, width = maps[index].shape[1:]
        top = rng.integers(0, height - rows + 1)
        left = rng.integers(0, width - cols + 1)
        window = (slice(top, top + rows), slice(left, left + cols))
        step = -1 if rng.random() < 0.5 else 1
        x[slot] = maps[index][(slice(None), *window)][..., ::step]
        y[slot] = targets[index][window][..., ::step]
        w[slot] = weights[index][window][..., ::step]
    return x, y, w


@dataclass(frozen=True)
class _Parts:
    """The images a head trains on and the ones it is validated on (indices into the maps), and
    each trained image's chance to be drawn for a crop (None: uniform)."""

    fit: np.ndarray
    validation: np.ndarray
    draw: np.ndarray | None


def _parts(validation: np.ndarray, unused: np.ndarray | None, sample_weights: np.ndarray | None) -> _Parts:
    """:class:`_Parts` from ``fit_conv_head``'s masks; one clear error where either part is empty."""
    validation = np.asarray(validation, dtype=bool)
    skipped = np.zeros_like(validation) if unused is None else np.asarray(unused, dtype=bool)
    fit_part, val_part = np.flatnonzero(~validation & ~skipped), np.flatnonzero(validation)
    if not len(fit_part) or not len(val_part):
        raise ValueError("the conv head needs images both to fit on and to validate on")
    return _Parts(fit_part, val_part, _draw_chances(sample_weights, fit_part))


def _draw_chances(sample_weights: np.ndarray | None, fit_part: np.ndarray) -> np.ndarray | None:
    """The trained images' chances to be drawn (summing to 1), from every image's weight."""
    if sample_weights is None:
        return None
    chances = np.asarray(sample_weights, dtype=float)[fit_part]
    if chances.shape != fit_part.shape or not np.isfinite(chances).all() or (chances < 0).any() or chances.sum() <= 0:
        raise ValueError("sample_weights must be one finite, non-negative weight per image, not all zero")
    return chances / chances.sum()


def _check_training_settings(settings: ConvSettings) -> None:
    """Refuse a schedule, a choice of kept weights or a weight average the training does not know."""
    if settings.schedule not in ("constant", "cosine"):
        raise ValueError(f"schedule must be 'constant' or 'cosine', got {settings.schedule!r}")
    if settings.keep not in ("best", "last"):
        raise ValueError(f"keep must be 'best' or 'last', got {settings.keep!r}")
    if not 0.0 <= settings.ema < 1.0:
        raise ValueError(f"ema must be in [0, 1), got {settings.ema!r}")


@dataclass(frozen=True)
class _Standardisation:
    """The channels' ``(mean, scale)``, and the same as float32 tensors shaped to standardise a
    ``(N, C, h, w)`` batch (made once: every crop batch and every validation image uses them)."""

    mean: np.ndarray
    scale: np.ndarray
    shift: torch.Tensor
    inverse: torch.Tensor

    @classmethod
    def of(cls, statistics: tuple[np.ndarray, np.ndarray]) -> _Standardisation:
        mean, scale = statistics
        shift = torch.from_numpy(mean.astype(np.float32))[None, :, None, None]
        inverse = torch.from_numpy((1.0 / scale).astype(np.float32))[None, :, None, None]
        return cls(mean, scale, shift, inverse)

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        return (batch - self.shift) * self.inverse


@dataclass(frozen=True)
class _CropSource:
    """What the training crops are drawn from: every image's map, target density and ROI weights,
    and the trained images with their chances (:class:`_Parts`)."""

    maps: Sequence[np.ndarray]
    targets: Sequence[np.ndarray]
    roi: Sequence[np.ndarray]
    fit: np.ndarray
    draw: np.ndarray | None

    def batch(self, settings: ConvSettings, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(maps, targets, weights)`` of one batch of random crops (:func:`_crop_batch`)."""
        choice = rng.choice(self.fit, settings.batch, p=self.draw)
        return _crop_batch(self.maps, self.targets, self.roi, choice, settings.crop, rng)


@dataclass
class _Trainer:
    """The network, its Adam optimiser, the cosine schedule where ``settings.schedule`` asks for
    it and the running average of the weights where ``settings.ema`` does."""

    network: torch.nn.Module
    optimiser: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    averaged: torch.optim.swa_utils.AveragedModel | None

    @classmethod
    def build(cls, channels: int, settings: ConvSettings) -> _Trainer:
        network = build_network(channels, settings.width, settings.depth)
        optimiser = torch.optim.Adam(network.parameters(), lr=settings.learning_rate)
        averaged = (
            torch.optim.swa_utils.AveragedModel(
                network, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(settings.ema)
            )
            if settings.ema
            else None
        )
        cosine = settings.schedule == "cosine"
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, settings.max_steps) if cosine else None
        return cls(network, optimiser, scheduler, averaged)

    @property
    def evaluated(self) -> torch.nn.Module:
        """The weights that are evaluated and kept: the running average when there is one."""
        return self.averaged.module if self.averaged is not None else self.network

    def step(self, loss: torch.Tensor) -> None:
        """One Adam step on ``loss``, then the schedule's and the average's."""
        self.optimiser.zero_grad()
        loss.backward()
        self.optimiser.step()
        if self.scheduler is not None:
            self.scheduler.step()
        if self.averaged is not None:
            self.averaged.update_parameters(self.network)


def _crop_loss(
    network: torch.nn.Module,
    batch: tuple[np.ndarray, np.ndarray, np.ndarray],
    standardise: _Standardisation,
    settings: ConvSettings,
) -> torch.Tensor:
    """The module docstring's loss on one batch of crops: squared error per cell inside the ROI,
    plus ``count_weight`` times each crop's squared count error divided by its cells."""
    x, y, w = batch
    inputs = standardise(torch.from_numpy(x).float())
    target = torch.from_numpy(y) * settings.output_scale
    weight = torch.from_numpy(w)
    predicted = network(inputs)[:, 0]
    difference = (predicted - target) * weight
    loss = (difference**2).mean()
    if settings.count_weight:
        cells = difference.shape[1] * difference.shape[2]
        loss = loss + settings.count_weight * (difference.sum(dim=(1, 2)) ** 2).mean() / cells
    return loss


@dataclass(frozen=True)
class _Validation:
    """The validation images, their true counts, and how a head's region sums of them are made."""

    maps: Sequence[np.ndarray]
    indices: np.ndarray
    truth: np.ndarray
    standardise: _Standardisation
    roi_mask: np.ndarray | None
    grid: tuple[int, int] | None
    output_scale: float

    def sums(self, model: torch.nn.Module) -> np.ndarray:
        """``(n_validation, 1 + cells)`` region sums of the whole images by ``model``."""
        model.eval()
        sums = []
        with torch.inference_mode():
            for index in self.indices:
                x = self.standardise(torch.from_numpy(np.asarray(self.maps[index], dtype=np.float32))[None])
                density = model(x)[0, 0].double().numpy() / self.output_scale
                sums.append(region_weights(self.roi_mask, density.shape, self.grid) @ density.ravel())
        model.train()
        return np.stack(sums)

    def mae(self, model: torch.nn.Module) -> float:
        """``model``'s count MAE on the validation images."""
        return float(np.mean(np.abs(self.sums(model)[:, 0] - self.truth)))


@dataclass
class _KeptWeights:
    """The weights ``settings.keep`` keeps so far: the lowest validation MAE's ("best", with the
    evaluations waited since it for early stopping) or the last evaluated ("last": ``state`` None,
    the weights as they are)."""

    keep: str
    patience: int
    may_stop: bool  # early stopping; a cosine schedule runs to its end
    mae: float
    step: int
    state: dict | None
    waited: int = 0

    @classmethod
    def start(cls, model: torch.nn.Module, settings: ConvSettings) -> _KeptWeights:
        """The untrained weights, kept until an evaluation beats them."""
        may_stop = settings.schedule != "cosine"
        return cls(settings.keep, settings.patience, may_stop, np.inf, 0, copy.deepcopy(model.state_dict()))

    def record(self, step: int, mae: float, model: torch.nn.Module) -> bool:
        """Take the evaluation at ``step`` into account; True where the patience has run out."""
        if self.keep == "last":
            self.mae, self.step, self.state = mae, step, None
            return False
        if mae < self.mae:
            self.mae, self.step, self.state = mae, step, copy.deepcopy(model.state_dict())
            self.waited = 0
            return False
        self.waited += 1
        return self.waited >= self.patience and self.may_stop

    def restore(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` with the kept weights loaded into it."""
        if self.state is not None:
            model.load_state_dict(self.state)
        return model


def _train(
    trainer: _Trainer,
    crops: _CropSource,
    validation: _Validation,
    settings: ConvSettings,
    rng: np.random.Generator,
    log: Callable[[str], None] | None,
) -> tuple[_KeptWeights, list[tuple[int, float]]]:
    """Adam on random crops for ``settings.max_steps`` steps (fewer where early stopping ends it),
    the evaluated weights counted every ``eval_every`` steps and at the last: the weights kept,
    and the ``(step, validation count MAE)`` of each evaluation."""
    kept = _KeptWeights.start(trainer.evaluated, settings)
    history: list[tuple[int, float]] = []
    trainer.network.train()
    for step in range(1, settings.max_steps + 1):
        loss = _crop_loss(trainer.network, crops.batch(settings, rng), validation.standardise, settings)
        trainer.step(loss)
        if step % settings.eval_every == 0 or step == settings.max_steps:
            mae = validation.mae(trainer.evaluated)
            history.append((step, mae))
            if log is not None:
                log(f"step {step}: loss {loss.item():.4f}, validation count MAE {mae:.3f}")
            if kept.record(step, mae, trainer.evaluated):
                break
    return kept, history


def _trained_head(
    network: torch.nn.Module,
    layers: Sequence[str],
    standardise: _Standardisation,
    settings: ConvSettings,
    kept: _KeptWeights,
) -> ConvDensityHead:
    """The head of the kept weights, with the settings it was trained by and what it measured."""
    return ConvDensityHead(
        layers=tuple(layers),
        width=settings.width,
        depth=settings.depth,
        x_mean=standardise.mean,
        x_scale=standardise.scale,
        weights=[parameter.detach().double().numpy().copy() for parameter in network.parameters()],
        output_scale=settings.output_scale,
        settings={"training": settings.record(), "best_step": kept.step, "validation_mae": kept.mae},
    )


def fit_conv_head(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    counts: np.ndarray,
    layers: Sequence[str],
    validation: np.ndarray,
    *,
    roi_mask: np.ndarray | None = None,
    grid: tuple[int, int] | None = None,
    settings: ConvSettings = ConvSettings(),
    log: Callable[[str], None] | None = None,
    statistics: tuple[np.ndarray, np.ndarray] | None = None,
    sample_weights: np.ndarray | None = None,
    unused: np.ndarray | None = None,
) -> ConvFit:
    """Train on the images where ``validation`` is False; keep the weights best on the others, or
    the last ones (``settings.keep``). Images where ``unused`` is True are neither trained nor
    validated on (augmented copies of the validation images).

    ``maps``: ``(C, h, w)`` stride-8 maps (float16 or float32); ``targets``: their ``(h, w)``
    densities; ``counts``: true counts (the validation MAE is measured against them).
    ``statistics``: the channels' ``(mean, scale)`` (default: measured on the fit part); the heads of
    an ensemble share one. ``sample_weights``: how often each image is drawn for a crop, relative
    to the others (default: uniform); the crowd model balances its sets with it.
    """
    parts = _parts(validation, unused, sample_weights)
    _check_training_settings(settings)
    start = time.perf_counter()
    # The seeds, then the network's initial weights, then the crops: the order of the random draws.
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    standardise = _Standardisation.of(statistics or sampled_statistics([maps[i] for i in parts.fit]))
    roi = [roi_weights(roi_mask, item.shape[1:]).astype(np.float32) for item in maps]
    trainer = _Trainer.build(maps[0].shape[0], settings)
    crops = _CropSource(maps, targets, roi, parts.fit, parts.draw)
    truth = np.asarray(counts, dtype=float)[parts.validation]
    check = _Validation(maps, parts.validation, truth, standardise, roi_mask, grid, settings.output_scale)
    kept, history = _train(trainer, crops, check, settings, rng, log)
    network = kept.restore(trainer.evaluated)
    return ConvFit(
        head=_trained_head(network, layers, standardise, settings, kept),
        validation_sums=check.sums(network),
        best_step=kept.step,
        history=history,
        seconds=time.perf_counter() - start,
    )


def sampled_statistics(maps: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Channel ``(mean, scale)`` over about 100 evenly spaced ``maps`` (enough for 232 channels)."""
    return channel_statistics(maps[:: max(1, len(maps) // 100)])


def fit_conv_heads(
    maps: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    counts: np.ndarray,
    layers: Sequence[str],
    parts: Sequence[np.ndarray],
    *,
    roi_mask: np.ndarray | None = None,
    grid: tuple[int, int] | None = None,
    settings: ConvSettings = ConvSettings(),
    log: Callable[[str], None] | None = None,
    sample_weights: np.ndarray | None = None,
    copy_of: np.ndarray | None = None,
) -> tuple[list[ConvFit], np.ndarray]:
    """One head per boolean mask of ``parts``, each validated on its part and trained on the
    other images (several heads share one standardisation, measured on every image: it uses no
    labels). Returns the fits and ``(n, 1 + cells)`` region sums: each validated image's by the
    head validated on it, NaN for images in no part.

    ``copy_of``: the maps past the ``n = len(parts[0])`` pictures are augmented copies (grayscale, degraded),
    ``copy_of[j]`` the picture map ``n + j`` is a copy of. A copy is trained on with its picture,
    never validated on, and left out of the head validated on its picture. ``sample_weights``
    then covers every map, copies included."""
    count = len(parts[0]) if len(parts) else len(maps)
    copies = np.zeros(0, dtype=int) if copy_of is None else np.asarray(copy_of, dtype=int)
    if count + len(copies) != len(maps) or (len(copies) and (copies.min() < 0 or copies.max() >= count)):
        raise ValueError(f"{len(maps)} maps are not {count} pictures and {len(copies)} copies of them")
    statistics = sampled_statistics([maps[index] for index in range(count)]) if len(parts) > 1 else None
    rows = np.full((count, 1 + (0 if grid is None else grid[0] * grid[1])), np.nan)
    fits: list[ConvFit] = []
    for number, part in enumerate(parts, start=1):
        part = np.asarray(part, dtype=bool)
        if log is not None:
            which = "" if len(parts) == 1 else f" {number} of {len(parts)}"
            extra = f" and {int((~part[copies]).sum())} copies" if len(copies) else ""
            log(
                f"training conv density head{which} ({settings.width} wide, {settings.depth} 3x3 convs) on "
                f"{', '.join(layers)} maps at stride 8: {int((~part).sum())} images{extra}, validated on {int(part.sum())}"
            )
        fit = fit_conv_head(
            maps,
            targets,
            counts,
            layers,
            np.concatenate([part, np.zeros(len(copies), dtype=bool)]),
            roi_mask=roi_mask,
            grid=grid,
            settings=settings,
            log=log,
            statistics=statistics,
            sample_weights=sample_weights,
            unused=np.concatenate([np.zeros(count, dtype=bool), part[copies]]),
        )
        rows[part] = fit.validation_sums
        fits.append(fit)
        if log is not None:
            which = "" if len(parts) == 1 else f" {number}"
            log(
                f"conv density head{which}: kept step {fit.best_step}, "
                f"validation count MAE {fit.head.settings['validation_mae']:.3f}"
            )
    return fits, rows


def grid_of(input_size: tuple[int, int]) -> tuple[int, int]:
    """``(h, w)`` of the conv head's grid for a network input of ``(height, width)`` pixels."""
    return head_grid(input_size, CONV_STRIDE)
