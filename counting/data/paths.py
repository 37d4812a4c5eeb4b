"""Images named on a command line: files, folders (their images) and glob patterns -> paths."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from counting.core.errors import ImageError
from counting.core.files import unique_files

IMAGE_SUFFIXES: tuple[str, ...] = (
    ".jpg",
    ".jpeg",
    ".png",
    ".bmp",
    ".tif",
    ".tiff",
    ".webp",
    ".gif",
    ".ppm",
    ".pgm",
)


def expand_image_paths(patterns: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Image files from paths, folders (non-recursive, sorted) and globs, in the order given.

    Returns ``(files, problems)``: a pattern that matches nothing is a problem the caller reports
    (or treats as fatal), not a crash. Raises :class:`ImageError` when nothing at all is found.
    """
    files: list[Path] = []
    problems: list[str] = []
    for pattern in patterns:
        path = Path(pattern).expanduser()
        try:
            files += _images_of(pattern, path, problems)
        except OSError as error:  # a name over the system's limits, a folder we may not list
            problems.append(f"{path}: cannot be read ({error.strerror or error})")
    if not files:
        raise ImageError(problems[0] if len(problems) == 1 else f"{', '.join(patterns)}: no images found")
    return unique_files(files), problems


def _images_of(pattern: str, path: Path, problems: list[str]) -> list[Path]:
    """The image files one command-line ``pattern`` names; what it finds wrong goes to ``problems``."""
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not found:
            problems.append(f"{path}: folder holds no images ({', '.join(IMAGE_SUFFIXES[:4])}, …)")
        return found
    if path.exists():  # files, and devices/FIFOs that the image reader refuses by name
        return [path]
    if glob.has_magic(pattern):
        matches = glob.glob(os.path.expanduser(pattern), recursive=True)
        found = sorted(Path(match) for match in matches if Path(match).is_file())
        if not found:
            problems.append(f"{pattern}: no files match")
        return found
    problems.append(f"{path}: no such file or folder")
    return []
