"""Per-class columns: one naming scheme for `count` and `video`."""

from __future__ import annotations

import csv
from pathlib import Path

from robust_helpers import (
    REPO_ROOT,
    make_image,
    make_video,
)


def _header(path: Path) -> list[str]:
    with open(path, newline="") as handle:
        return next(csv.reader(handle))


# -- per-class columns: one scheme for `count` and `video` ----------------------------------------
def test_count_and_video_name_per_class_columns_alike(cli, tmp_path: Path) -> None:
    # Was: `count` wrote `person`, `person_low`; `video` wrote `count_person` and no interval.
    model = REPO_ROOT / "models" / "voc20.npz"
    image = make_image(tmp_path / "photo.png", size=(160, 120))
    clip = make_video(tmp_path / "clip.avi", n_frames=2, size=(160, 120))
    result = cli("count", image, "-m", model, "--csv", tmp_path / "count.csv")
    assert result.exit_code == 0, result.output
    result = cli("video", clip, "-m", model, "--csv", tmp_path / "video.csv", "--quiet")
    assert result.exit_code == 0, result.output
    count_header = _header(tmp_path / "count.csv")
    video_header = _header(tmp_path / "video.csv")
    per_class = [f"{kind}_{name}" for name in ("person", "cat") for kind in ("count", "low", "high")]
    for column in per_class:
        assert column in count_header and column in video_header, column
    assert count_header[:2] == ["image", "total"] and video_header[:2] == ["frame", "time_s"]
    assert not {"person", "person_low", "low", "high", "count"} & set(count_header + video_header)
