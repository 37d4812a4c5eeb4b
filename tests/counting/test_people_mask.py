"""The people mask of the general heads: its cells' labels, its fit on generated maps, the head it
multiplies, its file section (tampering refused in one line), and its training inside the heads."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

from counting.heads.crowd.people_mask import (
    CELLS_PER_CLASS,
    PeopleMask,
    cell_features,
    cell_labels,
    fit_people_mask,
    mask_cells,
)
from counting.heads.density.conv.persistence import FORMAT_VERSION, conv_head_from_document, conv_head_to_document
from counting.heads.density.persistence import DensityHeadError
from counting.heads.density.targets import density_map
from tests.counting.test_conv_head import random_head

CHANNELS = 5


def generated(seed: int, pictures: int = 24, shape: tuple[int, int] = (24, 32)):
    """Maps whose channel 0 is high on people's cells (a blob about each head dot) and whose other
    channels are noise, with the dots' density targets: what a mask should learn to read."""
    rng = np.random.default_rng(seed)
    maps, targets = [], []
    for _ in range(pictures):
        dots = rng.uniform([0, 0], [shape[1] * 8, shape[0] * 8], size=(int(rng.integers(0, 12)), 2))
        target = density_map(dots, (shape[0] * 8, shape[1] * 8), shape, 4.0)
        signal = np.minimum(target * 200.0, 6.0)
        noise = rng.normal(size=(CHANNELS, *shape))
        noise[0] += signal
        maps.append(noise.astype(np.float32))
        targets.append(target)
    return maps, targets


def random_mask(channels: int = CHANNELS, hidden: int = 6, seed: int = 0) -> PeopleMask:
    rng = np.random.default_rng(seed)
    return PeopleMask(
        x_mean=rng.normal(size=channels),
        x_scale=rng.uniform(0.5, 2.0, channels),
        hidden_weight=rng.normal(size=(2 * channels, hidden)),
        hidden_bias=rng.normal(size=hidden),
        out_weight=rng.normal(size=hidden),
        out_bias=0.3,
        context=2,
    )


def test_cells_near_a_dot_are_people_far_ones_background_the_fringe_left_out() -> None:
    target = density_map(np.array([[84.0, 44.0]]), (96, 160), (12, 20), 4.0)  # the dot in cell (5, 10)
    labels = cell_labels(target)
    assert labels[5, 10] == 1
    assert labels[0, 0] == 0 and labels[11, 19] == 0 and labels[5, 16] == 0
    assert labels[5, 12] == -1  # two cells off: neither
    assert np.all(cell_labels(np.zeros((4, 4))) == 0)


def test_probabilities_read_each_cell_and_its_context_as_the_fit_does() -> None:
    """The context mean is taken of the hidden layer's share, not of every channel: the same
    numbers as the features the fit draws, through the same two layers."""
    mask = random_mask()
    maps = np.random.default_rng(3).normal(1.0, 2.0, size=(2, CHANNELS, 9, 13)).astype(np.float32)
    found = mask.probabilities(maps)
    assert found.shape == (2, 9, 13)
    for picture, expected in zip(maps, found, strict=True):
        features = cell_features(picture, mask.x_mean.astype(np.float32), mask.x_scale.astype(np.float32), mask.context)
        hidden = np.maximum(features @ mask.hidden_weight + mask.hidden_bias, 0.0)
        chance = 1.0 / (1.0 + np.exp(-(hidden @ mask.out_weight + mask.out_bias)))
        np.testing.assert_allclose(expected.ravel(), chance, rtol=1e-4, atol=1e-6)
    weights = mask.weights(maps)
    np.testing.assert_allclose(weights, np.clip((found - mask.low) / (mask.high - mask.low), 0, 1))


def test_a_fitted_mask_keeps_people_and_drops_background() -> None:
    maps, targets = generated(0)
    cells = mask_cells(maps, targets, np.zeros(CHANNELS), np.ones(CHANNELS), seed=0)
    assert len(cells.labels) <= 2 * CELLS_PER_CLASS * len(maps) and 0 < cells.labels.mean() < 1
    assert set(np.unique(cells.pictures)) <= set(range(len(maps)))
    mask = fit_people_mask(cells, seed=0)
    assert mask.settings["cells"] == len(cells.labels) and mask.settings["validation_accuracy"] > 0.9
    fresh_maps, fresh_targets = generated(1, pictures=6)
    weights = mask.weights(np.stack(fresh_maps))
    labels = np.stack([cell_labels(target) for target in fresh_targets])
    assert weights[labels == 1].mean() > 0.8
    assert weights[labels == 0].mean() < 0.1
    # A mask fitted without some pictures draws none of their cells.
    keep = np.arange(len(maps)) % 4 != 0
    assert not np.isin(cells.of(keep).pictures, np.flatnonzero(~keep)).any()


