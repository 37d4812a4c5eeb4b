"""Training the crowd network: resumable, on the CPU or a GPU.

One run is fixed by its :class:`NetworkSettings`; its state lives in a checkpoint file written
every ``checkpoint_every`` steps (atomically: a run killed while writing keeps the last one). A
run started again with the same settings and checkpoint goes on from the checkpoint's step and
gives the same weights as an unbroken run on the same device (the crops of step ``s`` are drawn
from ``[seed, s]``; the optimiser's and the weight average's state are in the checkpoint).

Checkpoints are torch files read back with ``weights_only=True`` (tensors, numbers, strings and
containers of them: nothing a tampered file could run); the trained network itself is written as
an ``.npz`` of arrays (:func:`save_network`).

The optimiser is AdamW, a linear warm-up and a cosine decay over ``steps``; what is kept is an
exponential moving average of the weights (``ema``), which counts better than the last weights of
a short run; validation figures are the average's.
"""

from __future__ import annotations

import json
import math
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from counting.core.files import atomic_write
from counting.data.datasets.base import Sample
from counting.heads.density.network.module import NETWORK_STRIDE, CrowdNetwork, normalise
from counting.train.network.crops import TrainingPictures
from counting.train.network.degrade import DegradeShares
from counting.train.network.loss import bayesian_loss, density_loss, padded_points
from counting.train.network.validation import validation_figures

__all__ = ["NetworkSettings", "checkpoint_state", "load_network", "save_network", "train_network"]

FORMAT = "counting-crowd-network"
CALIBRATION_KEY = 2**31  # the crops' draw key: far above any step number
CALIBRATION_CROPS = 16


