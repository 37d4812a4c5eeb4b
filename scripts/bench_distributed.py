"""Extraction on a Dask LocalCluster against a single process, on real Mall frames.

Prints images/s of :func:`counting.features.extract_features` in this process and of
:func:`counting.apply.distributed.extract_features_distributed` on ``local:N`` (cluster start-up and
the workers' backbone loading excluded: a warm-up extraction runs first), whether the
descriptors are byte-identical, and the figure with one thread per worker (faster on a small
machine; on torch equal to a single process only where the batch size makes the bits
thread-independent, so identity is reported, not assumed).

    python scripts/bench_distributed.py --frames 160 --workers 2 [--runtime torch]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from counting.apply import extract_features_distributed, open_cluster
from counting.features import RUNTIMES, Preprocessing, available_cpus, extract_features, get_backbone

MALL = Path(__file__).resolve().parents[2] / "shared" / "data" / "mall-train" / "frames"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=160)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--folder", type=Path, default=MALL)
    parser.add_argument("--runtime", choices=RUNTIMES, default="onnxruntime")
    args = parser.parse_args()
    paths = sorted(str(p) for p in args.folder.glob("*.jpg"))[: args.frames]
    warm = paths[: args.batch_size * 2]
    prep = Preprocessing(224)
    print(
        f"{len(paths)} frames from {args.folder}, batch {args.batch_size}, {args.runtime}, "
        f"{available_cpus()} cores here"
    )

    def backbone_with(threads: int | None = None):
        return get_backbone("efficientnet-lite0", runtime=args.runtime, threads=threads)

    backbone = backbone_with()
    extract_features(warm, backbone, prep, batch_size=args.batch_size, progress=False)
    started = time.perf_counter()
    single = extract_features(paths, backbone_with(), prep, batch_size=args.batch_size, progress=False)
    single_s = time.perf_counter() - started
    print(f"single process:             {len(paths) / single_s:6.1f} images/s ({single_s:.1f} s)")

    with open_cluster(f"local:{args.workers}") as client:
        client.wait_for_workers(args.workers)
        for threads, label in ((None, "client's threads"), (1, "1 thread/worker")):
            extract_features_distributed(
                warm,
                backbone_with(threads),
                prep,
                batch_size=args.batch_size,
                progress=False,
                client=client,
                threads=threads,
            )
            started = time.perf_counter()
            result = extract_features_distributed(
                paths,
                backbone_with(threads),
                prep,
                batch_size=args.batch_size,
                progress=False,
                client=client,
                threads=threads,
            )
            seconds = time.perf_counter() - started
            same = result.features.tobytes() == single.features.tobytes()
            gap = float(np.nanmax(np.abs(result.features - single.features)))
            print(
                f"local:{args.workers}, {label:17s} {len(paths) / seconds:6.1f} images/s ({seconds:.1f} s), "
                f"byte-identical: {same}, max |diff| {gap:.2e}"
            )


if __name__ == "__main__":
    main()
