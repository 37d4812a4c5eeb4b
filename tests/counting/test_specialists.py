"""Specialist heads and their router (counting.heads.crowd.routing): the mixture of densities,
the router's fit, and the model-file section (format version 3)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from counting.heads.crowd.routing import MIN_WEIGHT, SetRouter, fit_set_router
from counting.heads.density.conv.head import ConvDensityHead, parameter_shapes
from counting.heads.density.conv.persistence import conv_head_from_document, conv_head_to_document
from counting.heads.density.persistence import DensityHeadError
from counting.heads.density.sections import encode_array
from counting.heads.familiarity import map_statistics

CHANNELS = 5


def random_head(seed: int, members: int = 1) -> ConvDensityHead:
    rng = np.random.default_rng(seed)

    def weights() -> list[np.ndarray]:
        return [rng.normal(scale=0.3, size=shape) for shape in parameter_shapes(CHANNELS, 4, 2)]

    return ConvDensityHead(
        layers=("block4", "block7"),
        width=4,
        depth=2,
        x_mean=rng.normal(size=CHANNELS),
        x_scale=rng.uniform(0.5, 2.0, CHANNELS),
        weights=weights(),
        more_weights=[weights() for _ in range(members - 1)],
        output_scale=10.0,
        settings={"grid": [2, 2]},
    )


def styled_maps(rng: np.random.Generator, n: int, offset: float) -> np.ndarray:
    """Maps whose channel means sit at ``offset``: pictures of one 'set'."""
    return rng.normal(loc=offset, size=(n, CHANNELS, 6, 7))


def two_set_router(rng: np.random.Generator) -> SetRouter:
    maps = np.concatenate([styled_maps(rng, 40, -1.0), styled_maps(rng, 40, 1.0)])
    return fit_set_router(map_statistics(maps), np.array(["street"] * 40 + ["photo"] * 40))


def test_the_router_learns_which_set_a_picture_resembles() -> None:
    rng = np.random.default_rng(0)
    router = two_set_router(rng)
    assert router.classes == ("photo", "street")
    probabilities = router.probabilities(
        map_statistics(np.concatenate([styled_maps(rng, 5, -1), styled_maps(rng, 5, 1)]))
    )
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    assert np.all(probabilities[:5, 1] > 0.9) and np.all(probabilities[5:, 0] > 0.9)
    assert router.settings["C"] in (0.01, 0.1, 1.0, 10.0)
    assert router.settings["pictures"] == {"photo": 40, "street": 40}


def test_the_density_is_the_router_weighted_mixture_of_general_and_specialist() -> None:
    rng = np.random.default_rng(1)
    general, specialist = random_head(0, members=2), random_head(3)
    router = two_set_router(rng)
    routed = replace(general, specialists={"street": specialist}, router=router)
    maps = np.concatenate([styled_maps(rng, 3, -1.0), styled_maps(rng, 3, 1.0), styled_maps(rng, 1, 0.0)])
    share = router.probabilities(map_statistics(maps))[:, router.classes.index("street")]
    weights = np.stack([1 - share, share], axis=1)
    weights = np.where(weights >= MIN_WEIGHT, weights, 0.0)
    weights /= weights.sum(axis=1, keepdims=True)
    assert np.all(weights[:3, 0] < 0.01)
    expected = weights[:, 0, None, None] * general.density(maps) + weights[:, 1, None, None] * specialist.density(maps)
    np.testing.assert_allclose(routed.density(maps), expected, rtol=1e-6, atol=1e-9)
    # street-like pictures are counted (almost) by the specialist, the others by the general head
    assert np.allclose(routed.density(maps[:3]), specialist.density(maps[:3]), rtol=0.1)
    assert np.allclose(routed.density(maps[3:6]), general.density(maps[3:6]), rtol=0.01)
    # a head whose weight is negligible is not run, and the others' weights are rescaled
    certain = replace(router, intercept=router.intercept + np.array([0.0, 50.0]))
    weights = certain.mixture(map_statistics(maps), ["street"])
    assert np.all(weights[:, 0] == 0) and np.all(weights[:, 1] == 1)
    np.testing.assert_allclose(replace(routed, router=certain).density(maps), specialist.density(maps), rtol=1e-12)
    # one picture at a time gives what the batch gives (the router reads each picture's own maps)
    np.testing.assert_allclose(routed.density(maps[6:7]), routed.density(maps)[6:7], rtol=1e-6)


def test_a_router_of_two_sets_is_the_binary_logistic_regression() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(2)
    statistics = map_statistics(np.concatenate([styled_maps(rng, 30, -0.5), styled_maps(rng, 30, 0.5)]))
    labels = np.array(["a"] * 30 + ["b"] * 30)
    router = fit_set_router(statistics, labels)
    standard = (statistics - router.mean) / router.scale
    reference = LogisticRegression(C=router.settings["C"], max_iter=5000).fit(standard, labels)
    np.testing.assert_allclose(router.probabilities(statistics), reference.predict_proba(standard), atol=1e-6)


def test_specialists_survive_the_model_file_and_tampering_is_refused() -> None:
    rng = np.random.default_rng(4)
    routed = replace(random_head(0, members=2), specialists={"street": random_head(3)}, router=two_set_router(rng))
    document = json.loads(json.dumps(conv_head_to_document(routed)))
    assert document["format_version"] == 3
    back = conv_head_from_document(document, "m.npz")
    maps = styled_maps(rng, 4, -1.0)
    np.testing.assert_allclose(back.density(maps), routed.density(maps), rtol=1e-12)
    assert list(back.specialists) == ["street"] and back.router.classes == ("photo", "street")
    # a head without specialists is written as before (version 2 for an ensemble)
    assert conv_head_to_document(random_head(0, members=2))["format_version"] == 2

    def broken(edit) -> str:
        copy = json.loads(json.dumps(document))
        edit(copy)
        with pytest.raises(DensityHeadError) as caught:
            conv_head_from_document(copy, "m.npz")
        return str(caught.value)

    assert "need format version 3, the file says 2" in broken(lambda d: d.update(format_version=2))
    assert "no class for specialist 'lane'" in broken(
        lambda d: d["specialists"].update(lane=d["specialists"]["street"])
    )
    assert "router coef has shape" in broken(lambda d: d["router"]["arrays"].update(coef=d["router"]["arrays"]["mean"]))
    assert "router must be a mapping" in broken(lambda d: d.update(router=None))
    huge = encode_array(np.full((2, 2 * CHANNELS), 1e300))
    assert "router coef holds values beyond" in broken(lambda d: d["router"]["arrays"].update(coef=huge))
    tiny = encode_array(np.full(2 * CHANNELS, 1e-300))
    assert "router scale must be at least" in broken(lambda d: d["router"]["arrays"].update(scale=tiny))
    assert "specialist 'street'" in broken(lambda d: d["specialists"]["street"].update(width=0))
    other = conv_head_to_document(replace(random_head(5), layers=("block4", "block10")))
    assert "reads other maps" in broken(lambda d: d["specialists"].update(street=other))


def test_a_network_overflowing_to_minus_infinity_or_absurd_densities_is_refused_on_load() -> None:
    """softplus(-inf) is a finite 0: a member whose last conv overflows to -inf on the probes
    passed the load check and gave NaN counts on real maps (hostile pass, 2026-11-27); a final
    bias of 1e30 gave counts of 1e31."""
    head = random_head(0)
    weights = [value * 1e10 for value in head.weights]
    # ReLU outputs are >= 0 and the last conv is negative: it goes to -inf, never above 0
    weights[-2], weights[-1] = -np.abs(weights[-2]), -np.abs(head.weights[-1])
    with pytest.raises(DensityHeadError, match="overflow inside the network"):
        conv_head_from_document(conv_head_to_document(replace(head, weights=weights)), "m.npz")
    biased = [*head.weights[:-1], np.array([1e30])]
    with pytest.raises(DensityHeadError, match="people per cell on typical maps"):
        conv_head_from_document(conv_head_to_document(replace(head, weights=biased)), "m.npz")
    # inside a specialist, the file names it
    routed = replace(
        random_head(1),
        specialists={"street": replace(head, weights=weights)},
        router=two_set_router(np.random.default_rng(5)),
    )
    with pytest.raises(DensityHeadError, match="specialist 'street'.*overflow inside the network"):
        conv_head_from_document(conv_head_to_document(routed), "m.npz")
