"""The TOML configuration of `counting serve`: server settings and cameras, checked at start-up.

```toml
[server]
host = "127.0.0.1"          # another address needs --token
port = 8000
database = "history.sqlite" # relative paths are relative to this file's folder
retention_hours = 168       # history older than this is deleted
model = "../models/mall-accurate.npz"   # POST /api/count (default: models/crowd.npz, as `counting count`)

[[camera]]
name = "entrance"
source = "videos/mall-a.avi"      # a video file (looped), a webcam index (0) or a URL
model = "../models/mall-accurate.npz"   # default: models/crowd.npz, as `counting count`
fps = 2.0                         # frames counted per second
zones = "zones.toml"              # a zones file, or inline: ["left:0,0,0.5,0,0.5,1,0,1"] or
                                  # [{ name = "left", points = [[0, 0], [320, 0], [320, 480], [0, 480]] }]
reconnect = { max_retries = 0, backoff = 1.0, max_backoff = 30.0 }   # 0: retry for ever
```

Every problem is one line naming the file and the key (``serve.toml: camera[1].fps: ...``).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from counting.core.errors import CountingError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_RETENTION_HOURS = 24.0 * 7
DEFAULT_FPS = 2.0
# Uploads to POST /api/count: a 12-megapixel phone photo is ~5 MB; more is refused before decoding.
DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_UPLOAD_PIXELS = 40_000_000
MAX_FPS = 30.0

_SERVER_KEYS = {"host", "port", "database", "retention_hours", "model", "max_upload_bytes", "max_upload_pixels"}
_CAMERA_KEYS = {"name", "source", "model", "fps", "zones", "reconnect"}
_RECONNECT_KEYS = {"max_retries", "backoff", "max_backoff"}


class ConfigError(CountingError, ValueError):
    """A serve configuration that cannot be used: one line naming the file and the key."""


@dataclass(frozen=True)
class ReconnectPolicy:
    """How a camera whose source fails is retried: delays ``backoff * 2**k`` up to
    ``max_backoff`` seconds; after ``max_retries`` failures in a row it is marked failed
    (0: retried for ever)."""

    max_retries: int = 0
    backoff: float = 1.0
    max_backoff: float = 30.0

    def delay(self, failures: int) -> float:
        return min(self.backoff * 2 ** max(failures - 1, 0), self.max_backoff)

    def gives_up(self, failures: int) -> bool:
        return self.max_retries > 0 and failures > self.max_retries


@dataclass(frozen=True)
class CameraConfig:
    name: str
    source: str  # a file path (resolved), a webcam index or a URL, as VideoSource.parse reads it
    model: Path | None  # None: the default model (models/crowd.npz, default_model_path)
    fps: float = DEFAULT_FPS
    zones_file: Path | None = None
    zones_inline: tuple[str | dict, ...] = ()  # NAME:x1,y1,... strings or {name, points, relative} tables
    reconnect: ReconnectPolicy = field(default_factory=ReconnectPolicy)


@dataclass(frozen=True)
class ServeConfig:
    path: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    database: Path = Path("history.sqlite")
    retention_hours: float = DEFAULT_RETENTION_HOURS
    model: Path | None = None  # of uploads without ?camera=; None: the default model, as for cameras
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_upload_pixels: int = DEFAULT_MAX_UPLOAD_PIXELS
    cameras: tuple[CameraConfig, ...] = ()


def load_config(path: str | Path) -> ServeConfig:
    """Read and check ``path``; ConfigError (one line: file, key, problem) on any problem."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a folder, not a config file") from None
    except (OSError, UnicodeError) as error:
        raise ConfigError(f"{source}: cannot read the config ({error})") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: not valid TOML ({error})") from None
    return parse_config(document, source)


def parse_config(document: dict[str, Any], source: Path) -> ServeConfig:
    """The checked configuration of a parsed TOML ``document`` read from ``source``."""
    check = _Checker(source)
    check.known(document, {"server", "camera"}, "")
    server = document.get("server", {})
    check.table(server, "server")
    check.known(server, _SERVER_KEYS, "server.")
    folder = source.resolve().parent
    host = check.string(server, "host", "server.", DEFAULT_HOST)
    port = check.integer(server, "port", "server.", DEFAULT_PORT, 0, 65535)
    database = folder / check.string(server, "database", "server.", "history.sqlite")
    retention = check.number(server, "retention_hours", "server.", DEFAULT_RETENTION_HOURS, minimum=0.0, above=True)
    model = check.optional_path(server, "model", "server.", folder)
    max_bytes = check.integer(server, "max_upload_bytes", "server.", DEFAULT_MAX_UPLOAD_BYTES, 1, 1 << 30)
    max_pixels = check.integer(server, "max_upload_pixels", "server.", DEFAULT_MAX_UPLOAD_PIXELS, 1, 1 << 31)

    cameras_table = document.get("camera", [])
    if not isinstance(cameras_table, list):
        check.fail("camera", "cameras are [[camera]] tables (an array of tables)")
    cameras: list[CameraConfig] = []
    for k, table in enumerate(cameras_table):
        cameras.append(_camera(check, table, k, folder))
    names = [camera.name for camera in cameras]
    for k, name in enumerate(names):
        if name in names[:k]:
            check.fail(f"camera[{k}].name", f"{name!r} names two cameras; names must be unique")
    return ServeConfig(
        path=source,
        host=host,
        port=port,
        database=database,
        retention_hours=retention,
        model=model,
        max_upload_bytes=max_bytes,
        max_upload_pixels=max_pixels,
        cameras=tuple(cameras),
    )


