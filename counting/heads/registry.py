"""Every head kind, registered once: how ``train`` fits it (:mod:`counting.heads.kinds`) and how
a model file holding it counts (:mod:`counting.heads.applied`).

A new head kind is its two classes (in the head's own module, or beside the built-in ones) and
one line in :data:`HEADS`; nothing else changes (``train_model``, ``CountingModel`` and the model
file schema ask this registry). The order matters where a model's fields are matched to a kind:
the first kind that finds its head in the model wins, and ``descriptors``, which needs no head,
comes last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from counting.heads.applied import AppliedHead, ClassDensityHeadApplied, DensityHeadApplied, DescriptorHead
from counting.heads.kinds import ClassDensityRows, DensityRows, DescriptorRows, HeadKind

__all__ = ["HEADS", "RegisteredHead", "applied_head_for", "head_kind_for", "head_sections", "read_head_sections"]


@dataclass(frozen=True)
class RegisteredHead:
    """One head kind: its training side and its model side (both named by the registry key).
    ``training`` None: a kind model files may hold but ``train`` does not fit (a head fitted by
    other code)."""

    training: HeadKind | None
    applied: type[AppliedHead]


HEADS: dict[str, RegisteredHead] = {
    "density": RegisteredHead(DensityRows(), DensityHeadApplied),
    "class-density": RegisteredHead(ClassDensityRows(), ClassDensityHeadApplied),
    "descriptors": RegisteredHead(DescriptorRows(), DescriptorHead),
}


def head_kind_for(config: Any, multi_output: bool) -> HeadKind:
    """The kind a training config asks for: ``--density-head`` picks a density head (per class
    on VOC), else descriptors."""
    name = "descriptors" if not config.density_head else "class-density" if multi_output else "density"
    kind = HEADS[name].training
    assert kind is not None  # the built-in kinds are all trainable
    return kind


def applied_head_for(model: Any) -> AppliedHead:
    """The kind of ``model``'s head (from its fields), holding the head."""
    for entry in HEADS.values():
        head = entry.applied.head_of(model)
        if head is not None:
            return entry.applied(head)
    return HEADS["descriptors"].applied()


def head_sections() -> tuple[str, ...]:
    """The model file keys of every registered kind's head section (the schema knows them)."""
    return tuple(entry.applied.section for entry in HEADS.values() if entry.applied.section is not None)


def read_head_sections(metadata: dict[str, Any], source: str) -> dict[str, Any]:
    """The CountingModel fields of the heads a model file's metadata holds (``{field: head}``)."""
    fields: dict[str, Any] = {}
    for entry in HEADS.values():
        kind = entry.applied
        if kind.section is not None and kind.field is not None and metadata.get(kind.section) is not None:
            fields[kind.field] = kind.from_document(metadata[kind.section], source)
    return fields
