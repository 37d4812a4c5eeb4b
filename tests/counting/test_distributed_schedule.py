"""The client-side bookkeeping of distributed extraction, without a cluster."""

from __future__ import annotations

from counting.apply.distributed.engine import _mode_mismatches
from counting.apply.distributed.spec import BackboneSpec
from counting.apply.distributed.streams import counts_file_names
from counting.apply.distributed.worker import ExtractionJob, SubBatch

SPEC = BackboneSpec("efficientnet-lite0", "f" * 64, None, runtime="torch", use_trace=True, trace_after=2)
FULL, LAST = (4, 3, 224, 298), (2, 3, 224, 298)


def test_replay_marks_batches_a_single_process_would_run_the_other_way() -> None:
    # Worker A ran batches 0-2 (eager, eager, trace); worker B ran 3-5 and, fresh, started eagerly.
    subs = [
        SubBatch(4, [16, 17, 18, 19], FULL, "eager"),
        SubBatch(0, [0, 1, 2, 3], FULL, "eager"),
        SubBatch(1, [4, 5, 6, 7], FULL, "eager"),
        SubBatch(2, [8, 9, 10, 11], FULL, "trace"),
        SubBatch(3, [12, 13, 14, 15], FULL, "eager"),
        SubBatch(5, [20, 21], LAST, "eager"),
    ]
    history: dict = {}
    redo = _mode_mismatches(subs, history, SPEC)
    assert [(sub.batch, mode) for sub, mode in redo] == [(3, "trace"), (4, "trace")]
    assert history == {FULL: 2, LAST: 1}
    # A second extraction with the same backbone continues the history: all traced now.
    again = _mode_mismatches([SubBatch(0, [0, 1, 2, 3], FULL, "eager")], history, SPEC)
    assert [(sub.batch, mode) for sub, mode in again] == [(0, "trace")]


def test_without_tracing_everything_is_eager() -> None:
    spec = BackboneSpec("efficientnet-lite0", "f" * 64, None, runtime="torch", use_trace=False)
    subs = [SubBatch(k, [k], FULL, "trace" if k == 3 else "eager") for k in range(5)]
    assert [(sub.batch, mode) for sub, mode in _mode_mismatches(subs, {}, spec)] == [(3, "eager")]


def test_onnxruntime_has_no_modes_to_replay() -> None:
    """ONNX Runtime has no trace warm-up: a worker's sub-batches never need a re-run."""
    spec = BackboneSpec("efficientnet-lite0", "f" * 64, None, runtime="onnxruntime", threads=2)
    assert not spec.replays_trace and SPEC.replays_trace
    subs = [SubBatch(k, [k], FULL, "eager") for k in range(5)]
    history: dict = {}
    assert _mode_mismatches(subs, history, spec) == [] and history == {}


def test_roi_mask_travels_packed_and_comes_back_equal() -> None:
    import numpy as np

    from counting.features.backbones import Preprocessing

    mask = np.zeros((7, 13), dtype=bool)
    mask[2:5, 3:11] = True
    job = ExtractionJob.build("p", Preprocessing(64, roi_mask=mask), None, False, 1, (1000,), None, None, None)
    assert job.roi_bits is not None and len(job.roi_bits) == (7 * 13 + 7) // 8
    assert np.array_equal(job.roi_mask(), mask)


def test_counts_file_names_are_distinct_and_readable() -> None:
    names = counts_file_names(["/videos/entrance.mp4", "rtsp://cam2.local:554/stream", "0", "/b/entrance.mp4"])
    assert names == ["01-entrance.csv", "02-cam2.local-554-stream.csv", "03-0.csv", "04-entrance.csv"]
