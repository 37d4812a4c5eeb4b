"""The sparse gate (counting.heads.crowd.sparse_gate): fitting, routing, its model-file section, and the
familiarity a training picture gets without its own reference."""

from __future__ import annotations

import numpy as np
import pytest

from counting.features.detector.descriptor import QUANTITIES, THRESHOLDS
from counting.heads.crowd.sparse_gate import SparseGate, SparseGateError, fit_sparse_gate, gate_features
from counting.heads.familiarity import fit_familiarity


def _pictures(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sparse photos (0-12 people) where the head over-counts textures and the detector is right
    at score 0.3, and crowds (40-900) where the head is right and the detector saturates."""
    rng = np.random.default_rng(seed)
    sparse = rng.random(n) < 0.5
    truth = np.where(sparse, rng.integers(0, 13, n), rng.integers(40, 900, n)).astype(float)
    head = np.where(sparse, truth + rng.gamma(1.0, 30.0, n), truth * rng.normal(1.0, 0.1, n))
    familiarity = np.where(sparse, rng.uniform(0.01, 0.3, n), rng.uniform(0.2, 1.0, n))
    persons = np.zeros((n, len(QUANTITIES)))
    for k, threshold in enumerate(THRESHOLDS):
        # Lower thresholds find extra false people; at 0.3 the sparse counts are exact.
        extra = np.round(max(0.0, 0.3 - threshold) * 20 * rng.random(n))
        seen = np.where(sparse, truth + extra, np.minimum(100, rng.integers(0, 30, n)))
        persons[:, k] = np.sqrt(seen)
    persons[:, -2] = np.sqrt(truth.clip(0, 40) * 0.6)
    persons[:, -1] = np.sqrt(np.where(sparse, truth, 40 + truth / 20))
    # Familiarity axes: the first two tell the regimes apart, the rest is noise.
    projected = rng.normal(size=(n, 16))
    projected[:, :2] += np.where(sparse, 1.5, -1.5)[:, None]
    return head, persons, familiarity, projected, truth


def test_the_gate_sends_sparse_pictures_to_the_detector_count_at_the_best_threshold() -> None:
    head, persons, familiarity, projected, truth = _pictures(300)
    gate, oof = fit_sparse_gate(head, persons, familiarity, projected, truth)
    assert THRESHOLDS[gate.count_index] == 0.3
    assert gate.settings["n_sparse"] == int((truth <= 20).sum())
    assert 0 < gate.settings["n_detector_closer"] <= gate.settings["n_sparse"] + 5
    new_head, new_persons, new_familiarity, new_projected, new_truth = _pictures(200, seed=1)
    counts, sparse = gate.apply(new_head, new_persons, new_familiarity, new_projected)
    few = new_truth <= 20
    assert np.mean(sparse == few) > 0.95
    # Sparse pictures get the detector's count (exact at 0.3 here), crowds keep the head's.
    assert np.mean(np.abs(counts - new_truth)[few & sparse]) == 0.0
    np.testing.assert_array_equal(counts[~sparse], new_head[~sparse])
    assert np.mean(np.abs(counts - new_truth)[few]) < np.mean(np.abs(new_head - new_truth)[few]) / 5
    # Out-of-fold counts: every picture routed by a fit without it.
    assert oof.shape == truth.shape and np.isfinite(oof).all()
    assert np.mean(np.abs(oof - truth)[truth <= 20]) < np.mean(np.abs(head - truth)[truth <= 20]) / 5
    # with_sent: the same fit, and which pictures the out-of-fold fits sent to the detector
    again, same, sent = fit_sparse_gate(head, persons, familiarity, projected, truth, with_sent=True)
    np.testing.assert_array_equal(same, oof)
    np.testing.assert_array_equal(again.coef, gate.coef)
    np.testing.assert_array_equal(same[sent], gate.detector_counts(persons[sent]))
    np.testing.assert_array_equal(same[~sent], head[~sent])
    assert np.mean(sent == (truth <= 20)) > 0.9


def test_the_screen_skips_the_detector_only_where_the_gate_could_not_say_sparse() -> None:
    head, persons, familiarity, projected, truth = _pictures(300)
    gate, _ = fit_sparse_gate(head, persons, familiarity, projected, truth)
    assert gate.screen is not None and 0.0 < gate.screen.threshold < 0.5
    new_head, new_persons, new_familiarity, new_projected, new_truth = _pictures(400, seed=2)
    wanted = gate.needs_detector(new_head, new_familiarity, new_projected)
    counts, sparse = gate.apply(new_head, new_persons, new_familiarity, new_projected)
    # Every picture the gate sends to the detector was let through by the screen ...
    assert not (sparse & ~wanted).any()
    # ... and the screen spares the detector on most crowds.
    assert np.mean(~wanted[new_truth > 20]) > 0.5
    # Pictures without familiarity never need it (their count is the head's).
    unknown = new_familiarity.copy()
    unknown[:5] = np.nan
    assert not gate.needs_detector(new_head, unknown, new_projected)[:5].any()
    again = SparseGate.from_document(gate.to_document())
    np.testing.assert_array_equal(again.needs_detector(new_head, new_familiarity, new_projected), wanted)


def test_pictures_without_familiarity_keep_the_heads_count() -> None:
    head, persons, familiarity, projected, truth = _pictures(120)
    gate, _ = fit_sparse_gate(head, persons, familiarity, projected, truth)
    unknown = familiarity.copy()
    unknown[:10] = np.nan
    counts, sparse = gate.apply(head, persons, unknown, projected)
    assert not sparse[:10].any()
    np.testing.assert_array_equal(counts[:10], head[:10])


def test_the_section_round_trips_and_damaged_sections_are_refused() -> None:
    head, persons, familiarity, projected, truth = _pictures(120)
    gate, _ = fit_sparse_gate(head, persons, familiarity, projected, truth)
    again = SparseGate.from_document(gate.to_document())
    features = gate_features(head, persons, familiarity, projected[:, : gate.axes])
    np.testing.assert_allclose(again.probability(features), gate.probability(features), rtol=1e-12)
    assert again.head_limit == gate.head_limit > 0
    document = gate.to_document()
    older = SparseGate.from_document({k: v for k, v in document.items() if k != "head_limit"})
    assert older.head_limit is None and older.within_limit(np.array([1e9])).all()  # a gate fitted before it
    # A gate edited in Python refuses such a limit at once (it was saved, then its file refused).
    from dataclasses import replace

    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(SparseGateError, match="not a positive count"):
            replace(gate, head_limit=bad)
    for broken, reason in [
        (document | {"coef": document["coef"][:-1]}, "numbers per array"),
        (document | {"scale": [0.0] * len(document["scale"])}, "positive scales"),
        (document | {"intercept": "x"}, "not numeric"),
        (document | {"count_index": len(THRESHOLDS)}, "not a detector threshold"),
        (document | {"axes": 17}, "familiarity axes"),
        (document | {"head_limit": -3.0}, "not a positive count"),
        (document | {"head_limit": "many"}, "not numeric"),
        (document | {"head_limit": "300"}, "not a number"),
        (document | {"head_limit": True}, "not a number"),
        (document | {"head_limit": float("nan")}, "not a positive count"),
        (document | {"screen": document["screen"] | {"threshold": 1.5}}, "threshold in"),
        (document | {"screen": document["screen"] | {"coef": [1.0]}}, "screen needs"),
        ({k: v for k, v in document.items() if k != "mean"}, "incomplete"),
        ([1, 2], "not a JSON object"),
    ]:
        with pytest.raises(SparseGateError, match=reason):
            SparseGate.from_document(broken)


def test_no_picture_is_handed_over_beyond_the_heads_limit() -> None:
    """The limit: twice the largest head count of a sparse fitting picture the detector counted
    closer. A dense picture the linear gate would send (odd familiarity) keeps the head's count."""
    from counting.heads.crowd.sparse_gate import HEAD_LIMIT_FACTOR

    head, persons, familiarity, projected, truth = _pictures(300)
    gate, oof, sent = fit_sparse_gate(head, persons, familiarity, projected, truth, with_sent=True)
    detector = np.rint(np.square(persons[:, gate.count_index]))
    closer = (np.abs(detector - truth) < np.abs(head - truth)) & (truth <= 20)
    assert gate.head_limit == pytest.approx(HEAD_LIMIT_FACTOR * head[closer].max())
    assert not sent[head > gate.head_limit].any()
    # A crowd that looks sparse to every other input: over the limit it keeps the head's count.
    sparse = np.flatnonzero(sent)[0]
    odd = (np.array([gate.head_limit * 1.5]), persons[[sparse]], familiarity[[sparse]], projected[[sparse]])
    assert gate.probability(gate_features(*odd[:3], odd[3][:, : gate.axes]))[0] > 0.5
    counts, handed = gate.apply(*odd)
    assert not handed[0] and counts[0] == odd[0][0]
    # The gate says sparse, the limit keeps the head's count: with the limit lifted it is handed
    # over, which makes its count disputed (module docstring), and gives the other reading.
    lifted, taken = gate.apply(*odd, limited=False)
    assert taken[0] and lifted[0] == gate.detector_counts(odd[1])[0]
    below = (np.array([gate.head_limit * 0.9]), *odd[1:])
    if gate.probability(gate_features(*below[:3], below[3][:, : gate.axes]))[0] > 0.5:
        assert gate.apply(*below)[1][0]
    # Over the limit where the gate says crowded, or without familiarity (no verdict): kept either way.
    crowd = np.flatnonzero(~sent & (head > gate.head_limit))[0]
    assert not gate.apply(head[[crowd]], persons[[crowd]], familiarity[[crowd]], projected[[crowd]], limited=False)[1][
        0
    ]
    assert not gate.apply(odd[0], odd[1], np.array([np.nan]), odd[3], limited=False)[1][0]
    # Read tile by tile, the limit lifted hands over exactly the tiles over it (those disputed).
    shares = [np.array([0.5, 0.5]), np.array([0.9, 0.1])]
    rows = [np.repeat(odd[1], 2, axis=0)] * 2
    heads = np.array([gate.head_limit * 1.5, gate.head_limit * 1.5])
    tiles = (np.repeat(odd[2], 2), np.repeat(odd[3], 2, axis=0))
    _, handed = gate.apply_tiles(heads, shares, rows, *tiles)
    _, lifted = gate.apply_tiles(heads, shares, rows, *tiles, limited=False)
    assert [list(h) for h in handed] == [[True, True], [False, True]]  # each half 0.75 of the limit; 1.35 over
    assert [list(h) for h in lifted] == [[True, True], [True, True]]


def test_the_heads_limit_comes_from_the_pictures_not_their_copies() -> None:
    """Copies where the heads count hundreds more (grayscale grass) and the detector is as right
    as on the picture: pooled, they would raise the limit; marked as copies, they leave it."""
    from counting.heads.crowd.sparse_gate import HEAD_LIMIT_FACTOR

    head, persons, familiarity, projected, truth = _pictures(300)
    n = len(truth)
    wild = np.where(truth <= 20, head + 2000.0, head)
    rows = tuple(
        np.concatenate(pair)
        for pair in (
            (head, wild),
            (persons, persons),
            (familiarity, familiarity),
            (projected, projected),
            (truth, truth),
        )
    )
    groups = np.tile(np.arange(n), 2)
    pooled, _ = fit_sparse_gate(*rows, groups=groups)
    gate, oof = fit_sparse_gate(*rows, groups=groups, originals=np.arange(2 * n) < n)
    detector = np.rint(np.square(persons[:, gate.count_index]))
    closer = (np.abs(detector - truth) < np.abs(head - truth)) & (truth <= 20)
    assert gate.head_limit == pytest.approx(HEAD_LIMIT_FACTOR * head[closer].max())
    assert pooled.head_limit > gate.head_limit + 2000.0
    # The wild copies keep the heads' count: beyond the limit the detector is not asked.
    beyond = np.flatnonzero(wild > gate.head_limit) + n
    assert len(beyond) and np.array_equal(oof[beyond], rows[0][beyond])


def test_rows_of_photos_are_fitted_and_routed_as_their_photos() -> None:
    """Pictures wider than 2:1 (sparse_gate, "Wide pictures"): a row of four photos has four
    times their head count and people. Fitted and applied with ``photos``, the gate reads the
    average photo: a row goes where its photos go. The limit is still set from whole pictures'
    head counts (a row of textures is evidence that so high a count can be sparse)."""
    from counting.heads.crowd.sparse_gate import HEAD_LIMIT_FACTOR, per_photo

    head, persons, familiarity, projected, truth = _pictures(300)
    rows = np.arange(len(truth)) < 60  # the first 60 pictures are rows of four such photos
    photos = np.where(rows, 4, 1)
    wide = (np.where(rows, 4 * head, head), np.where(rows[:, None], 2 * persons, persons))
    gate, oof = fit_sparse_gate(*wide, familiarity, projected, np.where(rows, 4 * truth, truth), photos=photos)
    each = per_photo(*wide, photos)[0]
    detector = np.rint(np.square(wide[1][:, gate.count_index]))
    closer = np.abs(detector - np.where(rows, 4 * truth, truth)) < np.abs(wide[0] - np.where(rows, 4 * truth, truth))
    closer &= np.where(rows, 4 * truth, truth) <= 20
    assert gate.head_limit == pytest.approx(HEAD_LIMIT_FACTOR * wide[0][closer].max())
    assert gate.head_limit > HEAD_LIMIT_FACTOR * each[closer].max()
    # New rows of four photos go where the photos themselves go, and get four times their count.
    new_head, new_persons, new_familiarity, new_projected, new_truth = _pictures(200, seed=1)
    alone, alone_sparse = gate.apply(new_head, new_persons, new_familiarity, new_projected)
    four = np.full(200, 4)
    counts, sparse = gate.apply(4 * new_head, 2 * new_persons, new_familiarity, new_projected, photos=four)
    np.testing.assert_array_equal(sparse, alone_sparse)
    np.testing.assert_allclose(counts, 4 * alone)
    assert np.mean(sparse == (new_truth <= 20)) > 0.95


def test_a_fit_needs_both_kinds_of_picture() -> None:
    head, persons, familiarity, projected, truth = _pictures(60)
    with pytest.raises(ValueError, match="some of them sparse"):
        fit_sparse_gate(head, persons, familiarity, projected, np.full_like(truth, 500.0))
    with pytest.raises(ValueError, match="where the detector counts better and some where it does not"):
        fit_sparse_gate(truth.copy(), persons, familiarity, projected, truth)  # a perfect head


def test_sparse_scenes_the_head_counts_better_keep_the_heads_count() -> None:
    """A camera of 14-20 small people (Mall): sparse by the count, but the detector misses half of
    them and the head is close. The gate learns where the detector is the closer one, weighted by
    the error it saves, so it leaves such frames to the head (a "<= 20 people" label sent them to
    the detector)."""
    head, persons, familiarity, projected, truth = _pictures(300)
    rng = np.random.default_rng(5)
    n = 150
    small = rng.integers(14, 21, n).astype(float)
    camera_persons = np.tile(np.sqrt(np.round(small / 2))[:, None], (1, persons.shape[1]))
    camera_projected = rng.normal(size=(n, 16))
    camera_projected[:, 2:4] += 2.0  # the camera's own look
    gate, _ = fit_sparse_gate(
        np.concatenate([head, small + rng.normal(0, 1.5, n)]),
        np.concatenate([persons, camera_persons]),
        np.concatenate([familiarity, rng.uniform(0.5, 1.0, n)]),
        np.concatenate([projected, camera_projected]),
        np.concatenate([truth, small]),
    )
    assert gate.settings["n_sparse"] > gate.settings["n_detector_closer"]
    frames = rng.integers(14, 21, 100).astype(float)
    view = rng.normal(size=(100, 16))
    view[:, 2:4] += 2.0
    frame_persons = np.tile(np.sqrt(np.round(frames / 2))[:, None], (1, persons.shape[1]))
    _, sent = gate.apply(frames + rng.normal(0, 1.5, 100), frame_persons, rng.uniform(0.5, 1.0, 100), view)
    assert sent.mean() < 0.05
    # The everyday photos still go to the detector.
    new_head, new_persons, new_familiarity, new_projected, new_truth = _pictures(200, seed=1)
    _, sent = gate.apply(new_head, new_persons, new_familiarity, new_projected)
    assert sent[new_truth <= 20].mean() > 0.9


def test_training_pictures_scored_without_their_own_reference() -> None:
    rng = np.random.default_rng(0)
    probes = rng.normal(size=(200, 6))
    familiarity = fit_familiarity(probes)
    plain = familiarity.scores(probes)
    honest = familiarity.scores_without_self(probes)
    # With its own reference at distance 0 a training picture looks more familiar than it is.
    assert np.mean(honest) < np.mean(plain)
    assert (honest <= plain + 1e-12).all()
    # A new picture has no reference of its own: both give the same score.
    fresh = rng.normal(size=(20, 6))
    np.testing.assert_array_equal(familiarity.scores_without_self(fresh), familiarity.scores(fresh))


def test_a_copy_is_scored_without_its_originals_reference() -> None:
    rng = np.random.default_rng(0)
    probes = rng.normal(size=(200, 6))
    familiarity = fit_familiarity(probes)
    copies = probes + rng.normal(scale=1e-3, size=probes.shape)  # a copy lies next to its original
    # Against every reference, a copy's nearest neighbour is its own original.
    assert np.mean(familiarity.scores(copies)) > np.mean(familiarity.scores_without(copies, probes)) + 0.1
    # Without it, the copy scores as its original does without itself (the same other neighbours).
    np.testing.assert_allclose(
        familiarity.scores_without(copies, probes), familiarity.scores_without_self(probes), atol=0.02
    )
    # Pictures that are not training pictures lose no reference.
    fresh = rng.normal(size=(20, 6))
    np.testing.assert_array_equal(familiarity.scores_without(fresh, fresh + 5.0), familiarity.scores(fresh))


def test_copies_leave_the_detector_threshold_to_the_originals_and_are_held_out_with_them() -> None:
    head, persons, familiarity, projected, truth = _pictures(300)
    n = len(truth)
    # Copies whose detector is exact at 0.2 instead of 0.3: chosen on every row the threshold moves.
    copied = persons.copy()
    index = {float(t): k for k, t in enumerate(THRESHOLDS)}
    copied[:, index[0.2]] = persons[:, index[0.3]]
    copied[:, index[0.3]] = np.sqrt(np.square(persons[:, index[0.3]]) * 0.5)
    rows = (
        np.concatenate([head, head]),
        np.concatenate([persons, copied]),
        np.concatenate([familiarity, familiarity]),
        np.concatenate([projected, projected]),
        np.concatenate([truth, truth]),
    )
    pooled, _ = fit_sparse_gate(*rows)
    assert THRESHOLDS[pooled.count_index] != 0.3
    groups = np.tile(np.arange(n), 2)
    gate, oof, sent = fit_sparse_gate(*rows, groups=groups, originals=np.arange(2 * n) < n, with_sent=True)
    assert THRESHOLDS[gate.count_index] == 0.3
    assert oof.shape == (2 * n,) and np.isfinite(oof).all()

    # Held out together: exact copies land in their original's fold, so one fit routes both and
    # their out-of-fold routes agree (without groups they fall in different folds, and some differ).
    # Heads shuffled between pictures: many routes are close calls that depend on the fit.
    shuffled = np.random.default_rng(1).permutation(head)
    twins = tuple(np.concatenate([part, part]) for part in (shuffled, persons, familiarity, projected, truth))
    _, _, apart = fit_sparse_gate(*twins, with_sent=True, seed=3)
    _, _, together = fit_sparse_gate(*twins, with_sent=True, seed=3, groups=groups)
    np.testing.assert_array_equal(together[:n], together[n:])
    assert (apart[:n] != apart[n:]).any()


# --------------------------------------------------------------------------- the shipped crowd model
COCO = "coco-voc20/VOCdevkit/VOC2007/JPEGImages"


@pytest.fixture(scope="module")
def crowd_model(detector_files):
    from pathlib import Path

    from counting.model.counting_model import load_model

    return load_model(Path(__file__).resolve().parents[2] / "models" / "crowd.npz")


@pytest.mark.slow
def test_the_shipped_crowd_model_hands_an_empty_texture_photo_to_the_detector(crowd_model, shared_data) -> None:
    """coco-voc20 000000567982 holds nobody; the density head alone counts 225 people in it (a
    texture it takes for a crowd). A ShanghaiTech B street keeps the head's count."""
    from dataclasses import replace

    photos = [str(shared_data / COCO / "000000567982.jpg"), str(shared_data / "shanghaitech-B-train/images/IMG_10.jpg")]
    gated = crowd_model.count_paths(photos)
    alone = replace(crowd_model, sparse_gate=None).count_paths(photos)
    assert alone.counts[0] > 200
    assert gated.counts[0] <= 1
    assert gated.low[0] == 0.0 and gated.high[0] < 10
    assert gated.counts[1] == pytest.approx(alone.counts[1], abs=1e-9)
    assert 150 < gated.counts[1] < 200
    np.testing.assert_array_equal(gated.counted_by, ["detector", "density"])
    assert alone.counted_by is None


@pytest.mark.slow
def test_files_and_in_memory_pictures_get_the_same_gated_counts(crowd_model, shared_data) -> None:
    """The detector reads the prepared backbone input on every path, so a photo counted from its
    file (count, evaluate) and from pixels (video, serve, counting.count on arrays) agree."""
    from counting.data.imaging import load_image

    names = ["000000567982.jpg", "000000000036.jpg", "000000002299.jpg"]
    paths = [str(shared_data / COCO / name) for name in names]
    from_files = crowd_model.count_paths(paths).counts
    from_pixels = np.concatenate([crowd_model.count_images([np.asarray(load_image(path))]) for path in paths])
    np.testing.assert_allclose(from_pixels, from_files, rtol=0, atol=1e-6)
    # The Python API's records say which route counted each picture, for files and arrays alike.
    import counting

    arrays = counting.count([np.asarray(load_image(path)) for path in paths], model=crowd_model)
    files = counting.count(paths, model=crowd_model)
    assert [row["counted_by"] for row in arrays.rows] == [row["counted_by"] for row in files.rows]
    assert [row["counted_by"] for row in files.rows][:2] == ["detector", "detector"]


def test_without_the_detector_the_model_counts_by_its_head_with_one_warning(monkeypatch, shared_data) -> None:
    from dataclasses import replace
    from pathlib import Path

    from counting.core.errors import BackboneError
    from counting.features.detector import evidence
    from counting.model.counting_model import load_model

    model = load_model(Path(__file__).resolve().parents[2] / "models" / "crowd.npz")

    def missing(*args, **kwargs):
        raise BackboneError("the detector's model files are missing: run `counting models fetch`")

    monkeypatch.setattr(evidence, "person_evidence", missing)
    photo = [str(shared_data / COCO / "000000567982.jpg")]
    with pytest.warns(RuntimeWarning, match="counting by the density head alone"):
        counts = model.count_paths(photo).counts
    np.testing.assert_allclose(counts, replace(model, sparse_gate=None).count_paths(photo).counts)


def test_model_files_with_a_damaged_or_misplaced_gate_are_refused_in_one_line(tmp_path) -> None:
    from pathlib import Path

    from counting.core.errors import ModelFileError
    from counting.model.counting_model import load_model

    models = Path(__file__).resolve().parents[2] / "models"
    crowd = load_model(models / "crowd.npz")
    assert crowd.sparse_gate is not None and crowd.sparse_gate.axes in (4, 8, 16)
    crowd.sparse_gate.scale = -crowd.sparse_gate.scale
    crowd.save(tmp_path / "negative.npz")
    with pytest.raises(ModelFileError, match=r"negative\.npz: the sparse gate needs positive scales"):
        load_model(tmp_path / "negative.npz")
    # A descriptor model has no head count to gate: a gate copied into it is refused.
    mall = load_model(models / "default.npz")
    with pytest.raises(ModelFileError, match="a sparse gate needs a one-class density head"):
        from dataclasses import replace

        replace(mall, sparse_gate=load_model(models / "crowd.npz").sparse_gate)


@pytest.mark.slow
def test_zones_and_heat_maps_of_a_photo_the_detector_counted_show_its_people(crowd_model, shared_data) -> None:
    """coco-voc20 000000000061 (3 people on elephants in a forest): the gate hands it to the
    detector (the head's map reads 52). Its zones split the detector's people by where their
    boxes' centres are, and the map drawn for it holds one person per detection: both add up to the
    count, in files and in frames."""
    from counting.apply.zones import Zone, count_frames_with_density, count_paths_in_zones
    from counting.data.imaging import load_image
    from counting.features.detector.descriptor import THRESHOLDS
    from counting.features.detector.evidence import person_evidence

    path = str(shared_data / COCO / "000000000061.jpg")
    halves = [
        Zone("left", ((0.0, 0.0), (0.5, 0.0), (0.5, 1.0), (0.0, 1.0)), relative=True),
        Zone("right", ((0.5, 0.0), (1.0, 0.0), (1.0, 1.0), (0.5, 1.0)), relative=True),
    ]
    result, records = count_paths_in_zones(crowd_model, [path], halves)
    count = result.counts[0]
    assert result.counted_by[0] == "detector" and count == 3.0
    left, right = records[path]["left"]["count"], records[path]["right"]["count"]
    assert left + right == pytest.approx(count) and left == round(left) and right == round(right)
    # The same split by the detector's own boxes.
    tensor = crowd_model.prepare_image(np.asarray(load_image(path)))
    _, (boxes,) = person_evidence([tensor], crowd_model.get_backbone().normalisation, with_boxes=True)
    counted = boxes[boxes[:, 4] >= THRESHOLDS[crowd_model.sparse_gate.count_index]]
    assert len(counted) == count
    centre = (counted[:, 0] + counted[:, 2]) / 2
    assert left == pytest.approx(float(np.sum(centre < 0.5)))
    (record,), density = count_frames_with_density(crowd_model, [np.asarray(load_image(path))], halves)
    assert record["count"] == count and density[0].sum() == pytest.approx(count)
    assert set(np.unique(density[0])) <= {0.0, 1.0, 2.0, 3.0}
    assert record["zones"]["left"]["count"] == pytest.approx(left)
    # The frame's record says the detector counted it, and whom (boxes in the frame's pixels).
    assert record["counted_by"] == "detector" and len(record["people"]) == count
    height, width = np.asarray(load_image(path)).shape[:2]
    np.testing.assert_allclose(
        np.array(record["people"])[:, :4], counted[:, :4] * [width, height, width, height], atol=0.06
    )
    street = np.asarray(load_image(shared_data / "shanghaitech-B-train/images/IMG_10.jpg"))
    (other,), _ = count_frames_with_density(crowd_model, [street], ())
    assert other["counted_by"] == "density" and "people" not in other


@pytest.mark.slow
def test_an_annotated_photo_the_detector_counted_shows_its_people_not_a_heat_map(crowd_model, shared_data) -> None:
    from counting.apply.annotated import annotated_frame
    from counting.apply.people_drawing import PEOPLE_COLOUR
    from counting.data.imaging import load_image

    rgb = np.asarray(load_image(shared_data / COCO / "000000000061.jpg"))
    record, drawn = annotated_frame(crowd_model, rgb)
    assert record["counted_by"] == "detector"
    x1, y1, x2, y2, _ = (round(value) for value in record["people"][0])
    assert tuple(drawn[y1 + 1, (x1 + x2) // 2]) == PEOPLE_COLOUR  # the box's top edge
    # Away from the boxes and the label the photo is untouched (no heat map laid over it).
    original = rgb[:, :, ::-1]
    assert np.array_equal(drawn[-60:, -200:], original[-60:, -200:])


@pytest.mark.slow
def test_an_annotated_photo_shows_a_few_peoples_heat_map_on_its_own_scale(crowd_model, shared_data) -> None:
    # A school class photo the heads count (about 40 children; 81 counted, ~25 of them in the
    # brick wall above). On the model's scale (1.4 people a cell, set by dense crowds) its faces'
    # 0.1-0.3 people a cell left the photo as it was; count --annotated draws each photo on its own.
    from counting.apply.annotated import annotated_frame
    from counting.data.imaging import load_image

    rgb = np.asarray(load_image(shared_data / COCO / "000000002299.jpg"))
    original = rgb[:, :, ::-1].astype(int)
    changed = {}
    for own_scale in (False, True):
        record, drawn = annotated_frame(crowd_model, rgb, own_scale=own_scale)
        assert record["counted_by"] == "density"
        changed[own_scale] = (np.abs(drawn.astype(int) - original).max(axis=2)[40:] > 20).mean()  # below the label
    assert changed[False] < 0.001 and changed[True] > 0.02


@pytest.mark.slow
def test_an_annotated_video_draws_the_people_of_frames_the_detector_counted(crowd_model, shared_data, tmp_path) -> None:
    import cv2

    from counting.apply.video import count_video
    from counting.apply.zones import count_frames_with_density
    from counting.data.imaging import load_image

    rgb = np.asarray(load_image(shared_data / COCO / "000000000061.jpg"))
    height, width = rgb.shape[:2]
    source = tmp_path / "photo.avi"
    # Lossless (FFV1): OpenCV's MJPG blurs the forest enough for the head to read 73 people in it.
    writer = cv2.VideoWriter(str(source), cv2.VideoWriter_fourcc(*"FFV1"), 5.0, (width, height))
    for _ in range(2):
        writer.write(np.ascontiguousarray(rgb[:, :, ::-1]))
    writer.release()
    run = count_video(
        crowd_model,
        str(source),
        output_video=tmp_path / "drawn.avi",
        keep_records=True,
        records_path=tmp_path / "v.csv",
    )
    (record,), _ = count_frames_with_density(crowd_model, [rgb], ())
    assert record["counted_by"] == "detector"
    assert [row["count"] for row in run.records] == [record["count"]] * 2 == [len(record["people"])] * 2
    # The rows say so, as count's do (columns only a gated model's rows have).
    assert [row["counted_by"] for row in run.records] == ["detector", "detector"]
    header, *rows = (tmp_path / "v.csv").read_text().splitlines()
    assert header.split(",")[-2:] == ["counted_by", "disputed"]
    assert all(row.endswith(",detector,False") for row in rows)
    x1, y1, x2, _, _ = (round(value) for value in record["people"][0])
    ok, frame = cv2.VideoCapture(str(tmp_path / "drawn.avi")).read()
    assert ok
    edge = frame[y1 : y1 + 2, x1 + 4 : x2 - 4].reshape(-1, 3).astype(float).mean(axis=0)
    assert edge[1] > 150 and edge[1] - max(edge[0], edge[2]) > 60, edge  # the green box's top edge
