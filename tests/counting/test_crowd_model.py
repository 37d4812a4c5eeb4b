"""The general crowd model's data (the combined reader on the real shared sets), its training
route (balanced crops, thinned video frames, a small end-to-end run) and the default model path."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from counting.core import defaults
from counting.core.errors import DatasetError
from counting.data.datasets.crowd import CROWD_SETS, read_crowd
from counting.data.datasets.mall import read_mall
from counting.data.datasets.shanghaitech import read_shanghaitech
from counting.model.counting_model import default_model_path
from counting.train.crowd import balanced_weights, thinned_train_part

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crowd(shared_data: Path):
    return read_crowd(shared_data)


@pytest.mark.slow  # reads 1,559 annotation files (ShanghaiTech's .mat files hold 200,000 dots)
def test_every_set_keeps_its_counts_and_fixed_validation_part(crowd, shared_data: Path) -> None:
    sources, splits = crowd.source_names(), crowd.splits
    sizes = {
        name: (
            int(((sources == name) & (splits == "train")).sum()),
            int(((sources == name) & (splits == "test")).sum()),
        )
        for name in CROWD_SETS
    }
    # ShanghaiTech: a seeded random quarter; Mall: frames 601-800; coco: a quarter of the 534
    # photos without a person crowd box.
    assert sizes == {
        "shanghaitech-A": (225, 75),
        "shanghaitech-B": (300, 100),
        "mall": (600, 200),
        "coco-voc20": (400, 134),
    }
    for sample in crowd.samples:
        assert sample.count == len(sample.dots)
    # The same images and counts as the sets' own readers under the same split.
    own = read_shanghaitech(shared_data / "shanghaitech-A-train", split="random:0.25:0")
    mine = crowd.of_source("shanghaitech-A")
    assert [(s.path, s.count, s.split) for s in mine.samples] == [(s.path, s.count, s.split) for s in own.samples]
    assert sum(s.count for s in mine.samples) == 162707  # the README's total of head dots
    mall = crowd.of_source("mall")
    frames = [int(s.path.stem.split("_")[1]) for s in mall.samples if s.split == "test"]
    assert frames == list(range(601, 801))
    assert [s.count for s in mall.samples] == [s.count for s in read_mall(shared_data / "mall-train").samples]
    assert len({s.index for s in crowd.samples}) == len(crowd.samples)


def test_coco_persons_are_the_non_crowd_person_boxes(shared_data: Path) -> None:
    annotations = shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007" / "Annotations"
    coco = read_crowd(shared_data, sets=("coco-voc20",))
    kept = {s.path.stem: s for s in coco.samples}
    crowd_box_photos = people = 0
    for xml in sorted(annotations.glob("*.xml")):
        persons = [o for o in ElementTree.parse(xml).getroot().iter("object") if o.findtext("name") == "person"]
        flagged = [o for o in persons if o.findtext("difficult").strip() == "1"]
        if flagged:
            crowd_box_photos += 1
            assert xml.stem not in kept  # its true count is unknown
            continue
        sample = kept[xml.stem]
        assert sample.count == len(persons)
        people += len(persons)
        centres = sorted(((float(o.find("bndbox/xmin").text) + float(o.find("bndbox/xmax").text)) / 2) for o in persons)
        np.testing.assert_allclose(sorted(sample.dots[:, 0]), centres)
    assert crowd_box_photos == 25 and len(kept) == 534
    assert sum(s.count for s in coco.samples) == people == 896  # 322 more are in the crowd-box photos
    assert sum(s.split == "test" for s in coco.samples) == 134


def test_crowd_boxes_can_be_kept(shared_data: Path) -> None:
    coco = read_crowd(shared_data, sets=("coco-voc20",), include_crowd_boxes=True)
    assert len(coco.samples) == 559


def test_reader_refuses_other_splits_and_sets(shared_data: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="one split"):
        read_crowd(shared_data, split="random:0.5")
    with pytest.raises(DatasetError, match="unknown crowd set"):
        read_crowd(shared_data, sets=("ucsd",))
    with pytest.raises(DatasetError, match="folder not found"):
        read_crowd(tmp_path, sets=("mall",))


def test_balanced_weights_give_each_set_one_share() -> None:
    sources = np.array(["a"] * 6 + ["b"] * 2 + ["c"])
    weights = balanced_weights(sources)
    shares = {name: weights[sources == name].sum() for name in "abc"}
    assert shares == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.0})


@pytest.mark.slow  # the whole crowd dataset
def test_thinning_keeps_every_kth_video_frame_and_no_validation_picture(crowd) -> None:
    train = thinned_train_part(crowd, 3)
    sources = train.source_names()
    assert set(train.splits) == {"train"}
    assert (sources == "mall").sum() == 200
    assert (sources == "shanghaitech-B").sum() == 300
    mall_frames = [int(s.path.stem.split("_")[1]) for s, src in zip(train.samples, sources) if src == "mall"]
    assert mall_frames[:3] == [1, 4, 7]


def test_default_model_is_the_shipped_crowd_model() -> None:
    assert defaults.MODEL_FILE == "crowd.npz"
    assert default_model_path() == ROOT / "models" / "crowd.npz"
    assert default_model_path().is_file()


@pytest.mark.slow
def test_small_crowd_training_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    from counting.features import FeatureCache
    from counting.model.counting_model import load_model
    from counting.train.crowd import CrowdSettings, crowd_figures, train_crowd_model

    crowd = read_crowd(shared_data, sets=("shanghaitech-B", "coco-voc20"))
    few = [s for s in crowd.samples if s.split == "train"][::15] + [s for s in crowd.samples if s.split == "test"][::30]
    crowd = replace(crowd, samples=few)
    settings = CrowdSettings(input_size=128, steps=20, people_mask=True)
    cache = FeatureCache(tmp_path / "cache")
    model = train_crowd_model(crowd, settings, cache=cache)
    path = model.save(tmp_path / "crowd.npz")
    loaded = load_model(path)
    assert loaded.input_size == 128 and loaded.count_offset == "head_sum"
    assert loaded.correction_weight == settings.correction_weight
    assert loaded.density_head.settings["crowd"]["sampling"] == "balanced"
    assert loaded.density_head.people_mask is not None  # read back from the file
    figures = crowd_figures(loaded, crowd, cache=cache, correction_weights=(0.0,))
    assert set(figures) == {"shanghaitech-B", "coco-voc20"}
    for entry in figures.values():
        assert entry["n"] > 0 and np.isfinite(entry["mae"]) and entry["mae_w0"] == pytest.approx(entry["head_mae"])
    counts = loaded.count_paths([str(s.path) for s in few[:3]], cache=cache).counts
    assert np.isfinite(counts).all() and (counts >= 0).all()


@pytest.mark.slow
def test_an_ensemble_crowd_model_gives_every_train_picture_an_out_of_fold_count(
    shared_data: Path, tmp_path: Path
) -> None:
    """folds=2: two heads, each validated on half the train pictures; every train picture gets the
    region sums of the head that never trained on it (what the sparse gate can be fitted on)."""
    from counting.features import FeatureCache
    from counting.heads.density.conv.head import ConvDensityHead
    from counting.train.crowd import CrowdSettings, thinned_train_part, train_crowd_model

    crowd = read_crowd(shared_data, sets=("shanghaitech-B", "coco-voc20"))
    few = [s for s in crowd.samples if s.split == "train"][::20] + [s for s in crowd.samples if s.split == "test"][::40]
    crowd = replace(crowd, samples=few)
    settings = CrowdSettings(input_size=128, steps=10, folds=2)
    rows: dict = {}
    model = train_crowd_model(crowd, settings, cache=FeatureCache(tmp_path / "cache"), out_of_fold=rows)
    head = model.density_head
    assert isinstance(head, ConvDensityHead) and head.settings["members"] == 2
    train = thinned_train_part(crowd, settings.sequence_stride)
    assert set(rows) == {str(sample.path) for sample in train.samples}
    assert all(row.shape == (5,) and np.isfinite(row).all() for row in rows.values())
    # Each row is the whole picture's sum, then its 2x2 cells, which add up to it.
    stacked = np.stack(list(rows.values()))
    np.testing.assert_allclose(stacked[:, 1:].sum(axis=1), stacked[:, 0], rtol=1e-6, atol=1e-6)
    assert model.training["crowd"]["folds"] == 2
    # The CSV fit_crowd_gate.py reads them from keeps them (6 decimals).
    from counting.train.crowd import read_out_of_fold, write_out_of_fold

    write_out_of_fold(tmp_path / "oof.csv", rows)
    again = read_out_of_fold(tmp_path / "oof.csv")
    assert list(again) == list(rows)
    np.testing.assert_allclose(np.stack(list(again.values())), stacked, atol=1e-6)


@pytest.mark.slow
def test_the_general_heads_out_of_fold_counts_are_masked_their_specialists_are_not(
    shared_data: Path, tmp_path: Path
) -> None:
    """The people mask multiplies the heads' density by at most 1: the same heads (seeded alike)
    give each train picture an out-of-fold count no larger with it, and smaller for some; the
    model's head carries the mask fitted on every picture."""
    from counting.features import FeatureCache
    from counting.train.crowd import CrowdSettings, train_crowd_model

    crowd = read_crowd(shared_data, sets=("shanghaitech-B", "coco-voc20"))
    few = [s for s in crowd.samples if s.split == "train"][::20] + [s for s in crowd.samples if s.split == "test"][::40]
    crowd = replace(crowd, samples=few)
    cache = FeatureCache(tmp_path / "cache")
    found = {}
    for masked in (True, False):
        rows: dict = {}
        model = train_crowd_model(
            crowd, CrowdSettings(input_size=128, steps=10, folds=2, people_mask=masked), cache=cache, out_of_fold=rows
        )
        assert (model.density_head.people_mask is not None) == masked
        found[masked] = np.stack([rows[path] for path in sorted(rows)])
    assert np.all(found[True] <= found[False] + 1e-9)
    assert np.any(found[True][:, 0] < 0.99 * found[False][:, 0])
    assert model.density_head.settings["crowd"]["people_mask"] is False


