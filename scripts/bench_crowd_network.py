"""A trained crowd network (scripts/train_crowd_network.py) through the count's own path: its
validation figures, the Mall clip as an MJPG video against its JPEG frames, and its speed on
1024x768 photos beside the shipped default model's, in one run.

    python scripts/bench_crowd_network.py --network crowd-network.npz --data ../shared/data

The count's path: the picture decoded and resized by the count's preprocessing (short side 576),
the frozen part run as the backbone's ``block4`` tap on ONNX Runtime, the trained part as a
NetworkDensityHead (counting.heads.density.network), the density summed. Validation parts are the
crowd dataset's fixed ones (counting.data.datasets.crowd; coco-voc20 000000002299 left out, its
label is wrong). The MJPG check writes Mall frames 601-800 into an MJPG AVI with OpenCV (as
`counting video` users record) and compares the mean count over its frames with the JPEG frames'.
Speed: --n ShanghaiTech B photos of 1024x768, --rounds rounds, end to end (decode included), the
network path first, then `counting.count` with the shipped default model on the same photos;
prints the CPU, the threads and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

import counting
from counting.core import CountingError
from counting.data import image_size, load_image, read_crowd
from counting.features import Preprocessing, cpu_description, default_threads, get_backbone
from counting.heads import LOWER_TAP, NetworkDensityHead
from counting.model import default_model_path, load_model
from counting.train import INPUT_SIZE, crowd_parts, load_network


class NetworkCounter:
    """Counts pictures the way the count would with a network head."""

    def __init__(self, network_file: Path) -> None:
        network, settings = load_network(network_file)
        self.head = NetworkDensityHead.from_network(network, {"network": settings})
        self.backbone = get_backbone("efficientnet-lite0")
        self.backbone.use_onnxruntime()
        self.preprocessing = Preprocessing(input_size=INPUT_SIZE)

    def count(self, image, bgr: bool = False) -> float:
        tensor = self.backbone.prepare(image, self.preprocessing, bgr=bgr)
        maps = self.backbone.feature_maps(np.asarray(tensor)[None], [LOWER_TAP])[LOWER_TAP]
        return float(self.head.density(maps).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("COUNTING_SHARED_DATA", "../shared/data")))
    parser.add_argument("--n", type=int, default=24, help="photos per speed round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-validation", action="store_true")
    args = parser.parse_args()
    if args.n < 1 or args.rounds < 1:
        parser.error("--n and --rounds must be at least 1")
    try:
        _bench(args)
    except (CountingError, ValueError, OSError) as error:
        sys.exit(f"bench_crowd_network.py: {error}")


def _bench(args: argparse.Namespace) -> None:
    counter = NetworkCounter(args.network)
    print(f"CPU: {cpu_description()}; threads {default_threads()}; load before {os.getloadavg()[0]:.2f}")
    if not args.skip_validation:
        _validation(counter, args.data)
        _mjpg_clip(counter, args.data)
    _speed(counter, args.data, args.n, args.rounds)


def _validation(counter: NetworkCounter, data: Path) -> None:
    _, validation = crowd_parts(read_crowd(data))
    for name, samples in validation.items():
        counts = np.array([counter.count(load_image(sample.path)) for sample in samples])
        truth = np.array([float(sample.count) for sample in samples])
        error = counts - truth
        print(
            f"validation {name} ({len(samples)} pictures): MAE {np.mean(np.abs(error)):.3f}, "
            f"RMSE {np.sqrt(np.mean(error**2)):.3f}, bias {np.mean(error):+.3f}",
            flush=True,
        )


def _mjpg_clip(counter: NetworkCounter, data: Path) -> None:
    frames = sorted((data / "mall-train" / "frames").glob("*.jpg"))[600:800]
    if len(frames) < 200:
        raise ValueError(f"{data / 'mall-train' / 'frames'}: Mall frames 601-800 are not all there")
    jpeg = np.array([counter.count(load_image(path)) for path in frames])
    with tempfile.TemporaryDirectory() as folder:
        clip = Path(folder) / "mall-601-800.avi"
        first = cv2.imread(str(frames[0]))
        writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (first.shape[1], first.shape[0]))
        if not writer.isOpened():
            raise OSError(f"{clip}: OpenCV opens no MJPG writer here")
        for path in frames:
            writer.write(cv2.imread(str(path)))
        writer.release()
        reader = cv2.VideoCapture(str(clip))
        video = []
        while True:
            ok, frame = reader.read()
            if not ok:
                break
            video.append(counter.count(frame, bgr=True))
        reader.release()
    video_counts = np.array(video)
    print(
        f"Mall 601-800 as an MJPG AVI ({len(video_counts)} frames): mean count {video_counts.mean():.3f} against "
        f"{jpeg.mean():.3f} from the JPEG frames (difference {video_counts.mean() - jpeg.mean():+.3f}; "
        f"mean absolute difference per frame {np.mean(np.abs(video_counts - jpeg[: len(video_counts)])):.3f})",
        flush=True,
    )


def _speed(counter: NetworkCounter, data: Path, n: int, rounds: int) -> None:
    folder = data / "shanghaitech-B-train" / "images"
    photos = [path for path in sorted(folder.glob("*.jpg")) if image_size(path) == (768, 1024)][:n]
    if not photos:
        raise ValueError(f"{folder}: no 1024x768 photos to time")
    for path in photos[:2]:
        counter.count(load_image(path))  # warm-up: the ONNX session, the first shapes
    speeds = []
    for number in range(1, rounds + 1):
        started = time.perf_counter()
        for path in photos:
            counter.count(load_image(path))
        speeds.append(len(photos) / (time.perf_counter() - started))
        print(f"network round {number}: {speeds[-1]:.2f} pictures/s", flush=True)
    model = load_model(None)
    counting.count([str(path) for path in photos[:2]], model)
    baseline = []
    for number in range(1, rounds + 1):
        started = time.perf_counter()
        counting.count([str(path) for path in photos], model)
        baseline.append(len(photos) / (time.perf_counter() - started))
        print(f"default model ({default_model_path().name}) round {number}: {baseline[-1]:.2f} pictures/s", flush=True)
    print(
        f"median: network {statistics.median(speeds):.2f}, default model {statistics.median(baseline):.2f} "
        f"pictures/s ({len(photos)} photos of 1024x768, end to end); load after {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
