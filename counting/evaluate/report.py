"""Markdown + HTML report: our figures beside the published ones, with PNG plots.

The report is built once as a list of blocks (heading, paragraph, table, list, image) and
rendered to both formats; the two renderers are a few lines each, which is why no Markdown
library is pulled in for them.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from counting.apply.smoothing import centred_label
from counting.evaluate import plots
from counting.evaluate.published import load_published

# Published metric name -> key in our figures.
METRIC_KEYS = {
    "MAE": "mae",
    "MSE": "mse",
    "RMSE": "rmse",
    "mRMSE": "mrmse",
    "m-relRMSE": "m_rel_rmse",
    "mRMSE-nz": "mrmse_nz",
    "m-relRMSE-nz": "m_rel_rmse_nz",
}
OUR_DEFINITIONS = {
    "MAE": "mean absolute error of per-image counts",
    "MSE": "mean squared error of per-image counts (squared, not its root)",
    "RMSE": "root mean squared error of per-image counts",
    "mRMSE": "per-class RMSE averaged over the classes, predictions clipped at 0 and rounded",
    "m-relRMSE": "per-class RMSE with each squared error divided by (true + 1), averaged over classes",
    "mRMSE-nz": "mRMSE over each class's images holding at least one object of it (Chattopadhyay et al.'s "
    "non-zero variant)",
    "m-relRMSE-nz": "m-relRMSE over each class's images holding at least one object of it",
}
DATASET_TITLES = {
    "ucsd": "UCSD pedestrians",
    "mall": "Mall",
    "shanghaitech": "ShanghaiTech Part B",
    "voc": "PASCAL VOC-2007",
    "folder": "image folder",
}


@dataclass
class Block:
    kind: str  # h1 | h2 | p | table | ul | img
    text: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    items: list[str] = field(default_factory=list)


@dataclass
class ReportFiles:
    markdown: Path
    html: Path
    figures_json: Path
    images: list[Path]


# The plots a report may write beside its pages, by kind; the writers below take their names from
# here, so REPORT_FILES (what the CLI refuses to let an input be) cannot miss one.
PLOT_FILES = {kind: f"{kind}.png" for kind in ("loss", "scatter", "sequence", "classes", "density")}
REPORT_FILES = ("report.md", "report.html", "report.json", *PLOT_FILES.values())


def _fmt(value: Any) -> str:
    """Two decimals, as the published tables give them."""
    if value is None:
        return "–"
    if isinstance(value, (float, int)):
        return f"{value:.2f}"
    return str(value)


def figure_rows(model: Any, evaluation: Any | None) -> tuple[list[tuple[str, dict]], str]:
    """(label, figures) rows for our table, and a sentence saying where they come from."""
    if evaluation is not None:
        rows = [("this model, per frame", evaluation.metrics)]
        if evaluation.sequence_metrics is not None:
            rows.append((smoothed_row_label(evaluation.smoothing_window), evaluation.sequence_metrics))
        where = f"{evaluation.metrics.get('n')} test images of {evaluation.dataset} (split {evaluation.split})"
        mark = held_out_mark(evaluation)
        return [(label + mark, figures) for label, figures in rows], where
    stored = model.test_metrics or {}
    if stored.get("per_frame"):
        rows = [("this model, per frame", stored["per_frame"])]
        if stored.get("sequence"):
            rows.append((smoothed_row_label(stored.get("smoothing_window")), stored["sequence"]))
        return rows, f"the test figures stored in the model file (split {model.dataset.get('split')})"
    return [("this model, held-out train images", model.validation_metrics)], (
        "the held-out part of the training split (no test evaluation stored)"
    )


def overlap_note(evaluation: Any | None) -> str | None:
    """Why the evaluated figures are not held-out ones (trained on some test pictures), or None."""
    return getattr(evaluation, "overlap_note", None) if evaluation is not None else None


def held_out_mark(evaluation: Any | None) -> str:
    """What our rows' labels carry when their figures are not (or maybe not) held-out ones."""
    overlap = getattr(evaluation, "overlap", None)
    if overlap is None or overlap.held_out:
        return ""
    return " (not held-out)" if overlap.held_out is False else " (maybe not held-out)"


def smoothed_row_label(window: int | None) -> str:
    """The row of the offline smoothed figures: they use a centred window (frames after each
    frame too), which a live `counting video` run cannot; the label says so."""
    return f"this model, {centred_label(window or 0)} (offline)"


def interval_figures(model: Any, evaluation: Any | None) -> dict | None:
    if evaluation is not None:
        return evaluation.interval_metrics
    return (model.test_metrics or {}).get("interval")


