"""Make the two example videos of examples/serve.toml from the Mall frames (there are no video
files in the repository): frames 1-400 and 401-800 as MJPEG .avi files at 10 frames/s.

    python scripts/make_example_videos.py                      # ../shared/data/mall-train/frames
    python scripts/make_example_videos.py --frames DIR --out examples/videos
"""

from __future__ import annotations

import argparse
from pathlib import Path

from counting.apply import frames_to_video

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = {"mall-a.avi": (1, 400), "mall-b.avi": (401, 800)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=Path, default=ROOT.parent / "shared" / "data" / "mall-train" / "frames")
    parser.add_argument("--out", type=Path, default=ROOT / "examples" / "videos")
    parser.add_argument("--fps", type=float, default=10.0)
    args = parser.parse_args()
    for name, (first, last) in VIDEOS.items():
        frames = [args.frames / f"seq_{k:06d}.jpg" for k in range(first, last + 1)]
        missing = [path for path in frames if not path.is_file()]
        if missing:
            raise SystemExit(f"{missing[0]}: Mall frame not found (give --frames FOLDER)")
        video = frames_to_video(frames, args.out / name, args.fps)
        print(f"{video}: frames {first}-{last}, {args.fps:g} frames/s, {video.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
