"""The crowd network's losses: a density map's squared error (the default) and the Bayesian loss.

``density_loss`` (the default): the head dots are put in their cells and spread by a Gaussian of
``DENSITY_SIGMA`` cells; the loss is the squared error per cell, summed over the crop, times
``DENSITY_WEIGHT`` (CSRNet's loss, and this project's conv heads'), plus ``COUNT_WEIGHT`` times the
crop's absolute count error. Why not the Bayesian loss below, which the issue suggested: trained
here (blocks 5-10 and the decoder, Adam) it sent every cell's density to zero within 20-60 steps
and stayed there, at learning rates from 3e-5 to 1e-3, with a softplus, a ReLU or an absolute value
last, and could not fit even one batch of 8 ShanghaiTech B crops in 60 steps, where the squared
error fitted it (counts 10.5 / 8.0 / 24.7 / 4.5 / 0.9 / 28.0 for 10 / 8 / 25 / 4 / 0 / 29). Its
background term presses on every cell at full strength until the crop's whole background mass is
zero, while a head's pull acts on its few cells only: the published runs (VGG-19, learning rate
1e-5, hundreds of epochs) outlast that phase; a two-core budget cannot.

The Bayesian loss (Ma et al., "Bayesian Loss for Crowd Count Estimation
with Point Supervision", ICCV 2019: "BL+"), batched over crops of any number of heads.

Each cell's predicted people are shared among the annotated heads by the posterior that the cell
shows head k, a Gaussian of ``sigma`` pixels around each head, plus a background "head" whose
squared distance is ``(crop_size * background_ratio)^2 / d^2`` (d: the distance to the nearest
head: far from everyone the background takes the cell). Each head's expected count should be 1,
the background's 0; the loss is the sum of the absolute differences, per crop, averaged over the
batch. A crop with nobody in it is all background, so its loss is its predicted total.

Why this loss: it learns from the head dots themselves (no density kernel width to choose, which
the dense ShanghaiTech A and sparse coco-voc20 would want very different), it is a closed form per
step (DM-Count's optimal transport needs Sinkhorn iterations per crop, a real cost on two cores),
and its published figures are DM-Count's within a few percent (ShanghaiTech A 62.8 vs 59.7, B 7.7
vs 7.4, both on VGG-19). The constants are the paper's code's defaults.
"""

from __future__ import annotations

import torch

__all__ = [
    "BACKGROUND_RATIO",
    "COUNT_WEIGHT",
    "DENSITY_SIGMA",
    "SIGMA",
    "bayesian_loss",
    "density_loss",
    "dot_grid",
    "padded_points",
]

SIGMA = 8.0
BACKGROUND_RATIO = 1.0
DENSITY_SIGMA = 1.0  # cells (8 pixels of the network's input)
DENSITY_WEIGHT = 100.0  # densities per cell are ~0.01-1: their squared errors are scaled to order one
COUNT_WEIGHT = 0.1


def dot_grid(points: torch.Tensor, mask: torch.Tensor, rows: int, cols: int, stride: int) -> torch.Tensor:
    """``(B, rows, cols)``: how many of each crop's real points fall in each cell (points outside
    the grid are left out)."""
    batch = points.shape[0]
    cells = torch.div(points, stride, rounding_mode="floor").long()  # (B, K, 2) x, y cells
    inside = mask & (cells[..., 0] >= 0) & (cells[..., 0] < cols) & (cells[..., 1] >= 0) & (cells[..., 1] < rows)
    crop_of = torch.arange(batch, device=points.device)[:, None].expand_as(mask)
    flat = (crop_of * rows + cells[..., 1]) * cols + cells[..., 0]
    counts = torch.bincount(flat[inside], minlength=batch * rows * cols)
    return counts.reshape(batch, rows, cols).to(torch.float32)


def _gaussian_kernel(sigma: float) -> torch.Tensor:
    radius = max(1, int(round(3 * sigma)))
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float32)
    line = torch.exp(-(offsets**2) / (2 * sigma**2))
    line = line / line.sum()
    return (line[:, None] * line[None, :])[None, None]


def density_loss(
    density: torch.Tensor,
    points: torch.Tensor,
    mask: torch.Tensor,
    stride: int,
    sigma: float = DENSITY_SIGMA,
    count_weight: float = COUNT_WEIGHT,
) -> torch.Tensor:
    """``density`` ``(B, h, w)`` against the crops' dots spread by a Gaussian of ``sigma`` cells
    (zero padding: a head near the edge loses the part of its mass that falls outside, as the
    crop does); the mean over crops (module docstring)."""
    batch, rows, cols = density.shape
    dots = dot_grid(points.to(density.device), mask.to(density.device), rows, cols, stride)
    kernel = _gaussian_kernel(sigma).to(density)
    target = torch.nn.functional.conv2d(dots[:, None].to(density), kernel, padding=kernel.shape[-1] // 2)[:, 0]
    squared = ((density - target) ** 2).sum(dim=(1, 2))
    count_error = (density.sum(dim=(1, 2)) - dots.sum(dim=(1, 2))).abs()
    return (DENSITY_WEIGHT * squared + count_weight * count_error).mean()


def padded_points(points: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-crop ``(k_i, 2)`` x, y points -> ``(B, K, 2)`` padded with zeros and its ``(B, K)`` mask."""
    most = max([1, *(len(item) for item in points)])
    padded = torch.zeros(len(points), most, 2)
    mask = torch.zeros(len(points), most, dtype=torch.bool)
    for row, item in enumerate(points):
        padded[row, : len(item)] = item
        mask[row, : len(item)] = True
    return padded, mask


def bayesian_loss(
    density: torch.Tensor,
    points: torch.Tensor,
    mask: torch.Tensor,
    stride: int,
    crop_size: float,
    sigma: float = SIGMA,
    background_ratio: float = BACKGROUND_RATIO,
) -> torch.Tensor:
    """``density`` ``(B, h, w)`` people per cell of ``stride`` pixels; ``points`` ``(B, K, 2)``
    head positions in the crop's pixels (x, y), ``mask`` ``(B, K)`` which are real. The mean over
    crops of the Bayesian loss (module docstring)."""
    batch, rows, cols = density.shape
    ys = (torch.arange(rows, dtype=density.dtype, device=density.device) + 0.5) * stride
    xs = (torch.arange(cols, dtype=density.dtype, device=density.device) + 0.5) * stride
    centres = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1).reshape(1, 1, rows * cols, 2)
    squared = ((points.to(density)[:, :, None, :] - centres) ** 2).sum(dim=-1)  # (B, K, M)
    far = torch.finfo(density.dtype).max / 4
    squared = torch.where(mask[:, :, None], squared, torch.full_like(squared, far))
    nearest = squared.min(dim=1, keepdim=True).values  # (B, 1, M); ``far`` in a crop of nobody
    background = (crop_size * background_ratio) ** 2 / (nearest + 1e-5)
    logits = -torch.cat([squared, background], dim=1) / (2.0 * sigma**2)
    logits[:, :-1][~mask] = -torch.inf
    posterior = torch.softmax(logits, dim=1)  # (B, K + 1, M)
    expected = (posterior * density.reshape(batch, 1, rows * cols)).sum(dim=-1)  # (B, K + 1)
    target = torch.cat([mask.to(density), torch.zeros(batch, 1, dtype=density.dtype, device=density.device)], dim=1)
    real = torch.cat([mask, torch.ones(batch, 1, dtype=torch.bool, device=density.device)], dim=1)
    return ((target - expected).abs() * real).sum() / batch
