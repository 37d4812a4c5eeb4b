"""Does the crowd model's router mix its heads better by regions of a picture than whole?

    python scripts/studies/router_regions_study.py --data ../shared/data [-m models/crowd.npz]
        [--cache-dir DIR] [--grids 1x1 2x2 3x3 2x1 1x2]

The crowd model's density heads (a general head and specialists) are mixed by a router that reads
the statistics of the whole picture's feature maps (counting.heads.crowd.routing). A picture
wider than 2:1 is routed tile by tile, each tile as the photo of at most 2:1 the router learnt on
(ConvDensityHead._density_by_tiles): a crowd beside an empty photo was otherwise sent to the
general head and undercounted by a quarter. This study asks whether the same helps within 2:1:
on every picture of the model's validation parts (counting.data.read_crowd, "test": never trained
on) each region of an R x C grid of the map takes the router's mixture of its own maps'
statistics, and the heads' count (the model's correction of the mixed map's region sums, without
the sparse gate) is compared with the truth. Prints the MAE per set and grid, and the load.
Maps come from the feature cache when it holds them (--cache-dir, or $COUNTING_CACHE_DIR).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from counting.data import read_crowd
from counting.features import FeatureCache
from counting.heads import map_statistics
from counting.model import CountingModel


def regions_mixed(head: object, maps: np.ndarray, members: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``(h, w)`` density of one picture's ``(1, C, h, w)`` maps with each of ``rows`` x ``cols``
    regions mixed by the router's weights for that region's maps."""
    names = list(head.specialists)
    height, width = members.shape[-2:]
    row_edges = np.linspace(0, height, rows + 1).round().astype(int)
    col_edges = np.linspace(0, width, cols + 1).round().astype(int)
    density = np.zeros((height, width))
    for top, bottom in zip(row_edges[:-1], row_edges[1:], strict=True):
        for left, right in zip(col_edges[:-1], col_edges[1:], strict=True):
            weights = head.router.mixture(map_statistics(maps[:, :, top:bottom, left:right]), names)[0]
            density[top:bottom, left:right] = np.tensordot(weights, members[:, 0, top:bottom, left:right], 1)
    return density


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("-m", "--model", default="models/crowd.npz")
    parser.add_argument("--cache-dir", default=os.environ.get("COUNTING_CACHE_DIR"))
    parser.add_argument("--grids", nargs="+", default=["1x1", "2x2", "3x3", "2x1", "1x2"], help="ROWSxCOLS")
    args = parser.parse_args()
    grids = [tuple(int(part) for part in grid.split("x")) for grid in args.grids]
    model = CountingModel.load(args.model)
    head = model.density_head
    if getattr(head, "router", None) is None or not getattr(head, "specialists", None):
        raise SystemExit(f"{args.model}: its density head has no router and specialists to study")
    cache = FeatureCache(args.cache_dir) if args.cache_dir else FeatureCache()
    validation = read_crowd(args.data).subset("test")
    started = time.perf_counter()
    print(f"{args.model}; {len(validation.samples)} validation pictures; load {os.getloadavg()[0]:.1f}", flush=True)
    errors: dict[str, list[list[float]]] = {}
    sources = validation.source_names()
    for index, found in model.head_maps([sample.path for sample in validation.samples], cache=cache, batch_size=1):
        sample, source = validation.samples[index], sources[index]
        maps = found[None]
        members = head.member_densities(maps)
        counts = [
            model.predict_features(
                head.sum_regions(regions_mixed(head, maps, members, *grid)[None], model.roi_mask, head.grid),
                source="frames",
            )[0]
            for grid in grids
        ]
        errors.setdefault(source, []).append([abs(count - sample.count) for count in counts])
    print(f"{'set':<16}{'n':>5}" + "".join(f"{'x'.join(map(str, grid)):>9}" for grid in grids))
    for name, rows in errors.items():
        mae = np.mean(rows, axis=0)
        print(f"{name:<16}{len(rows):>5}" + "".join(f"{value:>9.2f}" for value in mae))
    print(f"{time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
