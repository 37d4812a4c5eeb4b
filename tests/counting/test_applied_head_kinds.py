"""A head kind registered with one line in counting.heads.registry.HEADS counts through
CountingModel (files, prepared inputs, model file round trip, summary) with no edit of the model."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from agp import AGPRegressor
from counting.core.errors import ModelFileError
from counting.heads.applied import (
    Chunking,
    DensityHeadApplied,
    DescriptorHead,
    PathRows,
    PreparedRows,
)
from counting.heads.registry import HEADS, RegisteredHead, applied_head_for
from counting.model.counting_model import CountingModel

INPUT_SIZE = 64


@dataclass
class BrightnessHead:
    """A toy head: a picture's row is its prepared input's mean times ``scale``."""

    scale: float


class BrightnessKind:
    """Every member of the AppliedHead protocol, and nothing of counting.model."""

    name: ClassVar[str] = "brightness"
    section: ClassVar[str | None] = "brightness_head"
    field: ClassVar[str | None] = "head"
    probe: ClassVar[str] = "descriptor"

    def __init__(self, head: BrightnessHead) -> None:
        self.head = head

    @classmethod
    def head_of(cls, model: Any) -> Any:
        head = getattr(model, "head", None)
        return head if isinstance(head, BrightnessHead) else None

    @classmethod
    def from_document(cls, record: Any, source: str) -> Any:
        if not isinstance(record, dict) or not isinstance(record.get("scale"), float):
            raise ModelFileError(f"{source}: brightness head: expected a scale")
        return BrightnessHead(record["scale"])

    def document(self) -> dict[str, Any]:
        return {"brightness_head": {"scale": self.head.scale}}

    def summary(self) -> dict[str, Any]:
        return {"density_head": f"brightness x{self.head.scale}"}

    def check_backbone(self, model: Any, backbone: Any) -> None:
        if model.feature_dim != 1:
            raise ModelFileError(f"{model.name}: a brightness head gives 1 number per picture")

    def familiarity_dim(self, model: Any) -> int:
        return 1

    def _rows(self, tensors: Sequence[Any]) -> np.ndarray:
        return np.array([[float(np.asarray(tensor).mean()) * self.head.scale] for tensor in tensors])

    def rows_of_paths(self, model, sources, weights, cache, batch_size, progress, chunking, **options) -> PathRows:
        from counting.data.imaging import load_image

        backbone = model.get_backbone(weights)
        features = np.full((len(sources), 1), np.nan)
        ok = np.zeros(len(sources), dtype=bool)
        errors: dict[str, str] = {}
        for k, source in enumerate(sources):
            try:
                tensor = backbone.prepare(load_image(source), model.preprocessing(), source)
            except Exception as error:  # noqa: BLE001 - the toy reports any failure
                errors[source] = str(error).splitlines()[0]
                continue
            features[k], ok[k] = self._rows([tensor])[0], True
        return PathRows(features, ok, errors, features if options.get("with_probes") else None)

    def probes_of_paths(self, model, sources, weights, cache, batch_size, progress, chunking) -> PathRows:
        rows = self.rows_of_paths(model, sources, weights, cache, batch_size, progress, chunking)
        return PathRows(rows.features, rows.ok, rows.errors, rows.features)

    def rows_of_prepared(self, model, tensors, weights, chunking: Chunking) -> PreparedRows:
        return PreparedRows(self._rows(tensors))


@pytest.fixture
def brightness_model(monkeypatch: pytest.MonkeyPatch) -> CountingModel:
    monkeypatch.setitem(HEADS, "brightness", RegisteredHead(None, BrightnessKind))  # the registry line
    rng = np.random.default_rng(3)
    X = rng.uniform(-2.0, 2.0, size=(80, 1))
    y = 10.0 + 4.0 * X[:, 0]
    regressor = AGPRegressor(n_centers=5, max_epochs=3, validation_fraction=10, random_state=0).fit(X, y)
    return CountingModel(regressor=regressor, input_size=INPUT_SIZE, head=BrightnessHead(2.0))


def test_built_in_kinds_are_chosen_from_the_model_fields() -> None:
    holder = type("Fields", (), {"density_head": object(), "class_density_head": None, "head": None})()
    assert isinstance(applied_head_for(holder), DensityHeadApplied)
    holder.density_head = None
    kind = applied_head_for(holder)
    assert type(kind) is DescriptorHead and kind.document() == {} and kind.probe == "descriptor"


def test_a_registered_kind_counts_files_and_prepared_inputs(brightness_model: CountingModel, mall_root: Path) -> None:
    frames = [str(path) for path in sorted((mall_root / "frames").glob("seq_0000*.jpg"))[:3]]
    frames.insert(1, str(mall_root / "missing.jpg"))
    model = brightness_model
    assert isinstance(model.applied_head, BrightnessKind)
    result = model.count_paths(frames)
    np.testing.assert_array_equal(result.ok, [True, False, True, True])
    assert list(result.errors) == [frames[1]]

    from counting.data.imaging import load_image

    backbone = model.get_backbone()
    tensors = [backbone.prepare(load_image(path), model.preprocessing(), path) for path in frames[::2] + frames[3:]]
    means = np.array([float(np.asarray(tensor).mean()) for tensor in tensors])
    assert np.ptp(means) > 1e-3  # the frames differ, so the counts below can tell them apart
    expected = np.clip(np.asarray(model.regressor.predict(2.0 * means[:, None])), 0, None)
    np.testing.assert_allclose(result.counts[result.ok], expected, rtol=0, atol=1e-9)
    assert np.isnan(result.counts[1]) and result.familiarity is None

    batch = model.count_batch(tensors, with_density=True)
    np.testing.assert_allclose(batch.counts, expected, rtol=0, atol=1e-9)
    assert batch.familiarity is None and batch.density is None and batch.people is None
    probes, ok, _ = model.probe_paths(frames)
    np.testing.assert_allclose(probes[ok][:, 0], 2.0 * means, rtol=0, atol=1e-9)
    assert model.familiarity_dim() == 1 and model.summary()["density_head"] == "brightness x2.0"


def test_a_registered_kind_round_trips_through_the_model_file(
    brightness_model: CountingModel, tmp_path: Path, mall_root: Path
) -> None:
    path = brightness_model.save(tmp_path / "brightness.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown section would warn: the schema knows the kind's
        loaded = CountingModel.load(path)
    assert loaded.head == BrightnessHead(2.0) and isinstance(loaded.applied_head, BrightnessKind)
    frames = [str(path) for path in sorted((mall_root / "frames").glob("seq_0000*.jpg"))[:2]]
    np.testing.assert_array_equal(loaded.count_paths(frames).counts, brightness_model.count_paths(frames).counts)

    # A damaged section is refused in one line naming the file.
    metadata = loaded.metadata()
    metadata["brightness_head"] = {"scale": "bright"}
    broken = tmp_path / "broken.npz"
    loaded.regressor.save(broken, metadata=metadata)
    with pytest.raises(ModelFileError, match=r"broken\.npz: brightness head: expected a scale"):
        CountingModel.load(broken)


def test_an_unregistered_kind_section_is_unknown(
    brightness_model: CountingModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without its registry line the section is an unknown field (warned), not a head."""
    path = brightness_model.save(tmp_path / "brightness.npz")
    monkeypatch.delitem(HEADS, "brightness")
    with pytest.warns(UserWarning, match="brightness_head"):
        model = CountingModel.load(path)
    assert model.head is None and type(model.applied_head) is DescriptorHead
    json.dumps(model.summary())


def test_every_registered_kind_has_both_sides_under_its_name() -> None:
    for name, entry in HEADS.items():
        assert entry.applied.name == name
        assert entry.training is not None and entry.training.name == name
    assert list(HEADS)[-1] == "descriptors"  # the fallback, matched last