@pytest.mark.slow
def test_specialists_join_a_crowd_model_and_route_their_set(shared_data: Path, tmp_path: Path) -> None:
    """add_specialists: a head trained on ShanghaiTech B alone and a router fitted on every train
    picture's map statistics; ShanghaiTech B photos are then counted (mostly) by it, coco photos
    by the general head, and the file keeps both."""
    from counting.features import FeatureCache
    from counting.model.counting_model import load_model
    from counting.train.crowd import CrowdSettings, add_specialists, train_crowd_model

    crowd = read_crowd(shared_data, sets=("shanghaitech-B", "coco-voc20"))
    few = [s for s in crowd.samples if s.split == "train"][::12] + [s for s in crowd.samples if s.split == "test"][::25]
    crowd = replace(crowd, samples=few)
    settings = CrowdSettings(input_size=128, steps=10, folds=1, gray_share=0.25, degraded_share=0.2, people_mask=True)
    cache = FeatureCache(tmp_path / "cache")
    general = train_crowd_model(crowd, settings, cache=cache)
    with pytest.raises(ValueError, match="no train pictures of set 'mall'"):
        add_specialists(general, crowd, ("mall",), settings, cache=cache)
    # Two folds: every ShanghaiTech B train picture gets a specialist's count that never trained on it.
    routed = add_specialists(general, crowd, ("shanghaitech-B",), settings, cache=cache, folds=2)
    head = routed.density_head
    assert list(head.specialists) == ["shanghaitech-B"] and head.router.classes == ("coco-voc20", "shanghaitech-B")
    # the router also learnt each train picture's grayscale and degraded copies
    train = [sample for sample in crowd.samples if sample.split == "train"]
    assert sum(head.router.settings["pictures"].values()) == 3 * len(train)
    assert head.specialists["shanghaitech-B"].settings["training"]["gray_share"] == 0.25
    assert head.specialists["shanghaitech-B"].settings["training"]["degraded_share"] == 0.2
    assert general.density_head.settings["training"]["degraded_share"] == 0.2
    assert head.specialists["shanghaitech-B"].settings["specialist_of"] == "shanghaitech-B"
    # the general heads read their people mask, the specialist its own scenes whole
    assert head.people_mask is not None and head.specialists["shanghaitech-B"].people_mask is None
    assert routed.training["specialists"]["sets"] == ["shanghaitech-B"]
    loaded = load_model(routed.save(tmp_path / "routed.npz"))
    assert list(loaded.density_head.specialists) == ["shanghaitech-B"]
    assert (
        loaded.density_head.people_mask is not None
        and loaded.density_head.specialists["shanghaitech-B"].people_mask is None
    )
    assert loaded.summary()["specialists"] == "shanghaitech-B"
    validation = crowd.subset("test")
    sources = validation.source_names()
    paths = [str(sample.path) for sample in validation.samples]
    statistics, ok, _ = loaded.probe_paths(paths, cache=cache)
    share = loaded.density_head.router.probabilities(statistics[ok])[:, 1]
    assert share[sources[ok] == "shanghaitech-B"].mean() > 0.8 > 0.2 > share[sources[ok] == "coco-voc20"].mean()
    # the loaded model counts as the trained one, and differs from the general head where routed
    routed_counts = loaded.count_paths(paths, cache=cache).counts
    np.testing.assert_allclose(routed_counts, routed.count_paths(paths, cache=cache).counts, rtol=1e-9)
    general_counts = general.count_paths(paths, cache=cache).counts
    street = sources == "shanghaitech-B"
    assert not np.allclose(routed_counts[street], general_counts[street])
    # An interval of its own for the pictures the specialist counts, calibrated on its set's train
    # pictures the router sends it; the model's interval stays for the rest.
    record = routed.training["specialists"]["intervals"]["shanghaitech-B"]
    on_route = loaded.interval.by_route["shanghaitech-B"]
    in_set = sum(sample.split == "train" for sample in crowd.of_source("shanghaitech-B").samples)
    assert record["sent_to_detector"] == 0  # the model has no gate: no detector route
    assert on_route.n_calibration == record["pictures"] == in_set - record["routed_elsewhere"] > 9
    assert record["general_part"] == "general head's own sums (in-sample)"
    assert set(loaded.interval.by_route) == {"shanghaitech-B"}  # without a gate the general route keeps the whole
    # With the gate's out-of-fold counts: the pictures it sent make the detector's route, the
    # rest the router leaves to the general heads the general route (here: coco's).
    from counting.train.crowd import route_intervals

    train_paths = [str(sample.path) for sample in train]
    train_truth = np.array([float(sample.count) for sample in train])
    probes, readable, _ = loaded.probe_paths(train_paths, cache=cache)
    sent = train_truth <= 2
    gated = (train_paths, train_truth, train_truth + 0.5, sent)
    found, facts = route_intervals(loaded, {}, dict(zip(train_paths, probes, strict=True)), None, gated)
    to_general = readable & ~sent & (loaded.interval_routes(probes) == "general")
    assert facts["detector"]["pictures"] == int((readable & sent).sum()) > 9
    assert facts["general"]["pictures"] == int(to_general.sum())
    assert found["detector"].n_calibration == facts["detector"]["pictures"]
    assert found["detector"].interval(np.array([3.0]))[1][0] == pytest.approx(3.5)  # every error 0.5
    assert on_route.level == loaded.interval.level and loaded.interval.n_calibration == general.interval.n_calibration
    result = loaded.count_paths(paths, cache=cache)
    routes = loaded.interval_routes(statistics)
    assert set(routes[ok]) <= {"general", "shanghaitech-B", "detector"}
    mine = ok & (routes == "shanghaitech-B")
    assert mine.any()
    np.testing.assert_allclose(result.low[mine], on_route.interval(result.counts[mine])[0])
    np.testing.assert_allclose(result.high[mine], on_route.interval(result.counts[mine])[1])
    others = ok & (routes == "general")
    np.testing.assert_allclose(result.high[others], loaded.interval.interval(result.counts[others])[1])


