"""The per-class density head (VOC): boxes as supervision, one map per class."""
