"""The shipped models (``models/*.npz``) as `counting models list` shows them: what each is for,
what kind of model it is and the figures measured on it, with the data they were measured on.

Everything is read from the files themselves (each model's metadata: its training settings, its
validation and test figures) and, for what a file does not hold, from the README's table "Which
model for which pictures" (what pictures a model is for; the held-out figures of a model whose file
records only its out-of-fold ones). Nothing here is written down twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The README's table of the shipped models: its header row, then one row per use.
DOCS_TABLE_HEADER = "| pictures | model | measured |"


@dataclass(frozen=True)
class DocsRow:
    """One row of the README's model table: what pictures, which models, the first one's figures."""

    purpose: str
    models: tuple[str, ...]  # file stems, the row's own model first
    measured: str


@dataclass(frozen=True)
class ModelSummary:
    """One shipped model as `counting models list` shows it."""

    name: str
    path: Path
    purpose: str
    kind: str
    figures: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # the file could not be read: why

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": str(self.path),
            "for": self.purpose,
            "kind": self.kind,
            "figures": self.figures,
            "classes": self.metadata.get("class_names"),
            "validation_metrics": self.metadata.get("validation_metrics") or None,
            "test_metrics": self.metadata.get("test_metrics") or None,
            "problem": self.problem,
        }


def docs_rows(readme: Path) -> list[DocsRow]:
    """The rows of the README's model table (none when there is no README, e.g. an installed copy)."""
    try:
        lines = readme.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    if DOCS_TABLE_HEADER not in lines:
        return []
    rows = []
    for line in lines[lines.index(DOCS_TABLE_HEADER) + 2 :]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            continue
        names = tuple(re.findall(r"([\w.-]+)\.npz", cells[1]))
        if names:
            rows.append(DocsRow(purpose=cells[0].replace("`", ""), models=names, measured=cells[2].replace("`", "")))
    return rows


def summarise(path: Path, docs: list[DocsRow]) -> ModelSummary:
    """``path``'s summary from its metadata (and the README's row naming it)."""
    from agp.persistence import read_model_file

    name = path.stem
    try:
        _, document, _ = read_model_file(path)
    except (ValueError, OSError) as error:
        return ModelSummary(name, path, purpose="", kind="", problem=str(error).removeprefix(f"{path}: "))
    metadata = document.get("user_metadata") or {}
    row = next((row for row in docs if name in row.models), None)
    figures = measured_figures(metadata)
    if row is not None and row.models[0] == name and not metadata.get("test_metrics"):
        # The file records no held-out figures; the README gives those the model was chosen on.
        figures.append(f"README.md: {row.measured}")
    purpose = row.purpose if row is not None else trained_for(metadata)
    return ModelSummary(name, path, purpose=purpose, kind=model_kind(metadata), figures=figures, metadata=metadata)


def trained_for(metadata: dict[str, Any]) -> str:
    """What a model the README does not name is for: pictures like those it was trained on."""
    dataset = metadata.get("dataset") or {}
    return dataset.get("trained_on") or f"pictures like those of {dataset.get('name', 'its training data')}"


def model_kind(metadata: dict[str, Any]) -> str:
    """What the model counts and how: ``one count: conv density head on efficientnet-lite0 maps + ...``."""
    classes = metadata.get("class_names")
    counted = f"per-class counts ({len(classes)} classes)" if classes else "one count"
    training = metadata.get("training") or {}
    backbone = (metadata.get("backbone") or {}).get("name") or training.get("backbone", "?")
    parts = []
    head = metadata.get("density_head")
    if head:
        parts.append(f"{head.get('head_kind', '')} density head on {backbone} maps".strip())
    parts.append(_descriptor_text(metadata, backbone))
    if training.get("kernel"):
        centres = f", {training['n_centers']} centres" if training.get("n_centers") else ""
        parts.append(f"{training['kernel']} AGP{centres}")
    if metadata.get("sparse_gate"):
        parts.append("sparse pictures counted by the COCO detector")
    return f"{counted}: " + " + ".join(part for part in parts if part)


def _descriptor_text(metadata: dict[str, Any], backbone: str) -> str:
    spec = (metadata.get("descriptor") or {}).get("spec") or (metadata.get("training") or {}).get("descriptor")
    if spec in (None, "scores"):
        return f"{backbone} class scores"
    if spec.startswith("detector"):
        return f"COCO detector descriptors ({spec})"
    return f"{backbone} descriptors {spec}"


def measured_figures(metadata: dict[str, Any]) -> list[str]:
    """The figures a model file records, each with the data it was measured on."""
    figures = []
    dataset = metadata.get("dataset") or {}
    where = f"{dataset.get('name', '?')}, split {dataset.get('split', '?')}"
    validation = metadata.get("validation_metrics") or {}
    if _metric_text(validation):
        on = validation.get("on") or f"{validation.get('n', '?')} train images"
        figures.append(f"validation: {_metric_text(validation)}, {on} ({where})")
    test = metadata.get("test_metrics") or {}
    per_frame = test.get("per_frame") or {}
    if _metric_text(per_frame):
        tested = f"{test.get('dataset', dataset.get('name', '?'))}, split {test.get('split', '?')}"
        text = f"test: {_metric_text(per_frame)} on {per_frame.get('n', '?')} test images ({tested})"
        sequence = test.get("sequence") or {}
        if _metric_text(sequence) and test.get("smoothing_window"):
            text += f"; {_metric_text(sequence)} with the {test['smoothing_window']}-frame mean"
        interval = test.get("interval") or {}
        if interval.get("coverage") is not None and interval.get("level") is not None:
            text += f"; {interval['level']:.0%} intervals held {interval['coverage']:.1%} of the counts"
        figures.append(text)
    return figures


def _metric_text(metrics: dict[str, Any]) -> str:
    """``MAE 2.61, RMSE 3.31`` (crowds) or ``mRMSE 0.491, m-relRMSE 0.222`` (per-class counts)."""
    names = (("mae", "MAE", 2), ("rmse", "RMSE", 2), ("mrmse", "mRMSE", 3), ("m_rel_rmse", "m-relRMSE", 3))
    return ", ".join(
        f"{label} {metrics[key]:.{digits}f}"
        for key, label, digits in names
        if isinstance(metrics.get(key), int | float)
    )


def shipped_models(folder: Path, readme: Path) -> list[ModelSummary]:
    """Every ``*.npz`` of ``folder``, by name; a file that cannot be read is listed with why."""
    docs = docs_rows(readme)
    return [summarise(path, docs) for path in sorted(folder.glob("*.npz"))]