def build_blocks(model: Any, evaluation: Any | None, images: dict[str, Path]) -> tuple[list[Block], dict]:
    dataset = evaluation.dataset if evaluation is not None else model.dataset.get("name", "")
    published = load_published(dataset) if dataset else []
    ours, where = figure_rows(model, evaluation)
    metric_names = list(dict.fromkeys(row["metric"] for row in published))
    if not metric_names:
        metric_names = ["mRMSE", "m-relRMSE"] if model.is_multi_output else ["MAE", "MSE", "RMSE"]
    if model.is_multi_output:
        metric_names += [name for name in ("mRMSE-nz", "m-relRMSE-nz") if name not in metric_names]

    blocks = [Block("h1", f"Counting report: {DATASET_TITLES.get(dataset, dataset)}")]
    blocks.append(Block("p", describe_model(model)))

    blocks.append(Block("h2", "Our figures beside the published ones"))
    blocks.append(
        Block(
            "p",
            f"Our rows are measured on {where}. Published rows are copied from the "
            "cited papers and were measured on each paper's own protocol (see the "
            "definitions below), so compare them with that in mind."
            + (
                " The VOC rows were measured on the VOC-2007 test images: other photos than ours."
                if model.is_multi_output
                else ""
            ),
        )
    )
    header = ["method"] + metric_names + ["source"]
    rows = [
        [f"**{label}**"] + [_fmt(figures.get(METRIC_KEYS.get(m, m))) for m in metric_names] + ["measured here"]
        for label, figures in ours
    ]
    by_method: dict[str, dict] = {}
    for row in published:
        entry = by_method.setdefault(row["method"], {"source": row["source"]})
        entry[row["metric"]] = row["value"]
    for method, entry in by_method.items():
        rows.append([method] + [_fmt(entry.get(m)) for m in metric_names] + [entry["source"]])
    blocks.append(Block("table", header=header, rows=rows))
    not_held_out = overlap_note(evaluation)
    if not_held_out:
        blocks.append(Block("p", f"**Caution**: {not_held_out}."))
    if not published:
        blocks.append(Block("p", f"No published figures are on file for dataset '{dataset}'."))

    if model.is_multi_output:
        blocks += per_class_blocks(ours)

    interval = interval_figures(model, evaluation)
    if interval:
        blocks.append(Block("h2", "Count intervals"))
        blocks.append(
            Block(
                "p",
                f"Split-conformal intervals at nominal level {interval['level']:.0%} "
                f"(scale: {interval.get('scale')}): empirical coverage "
                f"{interval['coverage']:.1%}, mean width {interval['mean_width']:.2f}.",
            )
        )

    blocks.append(Block("h2", "Metric definitions"))
    definitions = []
    for metric in metric_names:
        theirs = sorted({row["definition"] for row in published if row["metric"] == metric})
        text = f"**{metric}** (ours): {OUR_DEFINITIONS.get(metric, metric)}."
        if theirs:
            text += " Published: " + "; ".join(theirs) + "."
        definitions.append(text)
    blocks.append(Block("ul", items=definitions))

    blocks.append(Block("h2", "Plots"))
    captions = {
        "sequence": "Predicted and true count over the frame sequence",
        "scatter": "Predicted against true count",
        "classes": "Per-class counts and RMSE",
        "loss": f"Training and validation loss per epoch of the AGP (best epoch {model.training.get('best_epoch')})",
        "density": "Density map of the first test image (the density head's output)",
    }
    for key, path in images.items():
        blocks.append(Block("img", text=captions.get(key, key), items=[path.name]))
    if "loss" not in images:
        blocks.append(Block("p", f"No training loss curve: {no_loss_curve_reason(model)}."))

    figures = {
        "dataset": dataset,
        "model": model.name,
        "model_description": describe_model(model),
        "loss_curve": "loss" in images,
        "ours": {label: f for label, f in ours},
        "measured_on": where,
        **(evaluation.overlap.to_dict() if getattr(evaluation, "overlap", None) is not None else {}),
        "interval": interval,
        "published": published,
    }
    return blocks, figures


