"""Dask scale-out on a real LocalCluster (2 worker processes, 1 thread each) with Mall frames.

The cluster is started once for the module; each extraction is compared byte for byte with
:func:`counting.features.extract_features` run in this process on the same images, on both
runtimes (onnxruntime, the default, and torch with its eager/trace replay).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from counting.apply.distributed import (
    BackboneSpec,
    count_streams,
    extract_features_distributed,
    open_cluster,
    parse_cluster,
    read_sources,
)
from counting.apply.distributed.cluster import ClusterError
from counting.apply.video import count_video
from counting.cli.app import app
from counting.core.errors import BackboneError, ImageError
from counting.features import FeatureCache, extract_features
from counting.features.backbones import Preprocessing, get_backbone
from counting.model.counting_model import load_model

pytestmark = pytest.mark.slow  # a cluster of two worker processes, each loading torch

N_FRAMES = 24
BATCH = 4  # 6 batches: enough for both workers, the tracing switch and a retried task


@pytest.fixture(scope="module")
def frames(mall_root: Path) -> list[str]:
    return sorted(str(p) for p in (mall_root / "frames").glob("*.jpg"))[:N_FRAMES]


@pytest.fixture(scope="module", params=["onnxruntime", "torch"])
def runtime(request) -> str:
    return request.param


@pytest.fixture
def backbone(runtime: str):
    """A fresh client-side backbone per test: a torch cluster run continues the tracing history
    of the backbone object it is given, exactly as a single process with that object would."""
    return get_backbone("efficientnet-lite0", runtime=runtime)


@pytest.fixture(scope="module")
def reference(frames, runtime: str):
    """The single-process result (a fresh backbone: its tracing history starts empty)."""
    single = get_backbone("efficientnet-lite0", runtime=runtime)
    assert single.runtime == runtime
    return extract_features(frames, single, Preprocessing(224), batch_size=BATCH, progress=False)


@pytest.fixture(scope="module")
def client():
    with open_cluster("local:2") as connected:
        connected.wait_for_workers(2, timeout=180)
        yield connected


def test_parse_cluster_accepts_local_and_addresses() -> None:
    assert parse_cluster("local:3") == 3
    assert parse_cluster("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    for bad in ("local:0", "local:x", "local", ""):
        with pytest.raises(ClusterError, match="local:N|scheduler address"):
            parse_cluster(bad)


def test_backbone_spec_carries_runtime_threads_and_export(tmp_path: Path) -> None:
    backbone = get_backbone("efficientnet-lite0", runtime="onnxruntime", threads=1)
    spec = BackboneSpec.of(backbone)
    assert spec.name == "efficientnet-lite0" and spec.weights_sha256 == backbone.weights_sha256
    assert (spec.runtime, spec.threads) == ("onnxruntime", 1)
    exported = backbone._onnx[("final",)].path
    assert spec.export_dir == str(exported.parent)
    loaded = spec.load()
    assert loaded.runtime == "onnxruntime" and loaded.threads == 1
    assert loaded._onnx[("final",)].path == exported  # the client's file, not a new export
    torch_spec = BackboneSpec.of(get_backbone("efficientnet-lite0", runtime="torch"))
    assert torch_spec.runtime == "torch" and torch_spec.load().runtime == "torch"
    assert torch_spec.plugin_name != spec.plugin_name
    forged = BackboneSpec(spec.name, "0" * 64, spec.weights_path)
    with pytest.raises(BackboneError, match="weights differ from the client's"):
        forged.load(where="tcp://worker:1")


def test_cluster_result_is_byte_identical_and_fills_the_shared_cache(
    client, frames, backbone, reference, tmp_path: Path
) -> None:
    cache = FeatureCache(tmp_path / "cache")
    first = extract_features_distributed(
        frames, backbone, Preprocessing(224), cache=cache, batch_size=BATCH, progress=False, client=client
    )
    assert first.paths == frames and first.ok.all() and not first.errors
    assert (first.n_cached, first.n_computed) == (0, N_FRAMES)
    assert first.features.dtype == np.float32 and first.features.tobytes() == reference.features.tobytes()
    # The workers stored every row: a second cluster run and a single-process run read them back.
    again = extract_features_distributed(
        frames,
        backbone,
        Preprocessing(224),
        cache=FeatureCache(cache.directory),
        batch_size=BATCH,
        progress=False,
        client=client,
    )
    assert (again.n_cached, again.n_computed) == (N_FRAMES, 0)
    assert again.features.tobytes() == reference.features.tobytes()
    local = extract_features(
        frames, backbone, Preprocessing(224), cache=FeatureCache(cache.directory), batch_size=BATCH, progress=False
    )
    assert local.n_cached == N_FRAMES and local.features.tobytes() == reference.features.tobytes()


def test_workers_reuse_the_clients_onnx_export(client, frames) -> None:
    client.wait_for_workers(2, timeout=180)
    backbone = get_backbone("efficientnet-lite0", runtime="onnxruntime")
    exported = backbone._onnx[("final",)].path
    before = exported.stat().st_mtime_ns
    extract_features_distributed(frames[:BATCH], backbone, Preprocessing(224), progress=False, client=client)
    name = BackboneSpec.of(backbone).plugin_name

    def export_used(dask_worker) -> tuple[str, str, int | None]:
        state = dask_worker.plugins[name].state
        return str(state.backbone._onnx[("final",)].path), state.backbone.runtime, state.backbone.threads

    used = client.run(export_used)
    assert len(used) == 2
    assert set(used.values()) == {(str(exported), "onnxruntime", backbone.threads)}
    assert exported.stat().st_mtime_ns == before


def test_partial_cache_and_grid_match_single_process(client, frames, tmp_path: Path) -> None:
    """Cached images shift the batches of the rest; the cluster must shift them the same way."""
    cache_dir, single_dir = tmp_path / "cluster-cache", tmp_path / "single-cache"
    subset = frames[3:9] + frames[20:23]
    extract_features(
        subset,
        get_backbone("efficientnet-lite0"),
        Preprocessing(224),
        grid=(2, 2),
        cache=FeatureCache(cache_dir),
        batch_size=BATCH,
        progress=False,
    )
    shutil.copytree(cache_dir, single_dir)  # the same cache state for both runs
    single = extract_features(
        frames,
        get_backbone("efficientnet-lite0"),
        Preprocessing(224),
        grid=(2, 2),
        cache=FeatureCache(single_dir),
        batch_size=BATCH,
        progress=False,
    )
    remote = extract_features_distributed(
        frames,
        get_backbone("efficientnet-lite0"),
        Preprocessing(224),
        grid=(2, 2),
        cache=FeatureCache(cache_dir),
        batch_size=BATCH,
        progress=False,
        client=client,
    )
    assert remote.n_cached == single.n_cached == len(subset)
    assert remote.n_computed == single.n_computed == N_FRAMES - len(subset)
    assert remote.features.shape == (N_FRAMES, 4, 1000)
    assert remote.features.tobytes() == single.features.tobytes()


def test_per_image_errors_come_back(client, frames, tmp_path: Path) -> None:
    backbone = get_backbone("efficientnet-lite0")
    folder = tmp_path / "images"
    folder.mkdir()
    paths = []
    for k, frame in enumerate(frames[:10]):
        paths.append(str(shutil.copy(frame, folder / f"{k:02d}.jpg")))
    corrupt = folder / "05-corrupt.jpg"
    corrupt.write_bytes(Path(frames[0]).read_bytes()[:2000])  # a truncated JPEG
    text = folder / "07-text.jpg"
    text.write_text("not a picture")
    paths[5:5] = [str(corrupt)]
    paths[8:8] = [str(text)]
    single = extract_features(
        paths, get_backbone("efficientnet-lite0"), Preprocessing(224), batch_size=BATCH, progress=False, on_error="skip"
    )
    remote = extract_features_distributed(
        paths, backbone, Preprocessing(224), batch_size=BATCH, progress=False, on_error="skip", client=client
    )
    assert set(remote.errors) == {str(corrupt), str(text)}
    assert remote.errors == single.errors
    assert remote.errors[str(text)].startswith(f"{text}: ")
    assert np.array_equal(remote.ok, single.ok) and int(remote.ok.sum()) == 10
    assert remote.features.tobytes() == single.features.tobytes()  # NaN rows in the same places
    # Stopping: the image a single process stops at (unreadable headers are batched first).
    with pytest.raises(ImageError) as stopped:
        extract_features(
            paths, get_backbone("efficientnet-lite0"), Preprocessing(224), batch_size=BATCH, progress=False
        )
    assert str(stopped.value) == single.errors[str(text)]
    with pytest.raises(ImageError) as raised:
        extract_features_distributed(
            paths, backbone, Preprocessing(224), batch_size=BATCH, progress=False, client=client
        )
    assert str(raised.value) == str(stopped.value)


def test_mixed_image_sizes_are_batched_as_in_one_process(client, frames, tmp_path: Path) -> None:
    """Photos of several sizes: a single process batches them by input shape (header order);
    the cluster must cut the very same batches."""
    paths = []
    for k, frame in enumerate(frames[:10]):
        image = cv2.imread(frame)
        if k % 3 == 1:
            image = image[:, : image.shape[1] * 2 // 3]  # another aspect ratio, another input shape
        elif k % 3 == 2:
            image = image[: image.shape[0] * 3 // 4]
        path = tmp_path / f"{k:02d}.png"
        cv2.imwrite(str(path), image)
        paths.append(str(path))
    backbone = get_backbone("efficientnet-lite0")
    single = extract_features(paths, backbone, Preprocessing(224), batch_size=BATCH, progress=False)
    remote = extract_features_distributed(
        paths, backbone, Preprocessing(224), batch_size=BATCH, progress=False, client=client
    )
    assert single.ok.all() and remote.ok.all()
    assert remote.features.tobytes() == single.features.tobytes()


@pytest.mark.parametrize("runtime_flag", ["onnxruntime", "torch"])
def test_cli_features_on_local_cluster_equals_single_process(frames, tmp_path: Path, runtime_flag: str) -> None:
    runner = CliRunner()
    single, clustered = tmp_path / "single.npy", tmp_path / "cluster.npy"
    common = [*frames[:8], "--no-cache", "--batch-size", str(BATCH), "--no-progress", "--runtime", runtime_flag]
    result = runner.invoke(app, ["features", *common, "-o", str(single)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["features", *common, "-o", str(clustered), "--cluster", "local:2"])
    assert result.exit_code == 0, result.output
    assert "8 of 8 images" in result.output
    assert np.load(clustered).tobytes() == np.load(single).tobytes()
    assert clustered.with_suffix(".files.txt").read_text() == single.with_suffix(".files.txt").read_text()


def test_cli_reports_an_unreachable_scheduler_in_one_line(frames, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COUNTING_CLUSTER_TIMEOUT", "2")
    result = CliRunner().invoke(app, ["features", frames[0], "--no-cache", "--cluster", "tcp://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "tcp://127.0.0.1:9: cannot reach a Dask scheduler" in result.output
    assert "Traceback" not in result.output


def test_count_and_evaluate_on_a_scheduler_address_match_local_runs(
    client, frames, mall_root: Path, tmp_path: Path
) -> None:
    runner, address = CliRunner(), client.scheduler.address
    for flags, name in (([], "local"), (["--cluster", address], "cluster")):
        result = runner.invoke(app, ["count", *frames[:5], "--json", str(tmp_path / f"count-{name}.json"), *flags])
        assert result.exit_code == 0, result.output
        result = runner.invoke(
            app,
            [
                "evaluate",
                "-d",
                "mall",
                "-r",
                str(mall_root),
                "--split",
                "train=1-792,test=793-800",
                "--no-progress",
                "--json",
                str(tmp_path / f"evaluate-{name}.json"),
                *flags,
            ],
        )
        assert result.exit_code == 0, result.output
    for kind in ("count", "evaluate"):
        local = json.loads((tmp_path / f"{kind}-local.json").read_text())
        remote = json.loads((tmp_path / f"{kind}-cluster.json").read_text())
        assert remote == local
    assert local["per_frame"]["n"] == 8


def test_train_model_on_the_cluster_fits_the_same_model(client, mall_root: Path) -> None:
    """Training goes through the same seam (with the Mall ROI mask shipped to the workers)."""
    from counting.apply.distributed import cluster_extractor
    from counting.cli.common import open_dataset
    from counting.train.pipeline import TrainingConfig, train_model

    data = open_dataset("mall", mall_root, "train=1-20,test=21-24")
    config = TrainingConfig(n_centers=4, max_epochs=2, calibration="none", batch_size=BATCH)
    local = train_model(data, config)
    remote = train_model(data, config, extract=cluster_extractor(client))
    assert local.roi_mask is not None
    probe = np.random.default_rng(0).normal(size=(6, 1000))
    assert np.array_equal(remote.predict_features(probe), local.predict_features(probe))


def _write_video(path: Path, frames: list[str], size=(160, 120)) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
    for frame in frames:
        writer.write(cv2.resize(cv2.imread(frame), size))
    writer.release()


def test_many_streams_one_counts_file_each(client, frames, tmp_path: Path) -> None:
    first, second = tmp_path / "entrance.avi", tmp_path / "hall.avi"
    _write_video(first, frames[:5])
    _write_video(second, frames[10:13])
    listing = tmp_path / "cameras.txt"
    listing.write_text(f"# two cameras\n{first}\n\n{second}\n{tmp_path / 'missing.avi'}\n")
    sources = read_sources(listing)
    assert sources == [str(first), str(second), str(tmp_path / "missing.avi")]
    outcomes = count_streams(client, sources, tmp_path / "counts", batch_size=4)
    assert [o.source for o in outcomes] == sources
    assert [Path(o.counts_path).name for o in outcomes] == ["01-entrance.csv", "02-hall.csv", "03-missing.csv"]
    assert outcomes[2].error == f"{tmp_path / 'missing.avi'}: video file not found"
    model = load_model()
    for outcome, video, n in zip(outcomes[:2], (first, second), (5, 3)):
        assert outcome.error is None and outcome.frames == n
        with open(outcome.counts_path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        expected = count_video(model, str(video), batch_size=4, keep_records=True).records
        assert [int(r["frame"]) for r in rows] == list(range(n))
        assert np.allclose([float(r["count"]) for r in rows], [r["count"] for r in expected], atol=2e-3)
    # Through the CLI, connected to the same scheduler by its address.
    result = CliRunner().invoke(
        app,
        [
            "video",
            "--sources",
            str(listing),
            "--counts-dir",
            str(tmp_path / "cli"),
            "--cluster",
            client.scheduler.address,
            "--batch-size",
            "4",
        ],
    )
    assert result.exit_code == 1  # the missing file is reported, the other streams still counted
    assert "video file not found" in result.output
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == ["01-entrance.csv", "02-hall.csv"]


def test_a_worker_killed_mid_run_loses_nothing(frames, backbone, reference) -> None:
    """SIGKILL a worker while it runs a task: the task is retried elsewhere, finished ones kept.

    On a cluster of its own: on slow hosts the nanny of the killed worker sometimes closed itself
    right after restarting it (dask's "nanny-close"), and the module's shared cluster was left
    with one worker for every later test (CI failures on 2026-11-28).
    """
    killed: dict = {}
    with open_cluster("local:2") as client:
        client.wait_for_workers(2, timeout=180)

        def kill_a_busy_worker(done: int, total: int) -> None:
            if killed:
                return
            busy = {address: keys for address, keys in client.processing().items() if keys}
            if not busy:
                return
            address = next(iter(busy))
            pid = client.run(os.getpid, workers=[address])[address]
            os.kill(pid, signal.SIGKILL)
            killed.update(address=address, done=done, tasks=list(busy[address]))

        result = extract_features_distributed(
            frames,
            backbone,
            Preprocessing(224),
            batch_size=BATCH,
            progress=False,
            client=client,
            batches_per_task=1,
            on_chunk=kill_a_busy_worker,
        )
    assert killed and killed["tasks"] and killed["done"] < N_FRAMES
    assert result.ok.all() and not result.errors
    assert result.features.tobytes() == reference.features.tobytes()