def test_a_mask_needs_both_kinds_of_cells() -> None:
    maps, _ = generated(0, pictures=3)
    empty = [np.zeros(item.shape[1:]) for item in maps]
    with pytest.raises(ValueError, match="cells of people and of background"):
        fit_people_mask(mask_cells(maps, empty, np.zeros(CHANNELS), np.ones(CHANNELS)))


def test_the_head_keeps_its_density_in_proportion_specialists_untouched() -> None:
    head = random_head(channels=CHANNELS)
    mask = random_mask()
    maps = np.random.default_rng(2).normal(1.0, 2.0, size=(2, CHANNELS, 9, 13)).astype(np.float32)
    masked = replace(head, people_mask=mask)
    np.testing.assert_allclose(masked.density(maps), head.density(maps) * mask.weights(maps), rtol=1e-9)
    assert np.all(masked.density(maps) <= head.density(maps) + 1e-12)


def test_the_mask_round_trips_as_version_4_and_plain_heads_keep_their_version() -> None:
    head = replace(random_head(channels=CHANNELS), people_mask=random_mask())
    document = conv_head_to_document(head)
    assert document["format_version"] == FORMAT_VERSION == 4
    read = conv_head_from_document(document, "m.npz")
    maps = np.random.default_rng(4).normal(size=(1, CHANNELS, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(read.density(maps), head.density(maps), rtol=1e-6)
    assert read.people_mask.context == 2 and read.people_mask.low == head.people_mask.low
    plain = conv_head_to_document(random_head(channels=CHANNELS))
    assert plain["format_version"] == 1 and "people_mask" not in plain
    assert conv_head_from_document(plain, "old.npz").people_mask is None


def _edit(path: tuple, value) -> callable:
    def apply(document: dict) -> None:
        place = document["people_mask"]
        for key in path[:-1]:
            place = place[key]
        place[path[-1]] = value

    return apply


def _array(values) -> dict:
    from counting.heads.density.sections import encode_array

    return encode_array(np.asarray(values, dtype=float))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda document: document.update(format_version=3), "needs format version 4"),
        (_edit(("low",), 0.99), "low and high"),
        (_edit(("high",), 1.5), "low and high"),
        (_edit(("context",), 99), "context must be an integer"),
        (_edit(("arrays", "out_bias"), _array([np.nan])), "finite floats"),
        (_edit(("arrays", "hidden_weight"), _array(np.full((10, 6), 1e9))), r"within 1e\+06"),
        (_edit(("arrays", "hidden_weight"), _array(np.ones((9, 6)))), "hidden_weight has shape"),
        (_edit(("arrays", "x_scale"), _array(np.zeros(CHANNELS))), "x_scale must be at least"),
        (lambda document: document["people_mask"]["arrays"].pop("out_weight"), "arrays must be"),
        (lambda document: document.update(people_mask=[1, 2]), "must be a mapping"),
    ],
)
def test_a_tampered_mask_is_one_line_naming_the_file(edit, message: str) -> None:
    document = copy.deepcopy(conv_head_to_document(replace(random_head(channels=CHANNELS), people_mask=random_mask())))
    edit(document)
    with pytest.raises(DensityHeadError, match=message) as raised:
        conv_head_from_document(document, "tampered.npz")
    assert str(raised.value).startswith("tampered.npz: conv density head:") and "\n" not in str(raised.value)


def test_a_copys_cells_belong_to_its_picture_and_leave_with_it() -> None:
    """The heads train on grayscale and degraded copies beside their pictures: the mask draws the
    copies' cells too, owned by their picture, so a fold left out takes its copies with it."""
    maps, targets = generated(0, pictures=6)
    copies = [item[::-1].copy() for item in maps]  # another reading of the same pictures
    cells = mask_cells(maps + copies, targets * 2, np.zeros(CHANNELS), np.ones(CHANNELS), pictures=list(range(6)) * 2)
    alone = mask_cells(maps, targets, np.zeros(CHANNELS), np.ones(CHANNELS))
    assert set(np.unique(cells.pictures)) == set(range(6)) and len(cells.labels) > len(alone.labels)
    kept = cells.of(np.arange(6) != 2)
    assert 2 not in kept.pictures and len(kept.labels) < len(cells.labels)
    with pytest.raises(ValueError, match="picture indices"):
        mask_cells(maps, targets, np.zeros(CHANNELS), np.ones(CHANNELS), pictures=[0, 1])
