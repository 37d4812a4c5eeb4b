#!/usr/bin/env python3
"""Video counting speed: frames/s on a 640x480 25 fps video against its frame rate.

Writes a video from real Mall frames with OpenCV (MJPG .avi), runs the video pipeline
(decode thread + batched forward + per-frame CSV) with the default model, and prints frames/s
and the ratio to real time. Target: >= 1.5x real time (37.5 frames/s) with the default backbone.

    python scripts/bench_video.py [--frames 250] [--batch-size 8] [--model models/default.npz]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cv2

from counting import defaults
from counting.model import load_model
from counting.video import count_video

REPO = Path(__file__).resolve().parents[1]
FPS = 25.0
SIZE = (640, 480)


def write_test_video(frames_dir: Path, n_frames: int, path: Path) -> int:
    """A 640x480 25 fps MJPG video of the first Mall frames (looped if fewer exist)."""
    sources = sorted(frames_dir.glob("*.jpg"))
    if not sources:
        raise SystemExit(f"{frames_dir}: no .jpg frames found")
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, SIZE)
    for k in range(n_frames):
        image = cv2.imread(str(sources[k % len(sources)]))
        writer.write(cv2.resize(image, SIZE) if image.shape[1::-1] != SIZE else image)
    writer.release()
    return n_frames


def bare_forward_rate(model, video: Path, batch_size: int, n_frames: int) -> float:
    """Frames/s of the network alone (prepared batches, no decoding) as the ceiling to compare with."""
    capture = cv2.VideoCapture(str(video))
    prepared = []
    while len(prepared) < n_frames:
        ok, image = capture.read()
        if not ok:
            break
        prepared.append(model.prepare_image(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)))
    capture.release()
    batches = [prepared[k : k + batch_size] for k in range(0, len(prepared) - batch_size + 1, batch_size)]
    started = time.perf_counter()
    for batch in batches:
        model.count_prepared(batch)
    return len(batches) * batch_size / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--frames-dir", type=Path, default=REPO.parent / "shared" / "data" / "mall-train" / "frames"
    )
    parser.add_argument("--frames", type=int, default=250, help="video length in frames (250 = 10 s)")
    parser.add_argument("--model", type=Path, default=None, help="model file (default: models/default.npz)")
    parser.add_argument("--batch-size", type=int, default=defaults.VIDEO_BATCH_SIZE)
    parser.add_argument("--stride", type=int, default=1)
    args = parser.parse_args()

    model = load_model(args.model)
    model.get_backbone()
    with tempfile.TemporaryDirectory() as folder:
        video = Path(folder) / "mall_640x480_25fps.avi"
        write_test_video(args.frames_dir, args.frames, video)
        # Warm-up: the backbone runs a new input shape eagerly `trace_after` times, then traces
        # and freezes it once; a long-running stream pays that start-up cost only once.
        warm_batches = model.get_backbone().trace_after + 1
        count_video(model, str(video), max_frames=warm_batches * args.batch_size, batch_size=args.batch_size)
        started = time.perf_counter()
        run = count_video(
            model,
            str(video),
            stride=args.stride,
            batch_size=args.batch_size,
            records_path=Path(folder) / "counts.csv",
        )
        wall = time.perf_counter() - started
        bare_fps = bare_forward_rate(model, video, args.batch_size, min(args.frames, 96))
    fps = run.frames / wall
    ratio = run.frames * args.stride / FPS / wall
    print(f"model: {model.name} ({model.backbone}, input {model.input_size or 'native'}, grid {model.grid})")
    print(
        f"video: {args.frames} frames, 640x480 at {FPS:g} fps; stride {args.stride}, batch {args.batch_size}"
    )
    print(
        f"counted {run.frames} frames in {wall:.2f} s: {fps:.1f} frames/s, {ratio:.2f}x real time "
        f"(target >= 1.50x)"
    )
    print(
        f"bare forward on the same prepared frames: {bare_fps:.1f} frames/s; the pipeline reaches "
        f"{fps / bare_fps:.0%} of it"
    )
    print(
        f"load average while measuring (1/5/15 min): {' '.join(f'{v:.1f}' for v in os.getloadavg())} "
        f"on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
