"""Do a zone's 90 % intervals hold? Zone counts against the head dots inside each zone.

    python scripts/zone_intervals_study.py --data ../shared/data [-m models/crowd.npz]
        [--sets mall shanghaitech-B shanghaitech-A] [--grids 1x2 2x2 3x3 4x4]

A zone's count is the frame's count times the zone's share of the density map's mass, and its
interval the frame's interval times the same share (counting.apply.zones). Nothing checked that
such an interval covers the people inside a zone: it carries the frame's error, not the error of
where the map puts the people. This splits each validation picture of the crowd sets
(counting.data.read_crowd, fixed validation parts the crowd model never trained on) into the
cells of R x C grids (each cell a zone, given as fractions of the picture), counts them as
`counting count --zone` does (counting.apply.zones.count_paths_in_zones), and compares each zone
with the head dots inside it: per set and grid, the zone count's MAE, the mean true count, the
share of true counts inside the 90 % intervals and their mean width, beside the same for whole
pictures (grid 1x1). Pictures the sparse gate hands to the detector are counted by their
detections (zones of the detector's boxes) and reported in their own rows.

Then fits the zone scatter's scale (counting.apply.zones.ZONE_SCATTER) anew: the smallest that
puts 90 % of the zones the density heads count inside their intervals, on every such picture and
two-fold (fitted on half the pictures, the coverage on the other half), and the coverage per set
and grid at the fitted scale. Prints the load.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

from counting.apply import ZONE_SCATTER, Zone, count_paths_in_zones, interval_level, zone_intervals
from counting.core import CountingError, atomic_write, check_writable
from counting.data import image_size, read_crowd
from counting.features import FeatureCache
from counting.model import CountingModel


def grid_zones(grid: str) -> list[Zone]:
    """The cells of an ``RxC`` grid as relative rectangles named ``gRxCrIcJ``."""
    parts = grid.lower().split("x")
    if len(parts) != 2 or not all(part.isdecimal() and int(part) > 0 for part in parts):
        raise ValueError(f"--grids {grid!r}: give ROWSxCOLUMNS, each a whole number above 0 (e.g. 3x3)")
    rows, columns = int(parts[0]), int(parts[1])
    zones = []
    for i in range(rows):
        for j in range(columns):
            x1, x2, y1, y2 = j / columns, (j + 1) / columns, i / rows, (i + 1) / rows
            points = ((x1, y1), (x2, y1), (x2, y2), (x1, y2))
            zones.append(Zone(name=f"g{rows}x{columns}r{i}c{j}", points=points, relative=True))
    return zones


def dots_in_cells(dots: np.ndarray | None, size: tuple[int, int], grid: str) -> np.ndarray:
    """``(R*C,)`` head dots per grid cell, row by row; a dot outside the picture (ShanghaiTech B
    keeps a few) goes to the nearest cell, as the frame's count still counts it."""
    rows, columns = (int(part) for part in grid.lower().split("x"))
    height, width = size
    if dots is None or len(dots) == 0:
        return np.zeros(rows * columns)
    column = np.clip((np.asarray(dots[:, 0]) / width * columns).astype(int), 0, columns - 1)
    row = np.clip((np.asarray(dots[:, 1]) / height * rows).astype(int), 0, rows - 1)
    return np.bincount(row * columns + column, minlength=rows * columns).astype(float)


def covered(rows: np.ndarray, scale: float, level: float) -> np.ndarray:
    """Whether each zone's true count lies inside its interval at the scatter ``scale``."""
    truth, share, frame, low, high = rows.T
    lower, upper = zone_intervals(frame, low, high, share[:, None], level, scale)
    return (truth >= lower[:, 0] - 1e-9) & (truth <= upper[:, 0] + 1e-9)


def fitted_scale(rows: np.ndarray, level: float) -> float:
    """The smallest scale (steps of 0.005) that covers ``level`` of ``rows``' zones."""
    scales = np.arange(0, 5.0001, 0.005)
    shares = np.array([covered(rows, scale, level).mean() for scale in scales])
    return float(scales[np.argmax(shares >= level)]) if (shares >= level).any() else float("inf")