def per_class_blocks(ours: list[tuple[str, dict]]) -> list[Block]:
    """Per-class figures of our first row (VOC): a table row per class."""
    figures = ours[0][1] if ours else {}
    per_class = figures.get("per_class_rmse") or {}
    if not per_class:
        return []
    header = ["class", "images with it", "RMSE", "relRMSE", "RMSE-nz", "relRMSE-nz"]
    keys = ("per_class_rmse", "per_class_rel_rmse", "per_class_rmse_nz", "per_class_rel_rmse_nz")
    rows = [
        [name, str((figures.get("per_class_images") or {}).get(name, "–"))]
        + [_fmt((figures.get(key) or {}).get(name)) for key in keys]
        for name in per_class
    ]
    text = (
        f"Per class on {ours[0][0]}: predictions clipped at 0 and rounded; -nz columns over the images "
        "holding the class only (empty where no test image holds it). The published rows above were "
        "measured on the VOC-2007 test images, not on these photos."
    )
    return [Block("h2", "Per-class figures"), Block("p", text), Block("table", header=header, rows=rows)]


def render_markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if block.kind == "h1":
            lines += [f"# {block.text}", ""]
        elif block.kind == "h2":
            lines += [f"## {block.text}", ""]
        elif block.kind == "p":
            lines += [block.text, ""]
        elif block.kind == "table":
            lines.append("| " + " | ".join(block.header) + " |")
            lines.append("|" + "|".join("---" for _ in block.header) + "|")
            lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in block.rows]
            lines.append("")
        elif block.kind == "ul":
            lines += [f"- {item}" for item in block.items] + [""]
        elif block.kind == "img":
            lines += [f"![{block.text}]({block.items[0]})", ""]
    return "\n".join(lines)


