"""Known debts of the command line, each fixed with a test that failed before the fix."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from robust_helpers import (
    DEFAULT_MODEL,
    REPO_ROOT,
    assert_one_error,
    assert_process_one_error,
    assert_unchanged,
    file_size_limit,
    make_image,
    make_video,
    run_cli_process,
    snapshot,
)

from counting.model.counting_model import load_model


def _truncated_jpeg(path: Path, size: tuple[int, int]) -> Path:
    buffer = io.BytesIO()
    pixels = np.random.default_rng(5).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])  # the header says the same size
    return path


def test_features_stopping_at_a_bad_image_with_strict_and_the_next_run_resumes(cli, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for k in range(9):
        make_image(folder / f"a{k}.png", size=(64, 48), seed=k)
    bad = _truncated_jpeg(folder / "z.jpg", (64, 48))
    out = tmp_path / "f.npy"
    result = cli("features", folder, "-o", out, "--batch-size", "4", "--no-progress", "--strict")
    line = assert_one_error(result, str(bad), "truncated", "--strict")
    assert "feature cache" in line
    assert not out.exists()
    # Two whole batches of four ran before the bad one: the next run takes them from the cache.
    result = cli("features", folder, "-o", out, "--batch-size", "4", "--no-progress")  # skips it
    assert result.exit_code == 0, result.output
    assert "9 of 10 images: 8 from cache, 1 computed, 1 skipped" in result.stdout
    assert np.isnan(np.load(out)[9]).all() and np.isfinite(np.load(out)[:9]).all()


def test_features_bad_image_without_a_cache_does_not_promise_one(cli, tmp_path: Path) -> None:
    bad = _truncated_jpeg(tmp_path / "z.jpg", (64, 48))
    line = assert_one_error(cli("features", bad, "--no-cache", "--no-progress", "--strict"), str(bad), "--strict")
    assert "cache" not in line


# -- per-class columns: one scheme for `count` and `video` ----------------------------------------
def test_count_and_video_name_per_class_columns_alike(cli, tmp_path: Path) -> None:
    # Was: `count` wrote `person`, `person_low`; `video` wrote `count_person` and no interval.
    model = REPO_ROOT / "models" / "voc20.npz"
    image = make_image(tmp_path / "photo.png", size=(160, 120))
    clip = make_video(tmp_path / "clip.avi", n_frames=2, size=(160, 120))
    result = cli("count", image, "-m", model, "--csv", tmp_path / "count.csv")
    assert result.exit_code == 0, result.output
    result = cli("video", clip, "-m", model, "--csv", tmp_path / "video.csv", "--quiet")
    assert result.exit_code == 0, result.output
    count_header = _header(tmp_path / "count.csv")
    video_header = _header(tmp_path / "video.csv")
    per_class = [f"{kind}_{name}" for name in ("person", "cat") for kind in ("count", "low", "high")]
    for column in per_class:
        assert column in count_header and column in video_header, column
    assert count_header[:2] == ["image", "total"] and video_header[:2] == ["frame", "time_s"]
    assert not {"person", "person_low", "low", "high", "count"} & set(count_header + video_header)


def _header(path: Path) -> list[str]:
    with open(path, newline="") as handle:
        return next(csv.reader(handle))


# -- --show-above on a single-count model ---------------------------------------------------------
def test_show_above_on_a_single_count_model_is_refused(cli, features_file: Path) -> None:
    # Was: exit 0, the option silently ignored.
    mall = ("-m", DEFAULT_MODEL)  # a descriptor model (the default crowd model reads feature maps)
    assert_one_error(
        cli("count", "--features", features_file, *mall, "--show-above", "2"), "default.npz", "--show-above"
    )
    assert cli("count", "--features", features_file, *mall).exit_code == 0


# -- Ctrl-C during `counting train` -----------------------------------------------------------------
def _train(root: Path, out: Path) -> list:
    return ["train", "-d", "folder", "-r", root, "-o", out, "--input-size", "64", "--centers", "3",
            "--epochs", "2", "--no-progress"]  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_while_fitting_keeps_the_old_model_and_says_so(tmp_path: Path, folder_dataset: Path) -> None:
    # A real SIGINT in the middle of the fit. Was: exit 130 with a bare "interrupted".
    out = tmp_path / "model.npz"
    shutil.copy(DEFAULT_MODEL, out)
    before = snapshot(out)
    preamble = (
        "import os, signal, time, agp\n"
        "def fit(self, *args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "agp.AGPRegressor.fit = fit\n"
    )
    process = run_cli_process(*_train(folder_dataset, out), preamble=preamble)
    line = assert_process_one_error(process, "interrupted: no model written", f"{out} is unchanged", code=130)
    assert "feature cache" in line
    assert_unchanged(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "feature-cache", "model.npz"]


def test_ctrl_c_during_the_test_evaluation_writes_no_model(
    cli, tmp_path: Path, folder_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.evaluate.evaluation

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(counting.evaluate.evaluation, "evaluate_model", interrupted)
    out = tmp_path / "new.npz"
    result = cli(*_train(folder_dataset, out), "--no-cache")
    line = assert_one_error(result, "interrupted: no model written", f"{out} was not created", code=130)
    assert "cache" not in line
    assert not out.exists()


def test_ctrl_c_after_the_save_says_the_model_is_saved(
    cli, tmp_path: Path, folder_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import counting.evaluate.plots

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(counting.evaluate.plots, "plot_loss", interrupted)
    out = tmp_path / "new.npz"
    assert_one_error(cli(*_train(folder_dataset, out)), f"interrupted: model saved to {out}", code=130)
    assert load_model(out).input_size == 64


# -- `counting --help` / `--version` start fast ---------------------------------------------------
def _heavy_after_each(runs: list[list[str]], heavy: tuple[str, ...]) -> tuple[list[list[str]], str]:
    """Runs ``counting ARGS`` for each of ``runs`` in one fresh interpreter: the libraries of
    ``heavy`` imported after each run (a module once imported stays), and stdout."""
    code = (
        "import json, sys\n"
        "from counting.cli.app import main\n"
        f"for arguments in {runs!r}:\n"
        "    sys.argv = ['counting', *arguments]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        f"    print('heavy:', json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)\n"
    )
    process = subprocess.run(  # noqa: PLW1510 - checked below
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    )
    assert process.returncode == 0, process.stderr
    found = [
        json.loads(line.removeprefix("heavy: ")) for line in process.stderr.splitlines() if line.startswith("heavy: ")
    ]
    assert len(found) == len(runs), process.stderr[-2000:]
    return found, process.stdout


@pytest.mark.parametrize("argument", ["--help", "--version"])
def test_top_level_help_and_version_import_no_heavy_library(argument: str) -> None:
    # Was: every command module imported up front, with torch, scikit-learn and Dask (~4-6 s on
    # a busy 2-core machine; 0.3-0.5 s now, scripts/bench_cli_startup.py).
    found, stdout = _heavy_after_each([[argument]], ("torch", "sklearn", "distributed", "cv2", "scipy"))
    assert found == [[]]
    assert ("counting count" in stdout and "compare" in stdout) if argument == "--help" else True


def test_each_commands_help_imports_no_heavy_library() -> None:
    # Was: `counting count --help` (or a refused option, or serve's missing config) took 6-7 s:
    # the command modules imported the model, the training pipeline and Dask before typer parsed
    # anything (about 1 s now, scripts/bench_cli_startup.py). OpenCV is allowed: `features`
    # reads images with it.
    from counting.cli.app import COMMANDS

    found, _ = _heavy_after_each([[name, "--help"] for name in COMMANDS], ("torch", "sklearn", "distributed", "scipy"))
    assert dict(zip(COMMANDS, found)) == {name: [] for name in COMMANDS}


def test_a_mistyped_picture_config_or_method_is_refused_before_the_heavy_imports(tmp_path: Path) -> None:
    # Was: 6-10 s of imports and the model's load before "no such file or folder".
    runs = [
        ["count", str(tmp_path / "nope.jpg")],
        ["serve", str(tmp_path / "absent.toml")],
        ["compare", "-d", "mall", "-r", str(tmp_path), "--methods", "ridge,nonsense"],
        ["features", str(tmp_path / "a.jpg"), "-o", str(tmp_path / "descriptors.txt")],
    ]
    found, _ = _heavy_after_each(runs, ("torch", "sklearn", "distributed", "scipy", "onnxruntime"))
    assert found == [[], [], [], []]


def test_every_command_still_runs_and_shows_its_help(cli) -> None:
    for name in ("train", "evaluate", "report", "count", "video", "features", "compare"):
        result = cli(name, "--help")
        assert result.exit_code == 0 and "Usage:" in result.stdout and "--help" in result.stdout, name


# -- full disk and Ctrl-C during `counting features` ---------------------------------------------
@pytest.mark.slow
def test_full_disk_for_a_new_features_file_does_not_mention_a_previous_file(tmp_path: Path) -> None:
    # Was: "...; the previous file is unchanged" when there never was one.
    image = make_image(tmp_path / "a.png", size=(64, 48))
    out = tmp_path / "out" / "f.csv"
    out.parent.mkdir()
    process = run_cli_process("features", image, "-o", out, "--no-progress", preamble=file_size_limit(2_000))
    assert_process_one_error(process, str(out), "cannot write (File too large); no file was created")
    assert list(out.parent.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_during_features_keeps_what_was_extracted_and_the_next_run_resumes(
    tmp_path: Path, _private_cache
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for k in range(12):
        make_image(folder / f"a{k:02d}.png", size=(64, 48), seed=k)
    out = tmp_path / "f.npy"
    # A real SIGINT once the fourth descriptor is in the cache (batches of two).
    preamble = (
        "import os, signal\n"
        "from counting.features.cache import FeatureCache\n"
        "put, stored = FeatureCache.put, []\n"
        "def counted(self, *args):\n"
        "    put(self, *args)\n"
        "    stored.append(1)\n"
        "    if len(stored) == 4:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "FeatureCache.put = counted\n"
    )
    args = ("features", folder, "-o", out, "--batch-size", "2", "--no-progress")
    process = run_cli_process(*args, preamble=preamble)
    line = assert_process_one_error(process, "interrupted: no descriptors file written", "feature cache", code=130)
    assert "Traceback" not in process.stderr, line
    assert not out.exists()
    process = run_cli_process(*args)
    assert process.returncode == 0, process.stderr
    assert "12 of 12 images: 4 from cache, 8 computed, 0 skipped" in process.stdout
