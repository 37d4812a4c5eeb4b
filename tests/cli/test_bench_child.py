"""The memory benchmarks' child process (scripts/peak_rss.py) runs the CLI from its public
surface (`from counting.cli import main`) and reports its own peak RSS."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from counting.core.version import __version__

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "peak_rss.py"


def test_the_child_runs_counting_and_reports_its_peak_rss(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("peak_rss", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    done, seconds, peak = module.run_counting(["--version"], tmp_path / "peak.txt")
    assert done.returncode == 0, done.stderr
    assert __version__ in done.stdout
    # An interpreter that imported counting holds tens of MB; the report is the child's own.
    assert peak is not None and 10 < peak < 4000
    assert seconds > 0
