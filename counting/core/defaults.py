"""Default settings shared by every command: one place, so they can be set from measurements.

The accuracy measurements (docs/accuracy.md) decide these; commands read them at call time
(``defaults.INPUT_SIZE`` etc.), never copy them into their own constants.
"""

from __future__ import annotations

# ImageNet backbone giving the 1000-d descriptors; efficientnet-lite0 works offline.
BACKBONE: str = "efficientnet-lite0"
# Short side in pixels the frame is resized to (aspect kept, whole frame); None = native size.
INPUT_SIZE: int | None = 224
# The model used when --model is not given (under models/ in a checkout, or the installed data
# files): the general crowd model (issue 21; docs/density.md, "General crowd model"). The Mall
# models keep their names (default.npz, mall-sums.npz, mall-accurate.npz).
MODEL_FILE: str = "crowd.npz"
# Localised counting: (rows, cols) of tiles pooled from one forward pass; None = whole frame.
GRID: tuple[int, int] | None = None
# Also train on whole-frame descriptors (count/grid-cells) beside the tiles when a grid is used.
WHOLE_FRAME_ROWS: bool = False
# The paper's setting for image counting: univariate AGP with 25 centres.
KERNEL: str = "univariate"
N_CENTERS: int = 25
# Rows of the training part the regressor holds out to pick its best epoch (paper: 100).
N_VALIDATION: int = 100
# Nominal coverage of the count intervals (split conformal).
INTERVAL_LEVEL: float = 0.9
# Interval calibration: out-of-fold predictions of every train image from this many folds
# (runs of consecutive frames on sequences); the model itself is fitted on all train images.
CALIBRATION_FOLDS: int = 5
# The interval calibration modes `train --calibration` takes (counting.train.pipeline reads them);
# auto = cv: every train image calibrates the interval (out of fold), the model is fitted on all.
# Here, not in the pipeline, so the command line lists them without importing the training code.
CALIBRATION_MODES: tuple[str, ...] = ("auto", "cv", "tail", "blocks", "random", "none")
# Kinds of density head `train --density-head --head-kind` fits (counting.heads.density.training
# reads them); here for the same reason: listing them must not import torch.
DENSITY_KINDS: tuple[str, ...] = ("ridge", "rff", "conv")
# Hold-out calibration modes (--calibration tail|blocks|random): share of the train split held
# out, at least MIN_CALIBRATION frames.
CALIBRATION_FRACTION: float = 0.15
MIN_CALIBRATION: int = 30
# Temporal smoothing of per-frame counts on sequences: centred moving median window (frames).
SMOOTHING_WINDOW: int = 5
# Seed for every random choice in training (calibration split, centres, validation rows).
SEED: int = 0
BATCH_SIZE: int = 16
# Inference runtime for the backbones: "onnxruntime" (2.5x faster, same descriptors to 1e-4) or "torch".
RUNTIME: str = "onnxruntime"
# Frames per forward pass in video counting: larger is faster per frame but adds latency.
VIDEO_BATCH_SIZE: int = 8
# Dataset names the commands accept.
DATASETS: tuple[str, ...] = ("ucsd", "voc", "mall", "shanghaitech", "folder")
# Datasets that are frame sequences: temporal smoothing applies.
SEQUENCE_DATASETS: tuple[str, ...] = ("ucsd", "mall")
