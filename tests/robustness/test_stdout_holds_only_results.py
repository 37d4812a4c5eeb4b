"""Results on stdout, diagnostics on stderr: a pipe reading stdout gets only the results."""

from __future__ import annotations

from pathlib import Path

from counting.model.counting_model import default_model_path


def test_stdout_holds_only_results_when_a_pipe_reads_them(cli, tmp_path: Path, monkeypatch) -> None:
    """Past 2000 rows `count --features` prints plain lines; "counts written to" went to stdout
    after them. `features -o -q` printed its summary although -q drops informational lines."""
    import numpy as np
    from robust_helpers import make_image

    from counting.cli import count as count_command

    monkeypatch.setattr(count_command, "TABLE_ROWS", 2)
    features = tmp_path / "f.npy"
    np.save(features, np.random.default_rng(0).normal(size=(3, 1000)))
    # A descriptor model (the default crowd model counts from feature maps, not descriptor files).
    mall = default_model_path().parent / "default.npz"
    result = cli("count", "--features", features, "-m", mall, "--csv", tmp_path / "c.csv")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0]
    assert header == "image\tcount\tlow\thigh\tfamiliarity\tunfamiliar" and len(result.stdout.splitlines()) == 4
    assert "counts written to" in result.stderr
    image = make_image(tmp_path / "a.png")
    quiet = cli("features", image, "-o", tmp_path / "d.npy", "--no-cache", "--no-progress", "-q")
    assert quiet.exit_code == 0 and quiet.stdout == ""
