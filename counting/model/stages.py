"""The stages of the count after the head, registered once (as the head kinds are,
counting.heads.registry): each owns a section of the model file, reads and writes it, and is
built from the model it is part of. The order is the order of the count.

A new stage is its class (counting.heads.stage's interface), the ModelFile field holding its
state (named as its section), its section's reader and writer, and one line in :data:`STAGES`;
the model file and ``CountingModel`` ask this registry (tests/counting/test_count_stages.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from counting.core.errors import ModelFileError
from counting.heads.crowd.gate_stage import SparseGateStage
from counting.heads.crowd.intervals import IntervalStage
from counting.heads.crowd.sparse_gate import SparseGate, SparseGateError
from counting.heads.familiarity import Familiarity, FamiliarityError, FamiliarityStage
from counting.heads.stage import Stage
from counting.heads.uncertainty import ConformalInterval

__all__ = ["STAGES", "RegisteredStage", "interval_stage", "stages_of"]


@dataclass(frozen=True)
class RegisteredStage:
    """One stage: its model file section, the model field holding its state, how the section is
    read (ModelFileError on a bad one) and written, and the stage built from a model (None where
    the model has no such stage)."""

    section: str
    read: Callable[[Any], Any]
    write: Callable[[Any], Any]
    build: Callable[[Any], Stage | None]

    @property
    def field(self) -> str:
        return self.section


def _read_familiarity(record: Any) -> Familiarity:
    try:
        return Familiarity.from_document(record)
    except FamiliarityError as error:
        raise ModelFileError(str(error)) from None


def _read_sparse_gate(record: Any) -> SparseGate:
    try:
        return SparseGate.from_document(record)
    except SparseGateError as error:
        raise ModelFileError(str(error)) from None


def _head_stride(model: Any) -> int:
    """The density head's stride (8 for the conv head; the closed-form head's is the maps')."""
    return int(model.density_head.stride)


def interval_stage(model: Any) -> IntervalStage | None:
    """The model's interval stage, reading its density head's router and specialists (a crowd
    model's) to name each picture's route; None for a model without calibration."""
    if model.interval is None:
        return None
    head = model.density_head
    if head is None:
        return IntervalStage(model.interval)
    return IntervalStage(model.interval, head.router, tuple(head.specialists))


def _gate_stage(model: Any) -> SparseGateStage | None:
    if model.sparse_gate is None:
        return None
    return SparseGateStage(model.sparse_gate, model.familiarity, _head_stride(model))


STAGES: tuple[RegisteredStage, ...] = (
    RegisteredStage(
        "familiarity",
        _read_familiarity,
        Familiarity.to_document,
        lambda model: None if model.familiarity is None else FamiliarityStage(model.familiarity),
    ),
    RegisteredStage("sparse_gate", _read_sparse_gate, SparseGate.to_document, _gate_stage),
    RegisteredStage("interval", ConformalInterval.from_dict, ConformalInterval.to_dict, interval_stage),
)


def stages_of(model: Any) -> list[Stage]:
    """The stages ``model`` holds, in the order of the count."""
    return [stage for entry in STAGES if (stage := entry.build(model)) is not None]
