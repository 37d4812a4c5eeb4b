"""Stage 3, descriptors or maps -> counts: the density heads, the per-class transform, calibrated intervals."""
