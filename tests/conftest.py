"""Shared test fixtures.

Real data lives in ``../shared/data`` beside the checkout; ``COUNTING_SHARED_DATA`` overrides
that location. In CI (``CI`` set) a missing folder fails loudly; on a laptop without it the
tests that need it are skipped.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# A shell that starts the suite in the background ignores SIGINT, the processes the Ctrl-C tests
# start inherit that, and Python then never raises KeyboardInterrupt in them: restore it (a
# handler, unlike SIG_IGN, is reset to the default in every process started from here).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# pytest-xdist starts its workers with COLUMNS=80, and rich then fixes the CLI console's width
# when counting.cli.common is imported: tables cut the workers' long temporary paths
# ("seq_0000…") and a test's own env={"COLUMNS": ...} no longer widens them. Without it the
# console reads COLUMNS at each print, as in a plain `pytest` run.
os.environ.pop("COLUMNS", None)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("COUNTING_SHARED_DATA", str(REPO_ROOT.parent / "shared" / "data"))).resolve()


def _require(path: Path) -> Path:
    if not path.exists():
        message = (
            f"{path}: real test data not found; set COUNTING_SHARED_DATA to the folder "
            "holding mall-train/, shanghaitech-B-train/ and voc2007-mini/"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return _require(SHARED_DATA)


@pytest.fixture(scope="session")
def mall_root(shared_data: Path) -> Path:
    return _require(shared_data / "mall-train")


@pytest.fixture(scope="session")
def shanghaitech_root(shared_data: Path) -> Path:
    return _require(shared_data / "shanghaitech-B-train")


@pytest.fixture(scope="session")
def voc_root(shared_data: Path) -> Path:
    return _require(shared_data / "voc2007-mini" / "VOCdevkit")


@pytest.fixture(scope="session")
def ucsd_real_root(shared_data: Path) -> Path:
    """The real UCSD annotation files (vidf-cvpr/) and the only two real frames (vidf/)."""
    return _require(shared_data / "ucsd-real")


@pytest.fixture(scope="session")
def coco_voc20_root(shared_data: Path) -> Path:
    """559 real photos (MS COCO) with the 20 VOC classes' boxes, VOC-2007 layout, trainval only."""
    return _require(shared_data / "coco-voc20" / "VOCdevkit" / "VOC2007")


@pytest.fixture(autouse=True, scope="session")
def _session_onnx_exports(tmp_path_factory: pytest.TempPathFactory):
    """Backbones exported to ONNX once per test session, in its own folder (not the user's cache)."""
    previous = os.environ.get("COUNTING_ONNX_DIR")
    os.environ["COUNTING_ONNX_DIR"] = str(tmp_path_factory.mktemp("onnx-exports"))
    yield
    if previous is None:
        os.environ.pop("COUNTING_ONNX_DIR", None)
    else:
        os.environ["COUNTING_ONNX_DIR"] = previous


@pytest.fixture(scope="session")
def session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One feature cache for the whole test session, so real images are encoded once."""
    return tmp_path_factory.mktemp("feature-cache")


@pytest.fixture(scope="session")
def detector_files() -> None:
    """The COCO detector's files can be had (present, npm, or $COUNTING_DETECTOR_SOURCE): else
    the test is skipped with the reason, and fails in CI, which must run the real detector."""
    import shutil

    from counting.features.detector.fetch import SOURCE_ENV, model_files_present

    if not model_files_present() and shutil.which("npm") is None and not os.environ.get(SOURCE_ENV):
        if os.environ.get("CI"):
            pytest.fail("CI must run the real detector: npm is missing")
        pytest.skip(f"the detector's files cannot be had here: no npm and no {SOURCE_ENV}")
