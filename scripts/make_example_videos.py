"""Make the two example videos of examples/serve.toml from the Mall frames: frames 1-20 and
401-420 as MJPEG .avi files at 2 frames/s (about the Mall camera's own rate: a 10 s loop each).

The two files are committed (examples/videos/, 1.6-1.7 MB each), so `counting serve examples/serve.toml`
starts on a fresh clone with nothing made first; this script is how they were made, and makes
them again (or longer ones, with --frames-per-video) from a folder of Mall frames.

    python scripts/make_example_videos.py                      # ../shared/data/mall-train/frames
    python scripts/make_example_videos.py --frames DIR --out examples/videos --frames-per-video 400
"""

from __future__ import annotations

import argparse
from pathlib import Path

from counting.apply import frames_to_video

ROOT = Path(__file__).resolve().parents[1]
# Video name -> its first Mall frame: two stretches of the day, far enough apart to differ.
VIDEOS = {"mall-a.avi": 1, "mall-b.avi": 401}
# 20 frames of ~80 kB each: a loop long enough to see the counts move, small enough to commit.
FRAMES_PER_VIDEO = 20
FPS = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=Path, default=ROOT.parent / "shared" / "data" / "mall-train" / "frames")
    parser.add_argument("--out", type=Path, default=ROOT / "examples" / "videos")
    parser.add_argument("--fps", type=float, default=FPS)
    parser.add_argument("--frames-per-video", type=int, default=FRAMES_PER_VIDEO)
    args = parser.parse_args()
    if not 1 <= args.frames_per_video <= 400:
        raise SystemExit(
            f"--frames-per-video {args.frames_per_video}: use 1 to 400 (the videos' frames must not overlap)"
        )
    for name, first in VIDEOS.items():
        last = first + args.frames_per_video - 1
        frames = [args.frames / f"seq_{k:06d}.jpg" for k in range(first, last + 1)]
        missing = [path for path in frames if not path.is_file()]
        if missing:
            raise SystemExit(f"{missing[0]}: Mall frame not found (give --frames FOLDER)")
        video = frames_to_video(frames, args.out / name, args.fps)
        print(f"{video}: frames {first}-{last}, {args.fps:g} frames/s, {video.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
