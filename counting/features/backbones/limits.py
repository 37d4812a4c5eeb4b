"""Bounds on the work one picture may ask for (counting.features.backbones.preprocessing applies
them), in a module of their own so that the command line can check an option against them
without importing torch.

No single input may need more than about 2 GB: the network input is 12 bytes per pixel (float32
RGB) and the backbones' activations a few hundred more per input pixel. 2048^2 input pixels keep
one image's forward pass well under that; the long side and the aspect ratio stop a 1x5000 strip
from becoming a 224x1,120,000 tensor (the short side is what gets scaled to input_size).
"""

from __future__ import annotations

MAX_INPUT_SIZE = 2048
MAX_INPUT_PIXELS = 2048 * 2048
MAX_LONG_SIDE = 8192
MAX_ASPECT_RATIO = 20.0