@pytest.mark.slow
def test_the_sparse_gate_is_fitted_on_everyday_copies_of_its_pictures_too(shared_data: Path, tmp_path: Path) -> None:
    """fit_crowd_gate (CrowdSettings.gate_copies = 1): each gate picture and a recompressed copy
    of it (counting.data.copies), the copy's head count moved from the picture's by what the copy
    changes, its familiarity taken without the picture's reference; the out-of-fold counts are
    the pictures'. The refit add_specialists makes reads how the gate was fitted."""
    from counting.data.copies import recipe_for
    from counting.model.counting_model import load_model
    from counting.train.crowd import (
        CrowdSettings,
        GateOutOfFold,
        _checked_gate_out_of_fold,
        fit_crowd_gate,
        gate_inputs,
        head_rows,
        read_gate_out_of_fold,
        write_gate_out_of_fold,
    )

    model = load_model(Path(__file__).resolve().parents[2] / "models" / "crowd.npz")
    model = replace(model, sparse_gate=None)
    crowd = read_crowd(shared_data, sets=("shanghaitech-B", "coco-voc20"))
    train = [s for s in crowd.samples if s.split == "train"]
    few = [s for s in train if "VOC" in str(s.path)][:14] + [s for s in train if "VOC" not in str(s.path)][:6]
    crowd = replace(crowd, samples=few)
    paths = [str(sample.path) for sample in few]
    rows = dict(zip(paths, head_rows(model, paths), strict=True))
    inputs = gate_inputs(model, crowd, CrowdSettings(), None, 4, rows)
    copies = inputs.copies
    assert copies is not None and copies.paths == inputs.paths
    np.testing.assert_array_equal(copies.truth, inputs.truth)
    assert np.isfinite(copies.heads).all() and (copies.heads >= 0).all()
    # The copies change what the gate reads, a little: the counts, the detector's rows, the probes.
    assert not np.allclose(copies.heads, inputs.heads)
    # A street crowd's count moves little; the head's guesses on everyday photos move more.
    street = np.array(["VOC" not in path for path in inputs.paths])
    assert np.median(np.abs(copies.heads / inputs.heads - 1)[street]) < 0.1
    assert not np.array_equal(copies.persons, inputs.persons)
    assert not np.allclose(copies.projected, inputs.projected)
    assert gate_inputs(model, crowd, CrowdSettings(gate_copies=0), None, 4, rows).copies is None
    # Among these 20 copies some are grayscale and some blurred (counting.data.copies.recipe_for).
    recipes = [recipe_for(0, k) for k in range(len(paths))]
    assert any(recipe.gray for recipe in recipes) and any(recipe.blur for recipe in recipes)

    found = GateOutOfFold()
    gated = fit_crowd_gate(model, crowd, CrowdSettings(), out_of_fold=rows, gate_out_of_fold=found)
    # What the specialists' step reads instead of fitting the gate again: the refit's counts.
    refit = inputs.fitted(0, with_sent=True)[1:]
    assert found.paths == inputs.paths
    # fit_crowd_gate made its own copies: the same as these (the copies are the same every time).
    np.testing.assert_allclose(found.counts, refit[0])
    np.testing.assert_array_equal(found.sent, refit[1])
    assert found.mae() == pytest.approx(gated.sparse_gate.settings["out_of_fold_mae"], abs=1e-12)
    write_gate_out_of_fold(tmp_path / "gate-oof.csv", found)
    read = read_gate_out_of_fold(tmp_path / "gate-oof.csv")
    assert read.paths == found.paths and np.array_equal(read.sent, found.sent)
    np.testing.assert_allclose(read.counts, found.counts, atol=1e-6)
    checked = _checked_gate_out_of_fold(gated, crowd, CrowdSettings(), rows, read)
    assert checked[0] == found.paths and np.array_equal(checked[3], found.sent)
    shifted = replace(read, counts=read.counts + 0.5)
    with pytest.raises(ValueError, match="are not those of .*'s gate"):
        _checked_gate_out_of_fold(gated, crowd, CrowdSettings(), rows, shifted)
    with pytest.raises(ValueError, match="hold 19 pictures, not the 20"):
        _checked_gate_out_of_fold(gated, crowd, CrowdSettings(), rows, replace(read, paths=read.paths[:-1]))
    (tmp_path / "not.csv").write_text("image,sum\nx,1\n")
    with pytest.raises(ValueError, match="not.csv: not the gate's out-of-fold counts"):
        read_gate_out_of_fold(tmp_path / "not.csv")
    assert gated.sparse_gate.settings["copies"] == 1
    assert gated.sparse_gate.settings["copy_family"] == "wider"
    assert "a quarter also grayscale" in gated.sparse_gate.settings["fitted_on"]
    assert "an everyday copy of each" in gated.sparse_gate.settings["fitted_on"]
    assert gated.interval.n_calibration == len(paths)  # calibrated on the pictures, not their copies
    plain = fit_crowd_gate(model, crowd, CrowdSettings(gate_copies=0), out_of_fold=rows)
    assert plain.sparse_gate.settings["copies"] == 0
    with pytest.raises(ValueError, match="gate_copies 2"):
        CrowdSettings(gate_copies=2)
    with pytest.raises(ValueError, match="gate_copy_family 'sepia'"):
        CrowdSettings(gate_copy_family="sepia")


