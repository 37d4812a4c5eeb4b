"""Issue 24: no command overwrites its own input, no device is replaced, usage errors come early.

Every case failed on the code at the time of filing (exit 0 with the input replaced, a device
node turned into a regular file, a MemoryError or ValueError traceback, or death by SIGTERM
with nothing said). Device nodes are private ones made in the test's own folder (``mknod``,
root only) and removed with it; the machine's ``/dev`` is never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from robust_helpers import (
    DEFAULT_MODEL,
    FULL_DEVICE,
    NULL_DEVICE,
    REPO_ROOT,
    assert_one_error,
    assert_unchanged,
    make_image,
    make_video,
    needs_root,
    private_device,
    snapshot,
)

TRAIN = ("--split", "random:0.25:0", "--no-progress", "--centers", "4", "--epochs", "2", "--no-evaluate")


@pytest.fixture
def model_copy(tmp_path: Path) -> Path:
    return Path(shutil.copy(DEFAULT_MODEL, tmp_path / "model.npz"))


# -- outputs that are inputs ---------------------------------------------------------------------
def test_train_refuses_the_labels_file_its_images_and_the_dataset_folder(cli, folder_dataset: Path) -> None:
    before = snapshot(folder_dataset / "counts.csv", folder_dataset / "img00.png")
    for out in (folder_dataset / "counts.csv", folder_dataset / "img00.png", folder_dataset / "model.npz"):
        result = cli("train", "-d", "folder", "-r", folder_dataset, "-o", out, *TRAIN)
        assert_one_error(result, str(out), "reads its data from")
    assert_unchanged(before)
    assert not (folder_dataset / "model.npz").exists() and not (folder_dataset / "model.loss.png").exists()


def test_train_refuses_the_labels_file_through_a_symlink_dotdot_and_a_hard_link(
    cli, tmp_path: Path, folder_dataset: Path
) -> None:
    labels = tmp_path / "labels.csv"
    shutil.copy(folder_dataset / "counts.csv", labels)
    (tmp_path / "link.csv").symlink_to(labels)
    os.link(labels, tmp_path / "hard.csv")
    (tmp_path / "sub").mkdir()
    before = snapshot(labels)
    for out in (tmp_path / "link.csv", tmp_path / "sub" / ".." / "labels.csv", tmp_path / "hard.csv"):
        result = cli("train", "-d", "folder", "-r", folder_dataset, "--counts-csv", labels, "-o", out, *TRAIN)
        assert_one_error(result, str(out), "is also an input")
    assert_unchanged(before)


def test_evaluate_refuses_the_model_and_the_labels(cli, tmp_path: Path, folder_dataset: Path, model_copy) -> None:
    before = snapshot(model_copy, folder_dataset / "counts.csv")
    data = ("-d", "folder", "-r", folder_dataset, "--split", "random:0.25:0", "--no-progress", "-m", model_copy)
    assert_one_error(cli("evaluate", *data, "--json", model_copy), str(model_copy), "is also an input")
    link = tmp_path / "model-link.npz"
    link.symlink_to(model_copy)
    assert_one_error(cli("evaluate", *data, "--json", link), "is also an input")
    counts = folder_dataset / "counts.csv"
    assert_one_error(cli("evaluate", *data, "--csv", counts), str(counts), "reads its data from")
    same = tmp_path / "same.csv"
    assert_one_error(cli("evaluate", *data, "--json", same, "--csv", same), "two outputs")
    assert_unchanged(before)
    assert not same.exists()


def test_evaluate_refuses_the_shipped_default_model_when_no_model_is_given(cli, folder_dataset: Path) -> None:
    from counting.model.counting_model import default_model_path

    shipped = default_model_path()  # the model used without --model (models/crowd.npz)
    before = snapshot(shipped)
    data = ("-d", "folder", "-r", folder_dataset, "--split", "random:0.25:0", "--no-progress")
    assert_one_error(cli("evaluate", *data, "--json", shipped), "is also an input")
    assert_unchanged(before)


def test_report_and_compare_refuse_the_dataset_folder(cli, folder_dataset: Path, model_copy: Path) -> None:
    before = snapshot(*sorted(folder_dataset.iterdir()))
    data = ("-d", "folder", "-r", folder_dataset, "--split", "random:0.25:0")
    assert_one_error(cli("report", "-m", model_copy, *data, "-o", folder_dataset), "reads its data from")
    assert_one_error(cli("report", "-m", model_copy, *data, "-o", folder_dataset / "report"), "reads its data from")
    assert_one_error(cli("compare", *data, "-o", folder_dataset), "reads its data from")
    assert_unchanged(before)
    assert sorted(folder_dataset.iterdir()) == sorted(before)


def test_count_refuses_the_model_the_cache_and_an_image(cli, tmp_path: Path, model_copy: Path) -> None:
    image = make_image(tmp_path / "a.png")
    before = snapshot(model_copy, image)
    assert_one_error(cli("count", image, "-m", model_copy, "--csv", model_copy), "is also an input")
    assert_one_error(cli("count", image, "-m", model_copy, "--json", image), "is also an input")
    cache = tmp_path / "cache"
    cache.mkdir()
    inside = cache / "counts.csv"
    result = cli("count", image, "-m", model_copy, "--cache-dir", cache, "--csv", inside)
    assert_one_error(result, str(inside), "reads its data from")
    assert_unchanged(before)


def test_check_outputs_rule() -> None:
    """The one rule, directly: same file, inside a data folder, twice named, or fine."""
    from counting.core.files import OutputError, check_outputs

    here = REPO_ROOT / "models"
    with pytest.raises(OutputError, match="is also an input"):
        check_outputs([here / ".." / "models" / "default.npz"], inputs=[DEFAULT_MODEL])
    with pytest.raises(OutputError, match="reads its data from"):
        check_outputs([REPO_ROOT / "models" / "new" / "x.csv"], input_folders=[here])
    with pytest.raises(OutputError, match="two outputs"):
        check_outputs([Path("/tmp/a.csv"), Path("/tmp/../tmp/a.csv")])
    check_outputs([REPO_ROOT / "elsewhere.csv", None], inputs=[DEFAULT_MODEL, None], input_folders=[here, None])


# -- device nodes and FIFOs are written into, never replaced -------------------------------------
@pytest.fixture
def devices(tmp_path: Path) -> dict[str, Path]:
    """Private nodes in the test folder: a null (1,3) and a full (1,7) character device and a FIFO."""
    folder = tmp_path / "devices"
    folder.mkdir()
    nodes = {"null": folder / "null", "full": folder / "full", "fifo": folder / "fifo"}
    private_device(nodes["null"], NULL_DEVICE)
    private_device(nodes["full"], FULL_DEVICE)
    os.mkfifo(nodes["fifo"])
    return nodes


def _still_devices(nodes: dict[str, Path]) -> None:
    assert stat.S_ISCHR(os.stat(nodes["null"]).st_mode), "the null device was replaced by a file"
    assert stat.S_ISCHR(os.stat(nodes["full"]).st_mode), "the full device was replaced by a file"
    assert stat.S_ISFIFO(os.stat(nodes["fifo"]).st_mode)
    assert sorted(path.name for path in nodes["null"].parent.iterdir()) == ["fifo", "full", "null"]


@needs_root
def test_count_and_evaluate_write_into_a_null_device(cli, tmp_path: Path, devices, folder_dataset: Path) -> None:
    image = make_image(tmp_path / "a.png")
    result = cli("count", image, "--csv", devices["null"], "--json", devices["null"])
    assert result.exit_code == 0, result.output
    data = ("-d", "folder", "-r", folder_dataset, "--split", "random:0.25:0", "--no-progress")
    result = cli("evaluate", *data, "--json", devices["null"], "--csv", devices["null"])
    assert result.exit_code == 0, result.output
    _still_devices(devices)


@needs_root
def test_video_writes_counts_and_annotated_video_into_a_null_device(cli, tmp_path: Path, devices) -> None:
    clip = make_video(tmp_path / "clip.avi", n_frames=6)
    result = cli("video", clip, "--jsonl", devices["null"], "--annotated", devices["null"], "-q")
    assert result.exit_code == 0, result.output
    _still_devices(devices)
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


@needs_root
def test_train_into_a_null_device_writes_no_side_file(cli, folder_dataset: Path, devices) -> None:
    result = cli("train", "-d", "folder", "-r", folder_dataset, "-o", devices["null"], *TRAIN)
    assert result.exit_code == 0, result.output
    _still_devices(devices)


@needs_root
def test_a_full_device_gives_one_error_line(cli, tmp_path: Path, devices, folder_dataset: Path) -> None:
    image = make_image(tmp_path / "a.png")
    assert_one_error(cli("count", image, "--csv", devices["full"]), str(devices["full"]), "no space left")
    assert_one_error(cli("count", image, "--json", devices["full"]), "no space left")
    result = cli("train", "-d", "folder", "-r", folder_dataset, "-o", devices["full"], *TRAIN)
    assert_one_error(result, str(devices["full"]), "no space left")
    _still_devices(devices)


@needs_root
def test_an_unknown_block_device_is_refused_before_any_work(cli, tmp_path: Path) -> None:
    """A block device is a disk: refused without being opened (240,77 is an unassigned number)."""
    node = tmp_path / "disk"
    os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(240, 77))
    assert_one_error(cli("count", make_image(tmp_path / "a.png"), "--csv", node), "block device")
    assert stat.S_ISBLK(os.stat(node).st_mode)


def test_a_fifo_is_written_into(cli, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        result = cli("count", make_image(tmp_path / "a.png"), "--csv", fifo)
        received = reader.communicate(timeout=60)[0]
    finally:
        reader.kill()
    assert result.exit_code == 0, result.output
    assert received.startswith(b"image,count")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# -- usage errors at parse time --------------------------------------------------------------------
@pytest.mark.parametrize("grid", ["100000x100000", "65x1", "1x65", "0x3", "99999999999999999999x2"])
def test_grid_out_of_range_is_a_usage_error(cli, folder_dataset: Path, grid: str) -> None:
    result = cli("train", "-d", "folder", "-r", folder_dataset, "-o", "m.npz", "--grid", grid)
    assert_one_error(result, "--grid", "1 to 64" if "x" in grid and not grid.startswith("9999") else "", code=2)


@pytest.mark.parametrize(
    "address", ["not a scheduler::://", "tcp://host", "http://host:8786", "local:0", "local:abc", "tcp://h:99999"]
)
@pytest.mark.parametrize("command", ["count", "features"])
def test_bad_cluster_address_is_a_usage_error(cli, tmp_path: Path, address: str, command: str) -> None:
    result = cli(command, make_image(tmp_path / "a.png"), "--cluster", address)
    line = assert_one_error(result, "--cluster", code=2)
    assert "local:N" in line or "port" in line


def test_bad_cluster_address_is_refused_by_train_before_any_work(cli, folder_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    result = cli("train", "-d", "folder", "-r", folder_dataset, "-o", out, "--cluster", "not a scheduler::://")
    assert_one_error(result, "--cluster", "local:N", code=2)
    assert not out.exists()


# -- SIGTERM is handled like Ctrl-C ---------------------------------------------------------------
def _terminate_when_started(args: list[str], cache: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run the CLI in a process; SIGTERM once its feature cache holds a first entry (work under way)."""
    code = "import sys\nfrom counting.cli.app import main\nsys.argv[0] = 'counting'\nmain()\n"
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COUNTING_CACHE_DIR": str(cache)}
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=str(tmp_path),
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if cache.exists() and any(path.suffix == ".npy" for path in cache.rglob("*")):
            break
        time.sleep(0.05)
    assert process.poll() is None, "the command ended before it could be terminated"
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture
def many_images(tmp_path: Path, mall_root: Path) -> Path:
    """400 distinct real frames (the cache keys on content: copies of one frame are one entry)."""
    folder = tmp_path / "frames"
    folder.mkdir()
    for frame in sorted((mall_root / "frames").glob("seq_*.jpg"))[:400]:
        shutil.copy(frame, folder / frame.name)
    return folder


