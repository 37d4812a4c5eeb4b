"""`count --features` on the rows a features file holds: no rows, NaN rows (each named, the others
counted), and a huge file counted in bounded memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from robust_helpers import DEFAULT_MODEL, assert_one_error


def test_features_file_without_rows_says_so(cli, tmp_path: Path) -> None:
    path = tmp_path / "empty.npy"
    np.save(path, np.zeros((0, 1000), np.float32))
    assert_one_error(cli("count", "--features", path), str(path), "no rows")


def test_features_file_of_nan_rows_names_the_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "failed.npy"
    np.save(path, np.full((3, 1000), np.nan, np.float32))
    # A descriptor model: the default crowd model counts from feature maps, not descriptor files.
    assert_one_error(cli("count", "--features", path, "-m", DEFAULT_MODEL), str(path), "NaN or infinite")


def test_features_file_with_one_nan_row_reports_it_skipped(cli, tmp_path: Path) -> None:
    path = tmp_path / "partly.npy"
    rows = np.random.default_rng(0).normal(size=(3, 1000))
    rows[1] = np.nan
    np.save(path, rows)
    out = tmp_path / "counts.csv"
    result = cli("count", "--features", path, "-m", DEFAULT_MODEL, "--csv", out)
    assert result.exit_code == 0, result.output
    assert "skipped: partly.npy[1]: NaN or infinite features" in result.stderr
    lines = out.read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["partly.npy[0]", "partly.npy[2]"]


@pytest.mark.slow
def test_a_huge_features_file_is_counted_in_bounded_memory(tmp_path: Path) -> None:
    """``count --features`` read a whole (sparse) 8 GB .npy into memory; it is now mapped and
    counted FEATURE_CHUNK rows at a time, and a long run is printed as plain lines."""
    import subprocess
    import sys

    import numpy as np

    path = tmp_path / "sparse.npy"
    rows, dim = 120_000, 1000  # 0.96 GB declared, no disk used
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": (rows, dim)})
        handle.truncate(handle.tell() + rows * dim * 8)
    script = (
        "import sys\n"
        "from counting.cli.app import main\n"
        "sys.argv = ['counting', 'count', '--features', sys.argv[1], '-m', sys.argv[2], '-q']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        # VmHWM, not ru_maxrss: the latter keeps the forking pytest process's peak across exec.
        "hwm = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0]\n"
        "print('peak-mb', int(hwm.split()[1]) // 1024, file=sys.stderr)\n"
    )
    # 1000-d class scores: the Mall descriptor model (the default crowd model counts from maps).
    descriptor_model = Path(__file__).resolve().parents[2] / "models" / "default.npz"
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(descriptor_model)], capture_output=True, text=True, timeout=600
    )
    lines = done.stdout.splitlines()
    assert lines[0].split("\t") == ["image", "count", "low", "high", "familiarity", "unfamiliar"]
    assert len(lines) == rows + 1
    peak = int(done.stderr.split("peak-mb")[-1])
    # The model and libraries take ~0.35 GB; reading the file whole took 1 GB more.
    assert peak < 700, done.stderr
