"""`count --cluster`: every model kind is counted on the cluster, with the records of a run without it.

On ef8ebcc a density model (the default crowd model among them) dropped --cluster in silence and
counted here, even with nothing listening at the address; --features dropped it too.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from robust_helpers import REPO_ROOT, assert_one_error, assert_process_one_error, run_cli_process

from counting.apply.distributed.counter import part_size

pytestmark = pytest.mark.timeout(600)


def _records(process_or_result: object, out: Path) -> list[dict]:
    return json.loads(out.read_text())["images"]


def _count(tmp_path: Path, name: str, *args: object) -> list[dict]:
    out = tmp_path / f"{name}.json"
    process = run_cli_process("count", *args, "--json", out, "-q", timeout=540)
    assert process.returncode == 0, process.stderr
    assert "Traceback" not in process.stderr
    return _records(process, out)


@pytest.fixture
def mall_frames(mall_root: Path) -> list[Path]:
    frames = sorted((mall_root / "frames").glob("*.jpg"))
    return frames[:3]


def test_the_default_model_counts_on_the_cluster_as_here(tmp_path: Path, mall_frames: list[Path]) -> None:
    """The default crowd model (density heads, the sparse gate, its detector) and two zones: the
    same records, field by field and in the same order, with --cluster as without it."""
    zones = ("--zone", "left:0,0,0.5,0,0.5,1,0,1", "--zone", "right:0.5,0,1,0,1,1,0.5,1")
    here = _count(tmp_path, "here", *mall_frames, *zones)
    there = _count(tmp_path, "there", *mall_frames, *zones, "--cluster", "local:1")
    assert [row["image"] for row in here] == [str(frame) for frame in mall_frames]
    assert there == here  # every field, to the last bit: each part runs as the single process does
    assert {"zone_left", "zone_right", "counted_by", "familiarity"} <= set(here[0])


def test_a_per_class_model_counts_on_the_cluster_as_here(tmp_path: Path, coco_voc20_root: Path) -> None:
    photos = sorted((coco_voc20_root / "JPEGImages").glob("*.jpg"))[:3]
    model = REPO_ROOT / "models" / "voc20.npz"
    here = _count(tmp_path, "here", *photos, "-m", model)
    there = _count(tmp_path, "there", *photos, "-m", model, "--cluster", "local:1")
    assert there == here
    assert "count_person" in here[0]


def test_nothing_listening_at_the_address_is_one_line_not_a_local_count(
    tmp_path: Path, mall_frames: list[Path]
) -> None:
    """ef8ebcc: exit 0, counted here, not a word."""
    with socket.socket() as probe:  # a port nothing listens at: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "counts.csv"
    process = run_cli_process(
        "count",
        mall_frames[0],
        "--cluster",
        f"tcp://127.0.0.1:{port}",
        "--csv",
        out,
        env={"COUNTING_CLUSTER_TIMEOUT": "3"},
    )
    assert_process_one_error(process, f"tcp://127.0.0.1:{port}", "cannot reach a Dask scheduler")
    assert not out.exists()


def test_a_features_file_refuses_the_cluster_in_one_line(cli, features_file: Path) -> None:
    """A features file is counted here: --cluster with it was dropped in silence."""
    result = cli("count", "--features", features_file, "--cluster", "local:2")
    assert_one_error(result, "--cluster", "features file", code=2)


@pytest.mark.parametrize(
    ("pictures", "workers", "batch", "expected"),
    [
        (3, 2, 8, 8),  # fewer pictures than a chunk: one part
        (1000, 2, 8, 128),  # about four parts a worker, whole chunks of 8
        (1000, 2, 12, 144),  # a multiple of the batch and of the density chunk
        (100_000, 2, 8, 512),  # never more than the single process's own chunk
    ],
)
def test_parts_are_whole_batches_and_chunks(pictures: int, workers: int, batch: int, expected: int) -> None:
    size = part_size(pictures, workers, batch)
    assert size == expected
    assert size % 8 == 0 and size % batch == 0


def test_evaluate_counts_a_density_model_on_the_cluster(tmp_path: Path, mall_root: Path) -> None:
    """evaluate --cluster with the default (density) model: the pictures are counted on the
    cluster and the figures are those of a run without it (ef8ebcc counted here in silence)."""
    figures = []
    for name, extra in (("here", ()), ("there", ("--cluster", "local:1"))):
        out = tmp_path / f"{name}.json"
        common = ("-d", "mall", "-r", mall_root, "--split", "train=1-2,test=3-5", "--smooth", "1")
        process = run_cli_process("evaluate", *common, *extra, "--json", out, "-q", timeout=540)
        assert process.returncode == 0, process.stderr
        figures.append(json.loads(out.read_text()))
    here, there = figures
    assert there == here and here["per_frame"]["n"] == 3  # every figure, and the interval coverage


def test_train_refuses_the_cluster_for_a_density_head_in_one_line(cli, mall_root: Path, tmp_path: Path) -> None:
    """A density head learns from maps made in this process: --cluster was dropped in silence."""
    out = tmp_path / "model.npz"
    result = cli(
        "train", "-d", "mall", "-r", mall_root, "--split", "train=1-4,test=5-6", "--density-head",
        "--cluster", "local:2", "-o", out,
    )  # fmt: skip
    assert_one_error(result, "--cluster", "density head", "leave out --cluster")
    assert not out.exists()


def test_parts_on_two_workers_join_in_the_pictures_order(mall_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five pictures in parts of two on two workers (parts of 8 at least in use: patched here so that
    several parts run at once): the joined result is the single process's, field by field."""
    import numpy as np

    import counting.apply.distributed.counter as counter
    from counting.apply.chunks import count_in_chunks
    from counting.apply.distributed.cluster import open_cluster
    from counting.model.counting_model import load_model

    monkeypatch.setattr(counter, "PART_MULTIPLE", 2)  # the density passes' pairs stay whole
    frames = [str(path) for path in sorted((mall_root / "frames").glob("*.jpg"))[10:15]]
    model = load_model()
    here = count_in_chunks(model, frames, batch_size=2)
    seen: list[int] = []
    with open_cluster("local:2") as client:
        there, records = counter.count_on_cluster(
            client, model, frames, batch_size=2, on_part=lambda part, _: seen.append(len(part.sources))
        )
    assert seen == [2, 2, 1] and records is None
    assert there.sources == here.sources == frames
    for name in ("counts", "low", "high", "ok", "familiarity", "counted_by", "disputed"):
        assert np.array_equal(getattr(there, name), getattr(here, name)), name


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e9", "soon"])
def test_a_bad_cluster_timeout_is_one_line(tmp_path: Path, mall_frames: list[Path], value: str) -> None:
    """COUNTING_CLUSTER_TIMEOUT=nan was a 92-line traceback, -1 a garbled line, 1e9 a hang."""
    process = run_cli_process(
        "count", mall_frames[0], "--cluster", "tcp://127.0.0.1:1", env={"COUNTING_CLUSTER_TIMEOUT": value}
    )
    assert_process_one_error(process, "COUNTING_CLUSTER_TIMEOUT", "seconds from 0.1 to 3600")