def _inline_html(text: str) -> str:
    """Escape, then turn **bold** and `code` spans into tags."""
    import re

    escaped = html.escape(text)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def render_html(blocks: list[Block], title: str) -> str:
    body: list[str] = []
    for block in blocks:
        if block.kind in ("h1", "h2"):
            body.append(f"<{block.kind}>{_inline_html(block.text)}</{block.kind}>")
        elif block.kind == "p":
            body.append(f"<p>{_inline_html(block.text)}</p>")
        elif block.kind == "table":
            head = "".join(f"<th>{_inline_html(cell)}</th>" for cell in block.header)
            rows = "".join("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif block.kind == "ul":
            body.append("<ul>" + "".join(f"<li>{_inline_html(item)}</li>" for item in block.items) + "</ul>")
        elif block.kind == "img":
            source = html.escape(block.items[0])
            body.append(
                f'<figure><img src="{source}" alt="{html.escape(block.text)}">'
                f"<figcaption>{html.escape(block.text)}</figcaption></figure>"
            )
    style = (
        "body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}"
        "img{max-width:100%}figcaption{color:#555}"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def make_plots(model: Any, evaluation: Any | None, out_dir: Path) -> dict[str, Path]:
    images: dict[str, Path] = {}
    if evaluation is not None and len(evaluation.y_true):
        if evaluation.is_voc_like:
            images["classes"] = plots.plot_class_bars(
                evaluation.class_names,
                evaluation.y_true,
                evaluation.y_pred,
                evaluation.metrics["per_class_rmse"],
                out_dir / PLOT_FILES["classes"],
                evaluation.metrics.get("per_class_rel_rmse"),
            )
            images["scatter"] = plots.plot_scatter(
                evaluation.y_true, np.round(np.clip(evaluation.y_pred, 0, None)), out_dir / PLOT_FILES["scatter"]
            )
        else:
            images["sequence"] = plots.plot_sequence(
                evaluation.indices,
                evaluation.y_true,
                evaluation.y_pred,
                out_dir / PLOT_FILES["sequence"],
                evaluation.low,
                evaluation.high,
                evaluation.y_smoothed,
            )
            images["scatter"] = plots.plot_scatter(
                evaluation.y_true, evaluation.y_pred, out_dir / PLOT_FILES["scatter"]
            )
    if getattr(model, "density_head", None) is not None and evaluation is not None and evaluation.sources:
        from counting.heads.density.heatmap import density_heatmap_png

        images["density"] = density_heatmap_png(model, evaluation.sources[0], out_dir / PLOT_FILES["density"])
    if no_loss_curve_reason(model) is None:
        images["loss"] = plots.plot_loss(model.history, out_dir / PLOT_FILES["loss"], model.training.get("best_epoch"))
    return images


def regressor_counts(model: Any) -> bool:
    """Whether the AGP's prediction is (part of) the count. A model whose count is its density
    heads' sum plus a correction of weight 0 (the crowd model) counts by the heads alone: its AGP's
    kernel, centres and loss curve say nothing about its counts."""
    return model.count_offset != "head_sum" or float(model.correction_weight) != 0.0


def no_loss_curve_reason(model: Any) -> str | None:
    """Why the report draws no loss curve, or None when the model has one worth drawing: the
    loss history of the regressor that counts, with the epoch training kept."""
    if not regressor_counts(model):
        return "the counts come from the density heads, and the AGP trained beside them is not used (weight 0)"
    if not (model.history or {}).get("train_loss"):
        return "the model file records no training loss history"
    if model.training.get("best_epoch") is None:
        return "the model file records no best epoch for its loss history"
    return None


def describe_model(model: Any) -> str:
    """One paragraph on what the model file holds and how it counts, from its own metadata."""
    summary = model.summary()
    counted = f"per-class counts of {len(model.class_names)} classes" if model.is_multi_output else "one count"
    size = summary["input_size"]
    if summary["descriptor"].startswith("detector"):
        # The detector reads its own fixed input; the file's input size is the unused default.
        size_text = "the detector's own input size"
    else:
        size_text = f"input short side {size} px" if size else "pictures at their own size"
    settings = (
        size_text,
        f"ROI {'on' if summary['roi'] else 'off'}",
        f"grid {summary['grid'] or 'whole frame'}",
        *(("flip-averaged",) if summary["flip_average"] else ()),
    )
    parts = [f"Model `{model.name}` gives {counted} on {summary['backbone']} ({', '.join(settings)}): "]
    head = density_head_text(model)
    agp = agp_text(model)
    if head and model.count_offset == "head_sum":
        if regressor_counts(model):
            parts.append(f"the sum of its {head}, plus {float(model.correction_weight):g} x the correction of a {agp}")
        else:
            parts.append(f"the sum of its {head}; the AGP correction in the file has weight 0 and is not used")
    elif head:
        parts.append(f"a {agp}, on the region sums of its {head}")
    else:
        parts.append(f"a {agp}")
    if model.is_multi_output and model.target_transform not in (None, "none"):
        parts.append(f" (fitted on the {model.target_transform} of the counts)")
    if getattr(model, "sparse_gate", None) is not None:
        parts.append("; a sparse gate sends sparse pictures to the COCO detector's person count")
    parts.append(
        f". Trained on {model.dataset.get('name')} ({model.dataset.get('n_train')} images, "
        f"split {model.dataset.get('split')})."
    )
    return "".join(parts)


def density_head_text(model: Any) -> str | None:
    """``conv density heads on block4, block7, block10 (4 in the ensemble; specialists ...)``, or None."""
    head = getattr(model, "density_head", None)
    if head is None:
        head = getattr(model, "class_density_head", None)
        if head is None:
            return None
        return f"per-class density head on {', '.join(getattr(head, 'layers', ()) or ('its maps',))}"
    details = []
    members = 1 + len(getattr(head, "more_weights", None) or ())
    if members > 1:
        details.append(f"{members} in the ensemble")
    specialists = getattr(head, "specialists", None)
    if specialists:
        details.append(f"specialists {', '.join(specialists)}")
    kind = getattr(head, "kind", None) or model.training.get("density_kind") or ""
    text = f"{kind} density heads on {', '.join(head.layers)}".strip()
    return text + (f" ({'; '.join(details)})" if details else "")


def agp_text(model: Any) -> str:
    """``univariate AGP with 25 centres on efficientnet-lite0 class scores``, from the model file."""
    kernel = model.training.get("kernel") or getattr(model.regressor, "kernel", None) or "?"
    centres = model.training.get("n_centers")
    descriptor = "scores" if model.descriptor is None else model.descriptor.text
    if descriptor.startswith("detector"):
        on = f"COCO detector descriptors ({descriptor})"
    elif descriptor == "scores":
        on = f"{model.backbone} class scores"
    else:
        on = f"{model.backbone} descriptors {descriptor}"
    return f"{kernel} AGP" + (f" with {centres} centres" if centres else "") + f" on {on}"


def write_report(model: Any, evaluation: Any | None, out_dir: str | Path, name: str = "report") -> ReportFiles:
    """Write ``{name}.md``, ``{name}.html``, ``{name}.json`` and the PNG plots into ``out_dir``."""
    from counting.core.files import atomic_write_text, check_writable_folder

    folder = check_writable_folder(out_dir)
    images = make_plots(model, evaluation, folder)
    blocks, figures = build_blocks(model, evaluation, images)
    markdown = folder / f"{name}.md"
    atomic_write_text(markdown, render_markdown(blocks))
    page = folder / f"{name}.html"
    atomic_write_text(page, render_html(blocks, blocks[0].text))
    figures_json = folder / f"{name}.json"
    atomic_write_text(figures_json, json.dumps(figures, indent=2) + "\n")
    return ReportFiles(markdown, page, figures_json, list(images.values()))
