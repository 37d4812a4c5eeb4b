"""Speed of the default model (the general crowd model) on 1024x768 photos, end to end.

    python scripts/bench_crowd_speed.py --images ../shared/data/shanghaitech-B-train/images --n 40

`counting.count` on N ShanghaiTech B photos (1024x768 JPEGs) with no feature cache: decoding,
resizing, the trunk, the density head and the AGP, as `counting count photos/` runs them. One
warm-up call (model load, ONNX session) is not timed; then each of --rounds rounds counts the
same photos again from scratch. Prints pictures per second per round, the CPU model, the
thread count and the load average before and after (a shared machine's figures are lower bounds).
Then times the density head alone on the first photo's maps: the ensemble's members one by one,
the same members as one grouped convolution (how counting runs them), and the whole head as it
counts (router and specialists included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

import counting
from counting.data import image_size
from counting.features import cpu_description, default_threads
from counting.model import default_model_path, load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=Path, default=Path("../shared/data/shanghaitech-B-train/images"))
    parser.add_argument("--n", type=int, default=40, help="photos per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", type=Path, default=None, help="model file (default: the shipped default)")
    args = parser.parse_args()

    photos = sorted(str(path) for path in args.images.glob("*.jpg"))
    photos = [path for path in photos if image_size(path) == (768, 1024)][: args.n]
    if len(photos) < args.n:
        raise SystemExit(f"{args.images}: only {len(photos)} photos of 1024x768 found, {args.n} asked for")
    model = load_model(args.model)
    print(f"model: {args.model or default_model_path()} (input short side {model.input_size})")
    print(f"CPU: {cpu_description()}; threads {default_threads()}; load before {os.getloadavg()[0]:.2f}")
    counting.count(photos[:2], model)  # warm-up: ONNX session, first shapes
    speeds = []
    for number in range(1, args.rounds + 1):
        started = time.perf_counter()
        result = counting.count(photos, model)
        seconds = time.perf_counter() - started
        speeds.append(len(result.rows) / seconds)
        print(f"round {number}: {len(result.rows)} photos in {seconds:.1f} s = {speeds[-1]:.2f} pictures/s")
    print(
        f"median {statistics.median(speeds):.2f} pictures/s (1024x768, end to end, no cache); "
        f"load after {os.getloadavg()[0]:.2f}"
    )
    _head_alone(model, photos[0])


def _head_alone(model, photo: str, runs: int = 30) -> None:
    """ms per picture of the density head on one photo's maps, three ways."""
    import torch

    from counting.data import load_image
    from counting.heads import maps_on_grid

    head = model.density_head
    if getattr(head, "kind", None) != "conv":
        return
    tensor = model.prepare_image(load_image(photo))
    maps = maps_on_grid(model.get_backbone(), np.asarray(tensor)[None], head.layers, head.stride)
    batch = torch.from_numpy(np.ascontiguousarray(maps, dtype=np.float32))
    separate, fused = head.networks(), head.fused_network()

    def one_by_one() -> None:
        with torch.inference_mode():
            for network in separate:
                network(batch)

    def grouped() -> None:
        with torch.inference_mode():
            fused(batch)

    timings = {}
    for name, run in (("members one by one", one_by_one), ("one grouped convolution", grouped)) * 2 + (
        ("as counting runs it", lambda: head.density(maps)),
    ):
        run()
        started = time.perf_counter()
        for _ in range(runs):
            run()
        timings[name] = (time.perf_counter() - started) / runs * 1000
    figures = "; ".join(f"{name} {value:.1f} ms" for name, value in timings.items())
    print(
        f"density head on {tuple(maps.shape[-2:])} maps, {len(head.members)} members: {figures} (load {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
