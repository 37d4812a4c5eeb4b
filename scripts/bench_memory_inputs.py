"""Peak memory of `counting count` against the number of images: it should stay flat.

    PYTHONPATH=. python scripts/bench_memory_inputs.py                 # N = 300 and 10 000
    PYTHONPATH=. python scripts/bench_memory_inputs.py --sizes 200 3000 --side 8
    PYTHONPATH=. python scripts/bench_memory_inputs.py --chunk 1000000   # one call: as before
    PYTHONPATH=. python scripts/bench_memory_inputs.py --sizes 16 80 --shape 640x480 -- -m models/mall-accurate.npz

Writes N tiny JPEGs (``--side`` pixels square, different pixels each) into a temporary folder,
runs ``counting count FOLDER --no-progress --csv OUT`` in a fresh interpreter per N (no feature
cache) and prints the process's peak RSS (VmHWM, its own, not the forking parent's), the
wall time, and the growth per 1 000 images. Prints the CPU model and the load average too:
the time depends on both, the memory should not. Exits 1 when the growth from the smallest N
to the largest is above ``--limit-mb``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from peak_rss import run_counting
from PIL import Image

REPO = Path(__file__).resolve().parents[1]


def write_images(folder: Path, n: int, side: int, shape: tuple[int, int] | None = None) -> None:
    """``n`` JPEGs of ``side`` x ``side`` pixels, or ``shape`` = (width, height)."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    width, height = shape if shape is not None else (side, side)
    for k in range(n):
        pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"img-{k:06d}.jpg", quality=90)


def peak_rss(folder: Path, extra: list[str], chunk: int | None = None) -> tuple[float, float, str]:
    """(peak RSS in MB, wall seconds, last stderr line) of one `counting count` on ``folder``."""
    environment = {key: value for key, value in os.environ.items() if key != "COUNTING_CACHE_DIR"}
    environment.update(COLUMNS="100")
    if chunk is not None:
        environment["BENCH_CHUNK"] = str(chunk)
    args = ["count", str(folder), "--no-progress", "--csv", str(folder.parent / "out.csv"), *extra]
    process, seconds, peak = run_counting(args, folder.parent / "peak.txt", environment)
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    if process.returncode != 0 or peak is None:
        raise SystemExit(f"count failed ({process.returncode}): {lines[-1] if lines else process.stdout[-500:]}")
    return peak, seconds, lines[-1] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 10_000], help="numbers of images")
    parser.add_argument("--side", type=int, default=32, help="side of each square JPEG in pixels")
    parser.add_argument(
        "--shape",
        help="WIDTHxHEIGHT of each JPEG instead of --side (640x480 for the Mall models, whose ROI has that size)",
    )
    parser.add_argument("--limit-mb", type=float, default=50.0, help="largest growth accepted, MB")
    parser.add_argument(
        "--chunk", type=int, help="images per count_paths call (counting.apply.chunks.COUNT_CHUNK); huge: one call"
    )
    parser.add_argument("extra", nargs="*", help="more `counting count` options (after --)")
    args = parser.parse_args()
    try:
        from counting.features import cpu_description

        cpu = cpu_description()
    except ImportError:
        cpu = "unknown CPU"
    print(f"CPU: {cpu}; {os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.chunk is not None:
        print(f"images per count_paths call: {args.chunk}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as temporary:
        for n in sorted(args.sizes):
            folder = Path(temporary) / f"n{n}" / "images"
            shape = tuple(int(v) for v in args.shape.lower().split("x")) if args.shape else None
            write_images(folder, n, args.side, shape)  # type: ignore[arg-type]
            peak, seconds, _ = peak_rss(folder, args.extra, args.chunk)
            rows.append((n, peak, seconds))
            print(f"N={n:>6}  peak RSS {peak:7.1f} MB  wall {seconds:6.1f} s  ({n / seconds:.0f} images/s)", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if len(rows) < 2:
        return 0
    (n0, peak0, _), (n1, peak1, _) = rows[0], rows[-1]
    growth = peak1 - peak0
    print(f"growth N={n0} -> N={n1}: {growth:+.1f} MB ({1000 * growth / (n1 - n0):+.2f} MB per 1 000 images)")
    return 1 if growth > args.limit_mb else 0


if __name__ == "__main__":
    sys.exit(main())
