"""Peak memory of a `counting` command on N Mall frames: it should not grow with N (issue 21 item 4).

    PYTHONPATH=. python scripts/bench_memory.py count --frames 16 400 2000 -- -m models/mall-accurate.npz
    PYTHONPATH=. python scripts/bench_memory.py evaluate --frames 2000 -- -m models/mall-accurate.npz
    PYTHONPATH=. python scripts/bench_memory.py video --frames 2000 -- -m models/mall-accurate.npz
    PYTHONPATH=. python scripts/bench_memory.py report --frames 2000 -- -m models/mall-accurate.npz
    PYTHONPATH=. python scripts/bench_memory.py compare --frames 2000 -- --model models/mall-accurate.npz
    PYTHONPATH=. python scripts/bench_memory.py train --frames 200 1000

Builds, in a temporary folder, a Mall-layout dataset of N frames (the real frames of
../shared/data/mall-train, repeated in turn as links, with their head points in a new
mall_gt.mat; the real ROI and perspective map), or for `video` an MJPG video of those frames.
Then runs the command in a fresh interpreter per N (no feature cache: --no-cache) and prints
the child's own peak RSS (VmHWM from /proc/self/status, written at exit; not ru_maxrss, which
counts the forking parent), the wall time, and the growth per 1000 frames. The split is
train=1-16,test=17-N for evaluate / report / compare (compare fits its baselines on those 16);
`train` trains a conv density model (`--density-head --head-kind conv`: four heads on
stride-8 maps, which it reads back from disk) on train=1-(N-16),test=(N-15)-N; its own options
follow `--` (default `--input-size native`).
Prints the CPU model and load average: time depends on both, memory should not.
Exits 1 when a peak is above --limit-mb (2048 by default: issue 21's bound).

Measured with models/mall-accurate.npz (720 px, conv head) on AMD EPYC, 2 cores shared with
other jobs (load average 4-14, so the times vary; the memory does not):

    command   frames   before (10e210e)   after
    count         16          1249 MB    1067 MB
    count         96          1411 MB    1078 MB
    count       2000                 -    1106 MB
    video         16          2372 MB    1168 MB
    video         96          2908 MB    1412 MB
    video        400                 -    1423 MB
    video       2000                 -    1453 MB
    evaluate      96                 -    1142 MB
    evaluate    2000                 -    1101 MB
    report        96                 -    1113 MB
    compare       96                 -     857 MB

Zones (`count ... -- -m models/mall-accurate.npz --zone left:0,0,0.5,0,0.5,1,0,1 --zone
right:0.5,0,1,0,1,1,0.5,1 --zone door:10%,10%,40%,10%,40%,60%`, 2026-12-03, AMD EPYC with AVX2
only, load 1.4-2.7): 16 frames 1038 MB (11.2 s), 2000 frames 1089 MB (250.0 s), 26 MB per 1000
frames: a zone keeps one bool per zone of each picture, not its weights.

`train` (conv heads, native 640x480 input, maps on disk; 2026-11-25, load 1-3): 100 frames
2238 MB, 400 frames 2262 MB (79 MB per 1000 frames). A 40-frame ridge training peaks at 1.5 GB:
the training process's own base, not the maps. Exits 1 against the default 2048 MB limit, which
is the counting commands' bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from peak_rss import run_counting

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("COUNTING_SHARED_DATA", REPO.parent / "shared" / "data")) / "mall-train"


def mall_of(folder: Path, n: int) -> Path:
    """A Mall-layout dataset of ``n`` frames: real frame ``k % 800`` as frame ``k``, linked."""
    from scipy.io import loadmat, savemat

    truth = loadmat(DATA / "mall_gt.mat")
    real = len(truth["count"])
    (folder / "frames").mkdir(parents=True)
    cells = np.empty((1, n), dtype=object)
    counts = np.zeros((n, 1))
    for k in range(n):
        source = k % real
        os.symlink(DATA / "frames" / f"seq_{source + 1:06d}.jpg", folder / "frames" / f"seq_{k + 1:06d}.jpg")
        cells[0, k] = {"loc": truth["frame"][0, source]["loc"][0, 0]}
        counts[k, 0] = truth["count"][source, 0]
    savemat(folder / "mall_gt.mat", {"frame": cells, "count": counts})
    os.symlink(DATA / "perspective_roi.mat", folder / "perspective_roi.mat")
    return folder


def video_of(path: Path, n: int) -> Path:
    import cv2

    frames = sorted((DATA / "frames").glob("seq_*.jpg"))
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (640, 480))
    for k in range(n):
        writer.write(cv2.imread(str(frames[k % len(frames)])))
    writer.release()
    return path


def command_line(command: str, work: Path, n: int, extra: list[str]) -> list[str]:
    split = f"train=1-16,test=17-{n}"
    if command == "count":
        return ["count", str(mall_of(work / "mall", n) / "frames"), "--csv", str(work / "out.csv"), *extra]
    if command == "video":
        return ["video", str(video_of(work / "mall.avi", n)), "--csv", str(work / "out.csv"), *extra]
    root = str(mall_of(work / "mall", n))
    data = ["-d", "mall", "-r", root, "--split", split]
    if command == "evaluate":
        return ["evaluate", *data, "--json", str(work / "out.json"), *extra]
    if command == "report":
        return ["report", *data, "-o", str(work / "report"), *extra]
    if command == "compare":
        return ["compare", *data, "-o", str(work / "compare"), *extra]
    if command == "train":
        data = ["-d", "mall", "-r", root, "--split", f"train=1-{n - 16},test={n - 15}-{n}"]
        head = ["--density-head", "--head-kind", "conv", "--grid", "2x2"]
        return ["train", *data, *head, "-o", str(work / "model.npz"), *(extra or ["--input-size", "native"])]
    raise SystemExit(f"unknown command {command!r}")


def peak_rss(args: list[str], work: Path) -> tuple[float, float, str]:
    done, seconds, peak = run_counting([*args, "--no-progress", "--no-cache"], work / "peak.txt")
    last = (done.stderr.strip().splitlines() or [""])[-1]
    if done.returncode != 0 or peak is None:
        raise SystemExit(f"counting {' '.join(args)} failed ({done.returncode}): {last}")
    return peak, seconds, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["count", "evaluate", "report", "compare", "video", "train"])
    parser.add_argument("--frames", type=int, nargs="+", default=[16, 400])
    parser.add_argument("--limit-mb", type=float, default=2048.0)
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []  # the command's own options (-m MODEL)
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.extra = extra
    from counting.features import cpu_description

    print(f"CPU: {cpu_description()}; load average {os.getloadavg()[0]:.2f} at start")
    results = []
    for n in args.frames:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as folder:
            work = Path(folder)
            peak, seconds, _ = peak_rss(command_line(args.command, work, n, args.extra), work)
        results.append((n, peak))
        print(f"{args.command} {n:6d} frames: peak RSS {peak:7.0f} MB, {seconds:6.1f} s", flush=True)
    if len(results) > 1:
        (n0, p0), (n1, p1) = results[0], results[-1]
        print(f"growth: {(p1 - p0) / max(n1 - n0, 1) * 1000:.0f} MB per 1000 frames")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    worst = max(peak for _, peak in results)
    sys.exit(0 if worst <= args.limit_mb else 1)


if __name__ == "__main__":
    main()