@pytest.mark.slow
@pytest.mark.slow
def test_sigterm_stops_count_keeping_the_previous_csv(tmp_path: Path, many_images: Path) -> None:
    out = tmp_path / "counts.csv"
    out.write_text("earlier,results\n")
    process = _terminate_when_started(
        ["count", str(many_images), "--csv", str(out), "--batch-size", "4"], tmp_path / "cache", tmp_path
    )
    assert process.returncode == 143, process.stderr
    assert "Traceback" not in process.stderr
    lines = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert lines == [f"error: terminated: {out} is unchanged; the descriptors computed so far are in the feature cache"]
    assert out.read_text() == "earlier,results\n"
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


@pytest.mark.slow
@pytest.mark.slow
def test_sigterm_stops_train_writing_no_model(tmp_path: Path, mall_root: Path) -> None:
    out = tmp_path / "model.npz"
    args = ["train", "-d", "mall", "-r", str(mall_root), "--split", "train=1-300,test=301-400", "-o", str(out)]
    process = _terminate_when_started([*args, "--no-progress", "--batch-size", "4"], tmp_path / "cache", tmp_path)
    assert process.returncode == 143, process.stderr
    assert "Traceback" not in process.stderr
    lines = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert (
        len(lines) == 1 and lines[0].startswith("error: terminated: no model written") and "was not created" in lines[0]
    )
    assert not out.exists()
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]
