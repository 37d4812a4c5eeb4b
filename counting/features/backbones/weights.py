"""Finding, verifying and loading backbone weight files."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from counting.core.errors import BackboneError

__all__ = [
    "RESNET50_HUB_FILES",
    "RESNET50_URL",
    "file_sha256",
    "hub_checkpoint_dir",
    "load_checkpoint",
    "resolve_resnet50_weights",
]

# torchvision's own URL and file names (ResNet50_Weights.IMAGENET1K_V1 / _V2): using them means
# a checkpoint torchvision already downloaded into the hub cache is found and reused.
RESNET50_URL = "https://download.pytorch.org/models/resnet50-0676ba61.pth"
RESNET50_HUB_FILES = ("resnet50-0676ba61.pth", "resnet50-11ad3fa6.pth")

# torch.hub's convention: the file name carries the first hex digits of its sha256.
_HASH_IN_NAME = re.compile(r"-([a-f0-9]*)\.")

_sha_memo: dict[tuple[str, int, int], str] = {}
_sha_lock = threading.Lock()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, remembered per (path, size, mtime) within the process."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _sha_lock:
        known = _sha_memo.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    with _sha_lock:
        _sha_memo[key] = value
    return value


def hub_checkpoint_dir() -> Path:
    """Where torch (and torchvision) keep downloaded checkpoints: ``torch.hub.get_dir()/checkpoints``."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def resolve_resnet50_weights(
    weights: str | os.PathLike[str] | None = None,
    *,
    url: str = RESNET50_URL,
    hub_dir: Path | None = None,
    allow_download: bool = True,
    progress: bool = False,
) -> Path:
    """Find ResNet-50 weights: explicit file, then torch's hub cache, then a verified download.

    Raises :class:`BackboneError` with a one-line message saying how to provide the file when
    none of these works (e.g. offline without a cached copy).
    """
    if weights is not None:
        explicit = Path(weights).expanduser()
        if not explicit.is_file():
            raise BackboneError(f"{explicit}: weights file not found")
        return explicit
    checkpoints = hub_dir if hub_dir is not None else hub_checkpoint_dir()
    for name in RESNET50_HUB_FILES:
        if (checkpoints / name).is_file():
            return checkpoints / name
    file_name = url.rsplit("/", 1)[-1]
    how_to = (
        f"pass --weights FILE with torchvision's ImageNet ResNet-50 checkpoint ({RESNET50_HUB_FILES[0]}) "
        f"or copy it into {checkpoints}/"
    )
    if not allow_download:
        raise BackboneError(f"resnet50: no weights found and downloading is off; {how_to}")
    match = _HASH_IN_NAME.search(file_name)
    destination = checkpoints / file_name
    try:
        checkpoints.mkdir(parents=True, exist_ok=True)
        # download_url_to_file writes to a temporary file, checks the sha256 prefix and only
        # then moves it into place, so a failed or forged download never lands in the cache.
        torch.hub.download_url_to_file(
            url, str(destination), hash_prefix=match.group(1) if match else None, progress=progress
        )
    except RuntimeError as exc:  # raised by torch.hub for a hash mismatch
        raise BackboneError(f"{url}: downloaded file failed its hash check ({_one_line(exc)}); {how_to}") from None
    except OSError as exc:  # URLError, HTTPError, socket errors, unwritable cache folder
        raise BackboneError(f"{url}: cannot download resnet50 weights ({_one_line(exc)}); {how_to}") from None
    return destination


def load_checkpoint(path: Path, model: nn.Module, backbone_name: str) -> None:
    """Load a state dict file into ``model``; any mismatch is a one-line ``BackboneError``."""
    try:
        # weights_only: a checkpoint is data, never code to execute.
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise BackboneError(f"{path}: not a readable PyTorch checkpoint ({_one_line(exc)})") from None
    state = _unwrap_state_dict(loaded)
    if state is None:
        raise BackboneError(f"{path}: not a {backbone_name} checkpoint (no state dict inside)")
    expected = model.state_dict()
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    if missing or unexpected:
        detail = f"{len(missing)} missing keys (e.g. {missing[:3]})" if missing else ""
        if unexpected:
            detail += ("; " if detail else "") + f"{len(unexpected)} unexpected keys (e.g. {unexpected[:3]})"
        raise BackboneError(f"{path}: not a {backbone_name} checkpoint: {detail}")
    wrong_shapes = [
        f"{key} {tuple(state[key].shape)} != {tuple(value.shape)}"
        for key, value in expected.items()
        if tuple(state[key].shape) != tuple(value.shape)
    ]
    if wrong_shapes:
        raise BackboneError(f"{path}: not a {backbone_name} checkpoint: wrong shapes ({wrong_shapes[0]})")
    model.load_state_dict(state, strict=True)


def _unwrap_state_dict(loaded: object) -> Mapping[str, torch.Tensor] | None:
    """Plain state dicts, or the common ``{"state_dict": ...}`` / ``{"model": ...}`` wrappers."""
    if isinstance(loaded, Mapping) and loaded and all(isinstance(v, torch.Tensor) for v in loaded.values()):
        state = dict(loaded)
        if all(key.startswith("module.") for key in state):  # saved from DataParallel
            state = {key[len("module.") :]: value for key, value in state.items()}
        return state
    if isinstance(loaded, Mapping):
        for wrapper in ("state_dict", "model"):
            if wrapper in loaded:
                return _unwrap_state_dict(loaded[wrapper])
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