def _camera(check: _Checker, table: Any, k: int, folder: Path) -> CameraConfig:
    where = f"camera[{k}]."
    check.table(table, f"camera[{k}]")
    check.known(table, _CAMERA_KEYS, where)
    name = check.string(table, "name", where, None)
    if not name.strip() or len(name) > 64 or any(not (c.isalnum() or c in "-_. ") for c in name):
        check.fail(f"{where}name", f"{name!r}: use 1-64 letters, digits, spaces, '-', '_' or '.'")
    if "source" not in table:
        check.fail(f"{where}source", "missing: a video file, a webcam index or a URL")
    raw = table["source"]
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        check.fail(f"{where}source", "must be a string (file or URL) or a webcam index")
    text = str(raw).strip()
    if "\0" in text:
        check.fail(f"{where}source", "holds a NUL byte (\\u0000)")
    if isinstance(raw, int) or text.isdigit():
        source = text
    elif "://" in text:
        source = text
    else:
        file = folder / text
        if not file.is_file():
            check.fail(f"{where}source", f"{file}: video file not found")
        source = str(file)
    model = check.optional_path(table, "model", where, folder)
    fps = check.number(table, "fps", where, DEFAULT_FPS, minimum=0.0, above=True)
    if fps > MAX_FPS:
        check.fail(f"{where}fps", f"{fps} frames per second is more than the {MAX_FPS:g} a camera may be counted at")
    zones_file, zones_inline = None, ()
    zones = table.get("zones")
    if isinstance(zones, str):
        zones_file = folder / check.string(table, "zones", where, None)  # a NUL byte: one line, as for the others
        if not zones_file.is_file():
            check.fail(f"{where}zones", f"{zones_file}: zones file not found")
    elif isinstance(zones, list) and all(isinstance(item, (str, dict)) for item in zones):
        zones_inline = tuple(zones)
    elif zones is not None:
        check.fail(
            f"{where}zones", "a zones file name, or a list of NAME:x1,y1,x2,y2,... strings or {name, points} tables"
        )
    reconnect = table.get("reconnect", {})
    check.table(reconnect, f"{where}reconnect")
    check.known(reconnect, _RECONNECT_KEYS, f"{where}reconnect.")
    policy = ReconnectPolicy(
        max_retries=check.integer(reconnect, "max_retries", f"{where}reconnect.", 0, 0, 1_000_000),
        backoff=check.number(reconnect, "backoff", f"{where}reconnect.", 1.0, minimum=0.0, above=True),
        max_backoff=check.number(reconnect, "max_backoff", f"{where}reconnect.", 30.0, minimum=0.0, above=True),
    )
    return CameraConfig(name, source, model, fps, zones_file, zones_inline, policy)


class _Checker:
    """Typed reads of TOML values; each failure is a ConfigError naming the file and the key."""

    def __init__(self, source: Path) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> None:
        raise ConfigError(f"{self.source}: {key}: {problem}")

    def table(self, value: Any, key: str) -> None:
        if not isinstance(value, dict):
            self.fail(key, "must be a table")

    def known(self, table: dict, keys: set[str], where: str) -> None:
        for key in table:
            if key not in keys:
                self.fail(f"{where}{key}", f"unknown key (known: {', '.join(sorted(keys))})")

    def string(self, table: dict, key: str, where: str, default: str | None) -> str:
        if key not in table:
            if default is None:
                self.fail(f"{where}{key}", "missing")
            return default  # type: ignore[return-value]
        value = table[key]
        if not isinstance(value, str):
            self.fail(f"{where}{key}", f"must be a string, got {value!r}")
        if "\0" in value:  # a path, a host, a name: no system call takes one (ValueError: embedded null byte)
            self.fail(f"{where}{key}", "holds a NUL byte (\\u0000)")
        return value

    def integer(self, table: dict, key: str, where: str, default: int, low: int, high: int) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(f"{where}{key}", f"must be a whole number from {low} to {high}, got {value!r}")
        return value

    def number(self, table: dict, key: str, where: str, default: float, minimum: float, above: bool) -> float:
        value = table.get(key, default)
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
        if bad or value < minimum or (above and value == minimum):
            self.fail(f"{where}{key}", f"must be a number {'above' if above else 'from'} {minimum:g}, got {value!r}")
        return float(value)

    def optional_path(self, table: dict, key: str, where: str, folder: Path) -> Path | None:
        if key not in table:
            return None
        path = folder / self.string(table, key, where, None)
        if not path.is_file():
            self.fail(f"{where}{key}", f"{path}: file not found")
        return path