def fit_scatter(fitting: list[tuple[str, str, str, np.ndarray]], level: float) -> None:
    pictures = sorted({picture for picture, *_ in fitting})
    rows = np.concatenate([found for *_, found in fitting])
    scale = fitted_scale(rows, level)
    print(
        f"zone scatter scale fitted to {100 * level:.0f} % of {len(rows)} zones: {scale:.3f} (shipped {ZONE_SCATTER})"
    )
    half = set(np.random.default_rng(0).permutation(pictures)[: len(pictures) // 2])
    for name, chosen in (("first half", True), ("second half", False)):
        fit = np.concatenate([found for picture, *_, found in fitting if (picture in half) == chosen])
        held = np.concatenate([found for picture, *_, found in fitting if (picture in half) != chosen])
        own = fitted_scale(fit, level)
        print(
            f"  fitted on the {name} of the pictures: {own:.3f}, covering {100 * covered(held, own, level).mean():.1f} % of the other half's zones"
        )
    for key in sorted({(name, grid) for _, name, grid, _ in fitting}):
        chosen = np.concatenate([found for _, name, grid, found in fitting if (name, grid) == key])
        print(
            f"  {key[0]:<16}{key[1]:>5}: {100 * covered(chosen, scale, level).mean():.1f} % at {scale:.3f}, {100 * covered(chosen, 0.0, level).mean():.1f} % scaled alone"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("-m", "--model", default="models/crowd.npz")
    parser.add_argument("--sets", nargs="+", default=["mall", "shanghaitech-B", "shanghaitech-A"])
    parser.add_argument("--grids", nargs="+", default=["1x2", "2x2", "3x3", "4x4"])
    parser.add_argument("--rows", type=Path, help="also write every zone's row to this CSV")
    args = parser.parse_args()
    try:
        for grid in args.grids:
            grid_zones(grid)
        if args.rows:
            check_writable(args.rows)  # before the counting: a typo here would cost the whole run
        model = CountingModel.load(args.model)
        validation = read_crowd(args.data, sets=tuple(args.sets)).subset("test")
    except (ValueError, CountingError) as error:
        sys.exit(f"error: {error}")
    cache = FeatureCache()
    sources = validation.source_names()
    paths = [str(sample.path) for sample in validation.samples]
    started = time.perf_counter()
    print(f"model {args.model}; load {os.getloadavg()[0]:.1f}", flush=True)
    header = f"{'set':<16}{'route':<18}{'grid':>5}{'zones':>7}{'true mean':>10}{'MAE':>8}{'inside 90%':>11}{'width':>8}"
    print(header)
    grids = list(dict.fromkeys(["1x1", *(grid.lower() for grid in args.grids)]))  # each grid once
    # Every grid's cells at once: one pass of the model, each picture's map shared by all zones.
    zones_of = {grid: grid_zones(grid) for grid in grids}
    result, records = count_paths_in_zones(
        model, paths, [zone for grid in grids for zone in zones_of[grid]], cache=cache
    )
    by_route = result.counted_by if result.counted_by is not None else ["density"] * len(paths)
    table_rows: list[tuple] = []
    fitting: list[
        tuple[str, str, str, np.ndarray]
    ] = []  # (picture, set, grid, rows [true, share, frame count, low, high])
    for grid in grids:
        zones = zones_of[grid]
        rows: dict[tuple[str, str], list[np.ndarray]] = {}
        for k, sample in enumerate(validation.samples):
            if not result.ok[k]:
                continue
            record = records[paths[k]]
            truth = dots_in_cells(sample.dots, image_size(sample.path), grid)
            counted = np.array([[record[zone.name][key] for key in ("count", "low", "high")] for zone in zones])
            rows.setdefault((sources[k], str(by_route[k])), []).append(np.column_stack([truth, counted]))
            if result.low is not None and not str(by_route[k]).startswith("detector"):
                frame = float(result.counts[k])
                share = counted[:, 0] / frame if frame > 0 else np.full(len(zones), 1 / len(zones))
                frame_row = [frame, float(result.low[k]), float(result.high[k])]
                fitting.append(
                    (paths[k], sources[k], grid, np.column_stack([truth, share, np.tile(frame_row, (len(zones), 1))]))
                )
            table_rows += [
                (paths[k], sources[k], str(by_route[k]), grid, zone.name, truth[z], *counted[z])
                for z, zone in enumerate(zones)
            ]
        for (name, route), found in sorted(rows.items()):
            table = np.concatenate(found)
            truth, count, low, high = table.T
            inside = np.mean((truth >= low - 1e-9) & (truth <= high + 1e-9))
            print(
                f"{name:<16}{route:<18}{grid:>5}{len(table):>7}{truth.mean():>10.2f}"
                f"{np.abs(count - truth).mean():>8.2f}{100 * inside:>10.1f}%{np.mean(high - low):>8.2f}",
                flush=True,
            )
    if fitting and any(grid != "1x1" for grid in grids):
        fit_scatter([entry for entry in fitting if entry[2] != "1x1"], interval_level(model))
    if args.rows:
        try:
            with atomic_write(args.rows) as handle:
                writer = csv.writer(handle)
                writer.writerow(["image", "set", "counted_by", "grid", "zone", "true", "count", "low", "high"])
                writer.writerows(table_rows)
        except (OSError, CountingError) as error:
            sys.exit(f"error: {error}")
    print(f"{time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
