"""Images named on a command line: files, folders (their images) and glob patterns -> paths,
and their counts in chunks of bounded size."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from counting.errors import ImageError
from counting.files import unique_files

# Images counted per call of CountingModel.count_paths: what a call holds grows with its images
# (descriptors, 4 KB an image, and the regressor's working copies of them, about 30 KB an
# image), so a run counts its images in chunks and keeps only the counts. 512 images cost
# about 20 MB; the pipeline drains once per chunk (one batch's decode, under 1 % of the time).
COUNT_CHUNK = 512

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
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                problems.append(f"{path}: folder holds no images ({', '.join(IMAGE_SUFFIXES[:4])}, …)")
            files += found
        elif path.exists():  # files, and devices/FIFOs that the image reader refuses by name
            files.append(path)
        elif glob.has_magic(pattern):
            matches = glob.glob(os.path.expanduser(pattern), recursive=True)
            found = sorted(Path(match) for match in matches if Path(match).is_file())
            if not found:
                problems.append(f"{pattern}: no files match")
            files += found
        else:
            problems.append(f"{path}: no such file or folder")
    if not files:
        raise ImageError(problems[0] if len(problems) == 1 else f"{', '.join(patterns)}: no images found")
    return unique_files(files), problems


def count_in_chunks(
    model: Any,
    paths: Sequence[str | os.PathLike[str]],
    *,
    progress: bool = False,
    chunk: int | None = None,
    console: Any = None,
    **options: Any,
) -> Any:
    """``model.count_paths(paths, progress=progress, **options)``, ``chunk`` images at a time
    (default :data:`COUNT_CHUNK`):
    the memory a run needs is flat in the number of images (each image keeps its name, counts
    and error message only). One chunk is one plain call.

    A chunk size that is a multiple of the batch size keeps every batch of a run of same-size
    images as one call would make it. With ``progress`` and several chunks, one bar counts the
    images chunk by chunk (a chunk's own bars would restart at zero).
    """
    from counting.features.extract import progress_bar
    from counting.model import CountResult

    batch = int(options.get("batch_size") or 1)
    chunk = COUNT_CHUNK if chunk is None else chunk
    size = max(batch, chunk // batch * batch)
    if len(paths) <= size:
        return model.count_paths(list(paths), progress=progress, **options)
    if console is None:
        from rich.console import Console

        console = Console(stderr=True)
    parts = []
    with progress_bar(console, progress and console.is_terminal) as bar:
        task = bar.add_task("counting", total=len(paths)) if bar else None
        for start in range(0, len(paths), size):
            piece = list(paths[start : start + size])
            parts.append(model.count_paths(piece, progress=False, **options))
            if bar is not None and task is not None:
                bar.advance(task, len(piece))

    def joined(name: str) -> np.ndarray | None:
        values = [getattr(part, name) for part in parts]
        return None if any(value is None for value in values) else np.concatenate(values)

    errors: dict[str, str] = {}
    for part in parts:
        errors.update(part.errors)
    return CountResult(
        sources=[source for part in parts for source in part.sources],
        counts=np.concatenate([part.counts for part in parts]),
        low=joined("low"),
        high=joined("high"),
        ok=np.concatenate([part.ok for part in parts]),
        errors=errors,
    )