@dataclass(frozen=True)
class NetworkSettings:
    """How a crowd network is trained (module docstring)."""

    steps: int = 12000
    batch: int = 8
    crop: int = 256
    scale_range: tuple[float, float] = (0.7, 1.3)
    shares: dict[str, float] = field(
        default_factory=lambda: {"shanghaitech-A": 0.3, "shanghaitech-B": 0.3, "mall": 0.15, "coco-voc20": 0.25}
    )
    degrade_photo: float = 0.35
    degrade_video: float = 0.1
    degrade_gray: float = 0.1
    # The decoder's rate; the trunk's blocks take trunk_rate_factor of it (1e-4: one batch of 8
    # ShanghaiTech B crops was fitted in 60 steps at 1e-4 for both).
    learning_rate: float = 3e-4
    trunk_rate_factor: float = 1 / 3
    weight_decay: float = 1e-4
    warmup: int = 200
    ema: float = 0.999
    width: int = 64
    depth: int = 3
    seed: int = 0
    loss: str = "density"  # or "bayesian" (counting.train.network.loss says why not by default)
    # "bfloat16": the forward pass under torch's autocast (weights, optimiser and loss stay
    # float32). 1.55x faster steps on a Zen 4 EPYC with AVX-512 BF16 (0.26 -> 0.17 s per step of
    # 8 crops of 256); far slower on a CPU without bf16 instructions, hence not the default. The
    # count itself always runs float32.
    precision: str = "float32"
    # A network file (save_network) to start from instead of the ImageNet weights and a fresh
    # decoder: a run that goes on from a finished one, with its own rate schedule.
    init: str | None = None

    def __post_init__(self) -> None:
        if self.loss not in ("density", "bayesian"):
            raise ValueError(f"loss must be 'density' or 'bayesian', got {self.loss!r}")
        for name in ("steps", "batch", "width", "depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.crop < 4 * NETWORK_STRIDE or self.crop % NETWORK_STRIDE:
            raise ValueError(
                f"crop must be a multiple of {NETWORK_STRIDE} of at least {4 * NETWORK_STRIDE}, got {self.crop}"
            )
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ValueError(f"learning rate must be a positive number, got {self.learning_rate}")
        if self.precision not in ("float32", "bfloat16"):
            raise ValueError(f"precision must be 'float32' or 'bfloat16', got {self.precision!r}")

    def degrade_shares(self) -> DegradeShares:
        return DegradeShares(self.degrade_photo, self.degrade_video, self.degrade_gray)

    def record(self) -> dict[str, Any]:
        record = asdict(self)
        record["scale_range"] = list(self.scale_range)
        return record


@dataclass
class TrainState:
    network: CrowdNetwork
    average: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer
    step: int = 0
    history: list[dict[str, float]] = field(default_factory=list)


def train_network(
    settings: NetworkSettings,
    pictures: TrainingPictures,
    validation: dict[str, Sequence[Sample]],
    checkpoint: Path,
    device: str = "auto",
    eval_every: int = 1000,
    checkpoint_every: int = 200,
    stop_after: float | None = None,
    log: Callable[[str], None] = print,
) -> TrainState:
    """Train (or go on training from ``checkpoint``) until ``settings.steps``, or until
    ``stop_after`` seconds have passed (then the checkpoint is written and the run can be resumed).
    ``validation`` parts are counted every ``eval_every`` steps and at the end (figures in the
    history beside the mean training loss since the last evaluation)."""
    where = torch.device(
        "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)
    )
    state = _new_state(settings, where, pictures)
    if checkpoint.is_file():
        _restore(state, checkpoint, settings, where)
        log(f"resumed {checkpoint} at step {state.step} of {settings.steps}")
    started = time.monotonic()
    losses: list[float] = []
    step_seconds = 0.0
    shares = settings.degrade_shares()
    while state.step < settings.steps:
        tick = time.monotonic()
        rng = np.random.default_rng([settings.seed, state.step])
        crops = pictures.draw(rng, settings.batch, settings.crop, settings.scale_range, shares)
        losses.append(_step(state, settings, crops.pixels, crops.points, where))
        step_seconds += time.monotonic() - tick
        state.step += 1
        finished = state.step == settings.steps
        out_of_time = stop_after is not None and time.monotonic() - started > stop_after
        if state.step % eval_every == 0 or finished:
            state.history.append(_evaluate(state, validation, where, losses))
            state.history[-1]["seconds per step"] = step_seconds / max(1, len(losses))
            losses, step_seconds = [], 0.0
            log(_describe(state.history[-1]))
        if state.step % checkpoint_every == 0 or finished or out_of_time:
            _write_checkpoint(state, settings, checkpoint)
        if out_of_time and not finished:
            log(f"stopped at step {state.step} after {stop_after:.0f} s; run again to resume from {checkpoint}")
            break
    return state


def checkpoint_state(settings: NetworkSettings, checkpoint: Path, device: str = "cpu") -> TrainState:
    """The state a checkpoint holds (to save a stopped run's network and look at it)."""
    if not checkpoint.is_file():
        raise ValueError(f"{checkpoint}: no checkpoint there")
    where = torch.device(device)
    state = _new_state(settings, where, None)  # the checkpoint holds the calibration
    _restore(state, checkpoint, settings, where)
    return state


def _new_state(settings: NetworkSettings, where: torch.device, pictures: TrainingPictures | None) -> TrainState:
    torch.manual_seed(settings.seed)
    network = CrowdNetwork(width=settings.width, depth=settings.depth).to(where)
    network = network.to(memory_format=torch.channels_last)
    if settings.init is not None:
        start, _ = load_network(Path(settings.init))
        network.load_trained_arrays({name: value.to(where) for name, value in start.trained_arrays().items()})
    elif pictures is not None:
        # The decoder's standardisation, from crops no step draws (a resumed run reads it back).
        _calibrate(network, settings, pictures, where)
    network.train()
    groups = [
        {"params": list(network.upper.parameters()), "lr": settings.learning_rate * settings.trunk_rate_factor},
        {"params": list(network.decoder.parameters()), "lr": settings.learning_rate},
    ]
    for group in groups:
        group["initial_lr"] = group["lr"]
    optimizer = torch.optim.AdamW(groups, weight_decay=settings.weight_decay)
    average = {name: value.detach().clone() for name, value in network.trained_arrays().items()}
    return TrainState(network, average, optimizer)


def _calibrate(
    network: CrowdNetwork, settings: NetworkSettings, pictures: TrainingPictures, where: torch.device
) -> None:
    crops = pictures.draw(
        np.random.default_rng([settings.seed, CALIBRATION_KEY]),
        CALIBRATION_CROPS,
        settings.crop,
        settings.scale_range,
        DegradeShares(0, 0, 0),
    )
    network.calibrate(normalise(torch.from_numpy(crops.pixels).to(where).permute(0, 3, 1, 2).float()))


def _rate(settings: NetworkSettings, step: int) -> float:
    if step < settings.warmup:
        return (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _step(
    state: TrainState, settings: NetworkSettings, pixels: np.ndarray, points: list[np.ndarray], where: torch.device
) -> float:
    for group in state.optimizer.param_groups:
        group["lr"] = group["initial_lr"] * _rate(settings, state.step)
    inputs = torch.from_numpy(pixels).to(where).permute(0, 3, 1, 2).float()
    inputs = normalise(inputs).contiguous(memory_format=torch.channels_last)
    padded, mask = padded_points([torch.from_numpy(item) for item in points])
    state.network.train()
    with torch.autocast(where.type, dtype=torch.bfloat16, enabled=settings.precision == "bfloat16"):
        density = state.network(inputs)
    density = density.float()
    if settings.loss == "bayesian":
        loss = bayesian_loss(density, padded.to(where), mask.to(where), NETWORK_STRIDE, float(settings.crop))
    else:
        loss = density_loss(density, padded.to(where), mask.to(where), NETWORK_STRIDE)
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    state.optimizer.step()
    with torch.no_grad():
        for name, value in state.network.trained_arrays().items():
            if value.dtype.is_floating_point:
                state.average[name].mul_(settings.ema).add_(value.detach(), alpha=1.0 - settings.ema)
            else:
                state.average[name].copy_(value)
    return float(loss.detach())


def averaged_network(state: TrainState) -> CrowdNetwork:
    """A copy of the network holding the weight average (what is evaluated and saved)."""
    network = CrowdNetwork(width=state.network.width, depth=state.network.depth, pretrained=False)
    network.load_state_dict(state.network.state_dict())
    network.load_trained_arrays(state.average)
    return network.to(next(state.network.parameters()).device).eval()


def _evaluate(
    state: TrainState, validation: dict[str, Sequence[Sample]], where: torch.device, losses: list[float]
) -> dict[str, float]:
    started = time.monotonic()
    figures = validation_figures(averaged_network(state), validation, where) if validation else {}
    return {
        "step": float(state.step),
        "loss": float(np.mean(losses)) if losses else float("nan"),
        **figures,
        "validation seconds": time.monotonic() - started,
        "time": time.time(),
    }


def _describe(row: dict[str, float]) -> str:
    figures = ", ".join(f"{key} {value:.2f}" for key, value in row.items() if key.endswith("MAE"))
    return f"step {int(row['step'])}: loss {row['loss']:.3f}" + (f"; {figures}" if figures else "")


def _write_checkpoint(state: TrainState, settings: NetworkSettings, path: Path) -> None:
    payload = {
        "format": FORMAT,
        "settings": json.dumps(settings.record(), sort_keys=True),
        "step": state.step,
        "network": {name: value.detach().cpu() for name, value in state.network.trained_arrays().items()},
        "average": {name: value.cpu() for name, value in state.average.items()},
        "optimizer": state.optimizer.state_dict(),
        "history": json.dumps(state.history),
    }
    try:
        with atomic_write(path, "wb") as file:  # Ctrl-C or a failure leaves the last one
            torch.save(payload, file)
    except RuntimeError as error:  # a full disk reaches torch's zip writer as RuntimeError, not OSError
        raise OSError(f"{path}: checkpoint not written ({error}); the one before it, if any, is kept") from None


def _restore(state: TrainState, path: Path, settings: NetworkSettings, where: torch.device) -> None:
    try:
        payload = torch.load(path, map_location=where, weights_only=True)
    except Exception as error:  # a torch file of any kind of damage: say which file
        raise ValueError(f"{path}: not a readable checkpoint ({type(error).__name__}: {error})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not a crowd network checkpoint")
    # A setting added since the checkpoint was written reads as its default (what that run used).
    recorded = {**NetworkSettings().record(), **json.loads(payload["settings"])}
    if recorded != settings.record():
        changed = sorted(
            key for key in recorded.keys() | settings.record().keys() if recorded.get(key) != settings.record().get(key)
        )
        raise ValueError(
            f"{path}: a checkpoint of other settings ({', '.join(changed)} differ); remove it or use its settings"
        )
    state.network.load_trained_arrays({name: value.to(where) for name, value in payload["network"].items()})
    state.average = {name: value.to(where) for name, value in payload["average"].items()}
    state.optimizer.load_state_dict(payload["optimizer"])
    state.step = int(payload["step"])
    state.history = json.loads(payload["history"])


def save_network(state: TrainState, settings: NetworkSettings, path: Path) -> None:
    """The weight average as an ``.npz`` of float32 arrays under their torch names, with the
    settings and history as JSON strings."""
    arrays = {f"network/{name}": value.detach().cpu().numpy() for name, value in state.average.items()}
    arrays["settings"] = np.array(json.dumps(settings.record(), sort_keys=True))
    arrays["history"] = np.array(json.dumps(state.history))
    arrays["format"] = np.array(FORMAT)
    arrays["step"] = np.array(state.step)
    with atomic_write(path, "wb") as file:  # a file object: savez adds no ".npz" to it
        np.savez(file, **arrays)


def load_network(path: Path) -> tuple[CrowdNetwork, dict[str, Any]]:
    """A network saved by :func:`save_network`, and its settings; ``ValueError`` naming the file
    when it is missing, damaged or not a network file."""
    if not path.is_file():
        raise ValueError(f"{path}: network file not found")
    if not zipfile.is_zipfile(path):  # np.load would read other bytes as a pickle and say so
        raise ValueError(f"{path}: not a crowd network file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as file:
            if "format" not in file or str(file["format"]) != FORMAT:
                raise ValueError(f"{path}: not a crowd network file")
            settings = json.loads(str(file["settings"]))
            arrays = {
                name.removeprefix("network/"): torch.from_numpy(file[name])
                for name in file.files
                if name.startswith("network/")
            }
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: its settings are not a record")
        network = CrowdNetwork(width=int(settings["width"]), depth=int(settings["depth"]))
        network.load_trained_arrays(arrays)
    except ValueError as error:
        raise ValueError(str(error) if str(error).startswith(str(path)) else f"{path}: {error}") from None
    except Exception as error:  # a damaged zip or array of any kind: say which file
        raise ValueError(f"{path}: not a readable crowd network file ({type(error).__name__}: {error})") from None
    for name, value in network.trained_arrays().items():
        if value.dtype.is_floating_point and not bool(torch.isfinite(value).all()):
            raise ValueError(f"{path}: array {name} holds values that are not finite")
    return network.eval(), settings
