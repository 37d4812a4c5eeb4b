"""Model files whose stage sections (interval, sparse gate) or format version were edited by hand:
each is refused in one line naming the file and the problem, and never makes a count whose
records are not what the files promise (strict JSON, a low end that is not above the high end)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from robust_helpers import REPO_ROOT, assert_one_error, error_lines, make_image, model_parts, write_model

import counting
from counting.core.errors import ModelFileError

CROWD = REPO_ROOT / "models" / "crowd.npz"
MALL_SUMS = REPO_ROOT / "models" / "mall-sums.npz"


def _edited(source: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of ``source`` with ``change`` applied to its counting metadata."""
    arrays, document = model_parts(source)
    change(document["user_metadata"])
    return write_model(target, arrays, document)


def _strict_json(path: Path) -> Any:
    """The file's JSON, refusing NaN and Infinity (which JSON does not have; browsers and
    `jq` reject a file holding them)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{path}: {constant} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("key", ["count_index", "axes"])
def test_infinite_integer_in_the_sparse_gate_is_a_model_file_error(cli, tmp_path: Path, key: str) -> None:
    # Was: OverflowError ("cannot convert float infinity to integer") from load_model and a
    # traceback from `counting count`; `Infinity` is what Python's json writes for float("inf").
    model = _edited(CROWD, tmp_path / "gate.npz", lambda meta: meta["sparse_gate"].__setitem__(key, math.inf))
    with pytest.raises(ModelFileError, match=str(model)):
        counting.load_model(model)
    image = make_image(tmp_path / "photo.png")
    assert_one_error(cli("count", "-m", model, image), str(model), "sparse gate")


@pytest.mark.parametrize("version", [None, "3", 3.0], ids=["missing", "text", "float"])
def test_format_version_that_is_not_an_integer_is_not_called_newer(tmp_path: Path, version: Any) -> None:
    # Was: "counting model format version None is newer than this version of counting reads (3);
    # upgrade counting": upgrading does not help a file that lost or mangled its version.
    def change(meta: dict[str, Any]) -> None:
        if version is None:
            del meta["format_version"]
        else:
            meta["format_version"] = version

    model = _edited(MALL_SUMS, tmp_path / "version.npz", change)
    with pytest.raises(ModelFileError) as caught:
        counting.load_model(model)
    message = str(caught.value)
    assert str(model) in message, message
    assert "format_version" in message or "format version" in message, message
    assert "newer" not in message and "upgrade" not in message, message


def test_interval_lower_bound_above_any_count_is_refused_or_kept_below_the_count(cli, tmp_path: Path) -> None:
    # Was: loaded and counted with exit 0; every picture got low = 1e308, above its count and high.
    model = _edited(MALL_SUMS, tmp_path / "bound.npz", lambda meta: meta["interval"].__setitem__("lower_bound", 1e308))
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    out = tmp_path / "counts.json"
    result = cli("count", "-q", "-m", model, image, "--json", out)
    if result.exit_code == 1:
        assert_one_error(result, str(model), "lower_bound")
        assert not out.exists()
        return
    assert result.exit_code == 0, result.output
    (row,) = _strict_json(out)["images"]
    assert row["low"] <= row["count"] <= row["high"], row


@pytest.mark.parametrize("quantile", [None, 1e308], ids=["infinite", "overflowing"])
def test_count_json_stays_json_with_an_unbounded_interval(cli, tmp_path: Path, quantile: float | None) -> None:
    # ``null`` is how a model file writes an infinite quantile (ConformalInterval.to_dict: too few
    # calibration pictures); 1e308 passes the file's checks and overflows when scaled.
    # Was: exit 0 and `"high": Infinity` in the --json file, which is not JSON.
    model = _edited(MALL_SUMS, tmp_path / "wide.npz", lambda meta: meta["interval"].__setitem__("quantile", quantile))
    image = make_image(tmp_path / "frame.png", size=(640, 480))
    out = tmp_path / "counts.json"
    result = cli("count", "-q", "-m", model, image, "--json", out)
    if quantile is not None and result.exit_code == 1:
        # Refusing the overflowing quantile as a bad model file is as good as writing JSON.
        assert_one_error(result, str(model))
        assert not out.exists()
        return
    assert result.exit_code == 0, result.output
    assert not error_lines(result.stderr), result.stderr
    (row,) = _strict_json(out)["images"]
    assert row["image"] == str(image)
    assert math.isfinite(row["count"])
    assert row["high"] is None or (isinstance(row["high"], float) and math.isfinite(row["high"]))


@pytest.mark.parametrize("version", [0, -1])
def test_familiarity_version_below_the_first_is_refused(tmp_path: Path, version: int) -> None:
    # Was: loaded as if it were version 1 (only versions above the current one were refused; the
    # file's own format_version below 1 is refused).
    model = _edited(MALL_SUMS, tmp_path / "old.npz", lambda meta: meta["familiarity"].__setitem__("version", version))
    with pytest.raises(ModelFileError, match="familiarity"):
        counting.load_model(model)