def test_the_heads_out_of_fold_csv_round_trips_and_a_foreign_file_is_one_line(tmp_path: Path) -> None:
    """read_out_of_fold, as read_gate_out_of_fold: the rows write_out_of_fold wrote, and one
    ValueError naming the file for a missing one or another CSV (the scripts print it as one line)."""
    from counting.train.crowd import GateOutOfFold, read_out_of_fold, write_gate_out_of_fold, write_out_of_fold

    rows = {"a.jpg": np.array([3.0, 1.0, 2.0]), "b.jpg": np.array([0.5, 0.25, 0.25])}
    write_out_of_fold(tmp_path / "oof.csv", rows)
    again = read_out_of_fold(tmp_path / "oof.csv")
    assert list(again) == ["a.jpg", "b.jpg"]
    np.testing.assert_allclose(again["b.jpg"], rows["b.jpg"])
    with pytest.raises(ValueError, match="missing.csv: not the heads' out-of-fold rows"):
        read_out_of_fold(tmp_path / "missing.csv")
    write_gate_out_of_fold(tmp_path / "gate.csv", GateOutOfFold(["a.jpg"], np.ones(1), np.ones(1), np.ones(1, bool)))
    with pytest.raises(ValueError, match="gate.csv: not the heads' out-of-fold rows.*header"):
        read_out_of_fold(tmp_path / "gate.csv")
    (tmp_path / "bad.csv").write_text("image,sum\na.jpg,many\n")
    with pytest.raises(ValueError, match="bad.csv: not the heads' out-of-fold rows"):
        read_out_of_fold(tmp_path / "bad.csv")
