"""The count as a chain of stages (counting.model.stages): a model holds the stages its file has,
in the order of the count; each stage reads and writes its own section; dropping a section drops
the stage from the count and nothing else; files and prepared batches run the same chain."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from counting.data.imaging import load_image
from counting.heads.crowd.gate_stage import SparseGateStage
from counting.heads.crowd.intervals import IntervalStage
from counting.heads.familiarity import FamiliarityStage
from counting.model.counting_model import CountingModel, load_model
from counting.model.stages import STAGES, stages_of

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crowd() -> CountingModel:
    return load_model(REPO / "models" / "crowd.npz")


@pytest.fixture(scope="module")
def mall_frame(mall_root: Path) -> Path:
    return sorted((mall_root / "frames").glob("*.jpg"))[10]


def test_stages_run_in_the_order_of_the_count(crowd: CountingModel) -> None:
    assert [type(stage) for stage in stages_of(crowd)] == [FamiliarityStage, SparseGateStage, IntervalStage]
    plain = load_model(REPO / "models" / "mall-sums.npz")
    kinds = [type(stage) for stage in stages_of(plain)]
    assert SparseGateStage not in kinds and kinds[-1] is IntervalStage
    assert [entry.section for entry in STAGES] == ["familiarity", "sparse_gate", "interval"]


def test_each_stage_reads_and_writes_its_own_section(crowd: CountingModel, tmp_path: Path) -> None:
    metadata = json.loads(json.dumps(crowd.metadata(), default=str))
    for entry in STAGES:
        record = metadata[entry.section]
        again = json.loads(json.dumps(entry.write(entry.read(record)), default=str))
        assert again == record, entry.section
    saved = load_model(crowd.save(tmp_path / "again.npz"))
    assert [type(stage) for stage in stages_of(saved)] == [type(stage) for stage in stages_of(crowd)]


def test_a_file_without_a_stage_counts_without_it(crowd: CountingModel, mall_frame: Path) -> None:
    """The interval section gone: the same counts, no interval; the familiarity section gone
    too (a gate needs it, so the gate goes first): no familiarity, no interval routes."""
    whole = crowd.count_paths([mall_frame])
    without_interval = replace(crowd, interval=None).count_paths([mall_frame])
    np.testing.assert_array_equal(without_interval.counts, whole.counts)
    assert whole.low is not None and without_interval.low is None and without_interval.high is None
    bare = replace(crowd, interval=None, sparse_gate=None, familiarity=None)
    assert stages_of(bare) == []
    result = bare.count_paths([mall_frame])
    assert result.familiarity is None and result.counted_by is None and result.disputed is None
    # A busy Mall frame: the gate leaves it to the heads, so the heads' count is the count.
    assert whole.counted_by is not None and whole.counted_by[0] == "density"
    np.testing.assert_allclose(result.counts, whole.counts, rtol=0, atol=1e-9)


def test_files_and_a_prepared_batch_run_the_same_chain(crowd: CountingModel, mall_frame: Path) -> None:
    from_file = crowd.count_paths([mall_frame])
    batch = crowd.count_batch([crowd.prepare_image(load_image(mall_frame))], with_density=True)
    np.testing.assert_allclose(batch.counts, from_file.counts, rtol=1e-6)
    np.testing.assert_allclose(batch.low, from_file.low, rtol=1e-6)
    np.testing.assert_allclose(batch.high, from_file.high, rtol=1e-6)
    np.testing.assert_allclose(batch.familiarity, from_file.familiarity, rtol=1e-6)
    assert list(batch.counted_by) == list(from_file.counted_by)
    assert batch.density is not None and batch.density.shape[0] == 1
    # The map the heat map and zones are drawn from holds the count the head's sum gave.
    assert batch.routes is not None and batch.routes[0] in crowd.interval.by_route


def test_the_interval_stage_is_what_the_model_reports(crowd: CountingModel) -> None:
    stage = stages_of(crowd)[-1]
    assert isinstance(stage, IntervalStage) and stage.specialists == tuple(crowd.density_head.specialists)
    counts = np.array([0.0, 3.0, 40.0, 250.0])
    routes = np.array(["detector", "detector", "general", "general"], dtype=object)
    low, high = stage.bounds(counts, routes)
    model_low, model_high = crowd.intervals(counts, routes)
    np.testing.assert_array_equal(low, model_low)
    np.testing.assert_array_equal(high, model_high)
    # A count of 0 on the detector's route takes the "found no one" interval ([0, 1], not [0, 0]).
    assert stage.found_none(routes, counts)[0] == "detector-none" and high[0] >= 1.0
