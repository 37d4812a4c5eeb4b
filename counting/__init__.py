"""counting: count objects and people in images and video with asymmetric-kernel GPs."""

__version__ = "0.1.0"
