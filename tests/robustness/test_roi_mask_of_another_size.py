"""A model's ROI mask made for frames of another size: the command says why nothing was counted."""

from __future__ import annotations

from pathlib import Path

from robust_helpers import REPO_ROOT, assert_one_error

MALL_SUMS = REPO_ROOT / "models" / "mall-sums.npz"


def test_report_with_a_roi_model_on_images_of_another_size_says_why_nothing_was_counted(
    cli, tmp_path: Path, shanghaitech_root: Path
) -> None:
    # Was a traceback: "metrics need at least one sample, got none" (Mall's 640x480 ROI, 1024x768 images).
    result = cli(
        "report", "-d", "shanghaitech", "-r", shanghaitech_root, "--split", "train=1-5,test=6-8",
        "-m", MALL_SUMS, "-o", tmp_path / "report",
    )  # fmt: skip
    assert_one_error(result, str(shanghaitech_root), "none of the 3 test images", "ROI mask is 640x480")
