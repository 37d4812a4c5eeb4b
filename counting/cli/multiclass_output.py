"""Terminal tables for per-class counts (VOC): the figures, the per-class breakdown, and counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from counting.cli.common import familiarity_cell, short_note
from counting.core.columns import class_column
from counting.core.files import printable

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

# Figure keys of counting.evaluate.evaluation.voc_metrics and their column titles.
VOC_FIGURES: dict[str, str] = {
    "mrmse": "mRMSE",
    "m_rel_rmse": "m-relRMSE",
    "mrmse_nz": "mRMSE-nz",
    "m_rel_rmse_nz": "m-relRMSE-nz",
}
# A class shows in `count`'s table when its predicted count reaches this (it rounds to 1).
SHOW_THRESHOLD = 0.5


def fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def voc_figures_table(rows: list[tuple[str, dict]], title: str, caption: str | None = None) -> Table:
    """A row per evaluation, a column per VOC figure (all images, then non-zero entries only)."""
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column("figures")
    for name in VOC_FIGURES.values():
        table.add_column(name, justify="right")
    for label, figures in rows:
        table.add_row(label, *(fmt(figures.get(key)) for key in VOC_FIGURES))
    return table


def per_class_table(metrics: dict, title: str = "Per class") -> Table:
    """RMSE and relRMSE per class on all images and on the images holding the class."""
    table = Table(title=title, title_justify="left")
    for name in ("class", "images with it", "RMSE", "relRMSE", "RMSE-nz", "relRMSE-nz"):
        table.add_column(name, justify="left" if name == "class" else "right")
    for name in metrics.get("per_class_rmse", {}):
        table.add_row(
            name,
            str(metrics.get("per_class_images", {}).get(name, "–")),
            fmt(metrics["per_class_rmse"].get(name)),
            fmt(metrics.get("per_class_rel_rmse", {}).get(name)),
            fmt(metrics.get("per_class_rmse_nz", {}).get(name)),
            fmt(metrics.get("per_class_rel_rmse_nz", {}).get(name)),
        )
    return table


def class_counts_table(
    model: CountingModel, rows: list[dict], display: Any, threshold: float = SHOW_THRESHOLD
) -> Table:
    """A row per image, listing only the classes predicted at ``threshold`` or more."""
    level = f" ({model.interval.level:.0%} intervals)" if model.interval is not None else ""
    table = Table(title=f"Counts by {escape(printable(model.name))}{level}", title_justify="left")
    table.add_column("image", overflow="fold")
    table.add_column("total", justify="right")
    table.add_column(f"classes (count ≥ {threshold:g})")
    table.add_column("familiarity", justify="right")
    for row in rows:
        counts = {name: row[class_column("count", name)] for name in model.class_names}
        present = sorted((name for name in counts if counts[name] >= threshold), key=lambda n: -counts[n])
        parts = []
        for name in present:
            text = f"{name} {counts[name]:.1f}"
            if class_column("low", name) in row:
                text += f" [{row[class_column('low', name)]:.1f}–{row[class_column('high', name)]:.1f}]"
            parts.append(text)
        table.add_row(display(row["image"]), f"{row['total']:.1f}", ", ".join(parts) or "–", familiarity_cell(row))
    return table


def compare_table(data: Any, results: list, published: list[dict]) -> Table:
    """Our rows (measured) with the four VOC figures, then the published VOC-2007 rows."""
    from counting.evaluate.comparison.voc import VOC_FIGURE_KEYS

    title = (
        f"{data.dataset} · split {data.split} · {len(data.train_counts)} train / {len(data.test_counts)} test · "
        f"{data.settings['backbone']} @ {data.settings['input_size'] or 'native'}"
    )
    table = Table(title=title, title_justify="left", caption="published rows: VOC-2007 test images, not this split")
    table.add_column("method")
    for key in VOC_FIGURE_KEYS:
        table.add_column(VOC_FIGURES[key], justify="right")
    table.add_column("fit s", justify="right")
    table.add_column("source", overflow="fold")  # the whole citation: a narrow terminal folds it
    best = min((r.metrics["mrmse"] for r in results if r.status == "ok"), default=None)
    reasons = []
    for result in results:
        if result.status != "ok":
            note, cut = short_note(result.note, 50)
            table.add_row(result.label, f"[yellow]{result.status}[/]", note, "", "", "", "measured")
            if cut:
                reasons.append(f"{escape(result.label)}: {escape(result.note)}")
            continue
        cells = [fmt(result.metrics.get(key)) for key in VOC_FIGURE_KEYS]
        if result.metrics["mrmse"] == best:
            cells[0] = f"[bold green]{cells[0]}[/]"
        table.add_row(result.label, *cells, fmt(result.fit_seconds, 2), "measured")
    for row in published:
        cells = [fmt(row.get(key), 2) for key in VOC_FIGURE_KEYS]
        table.add_row(f"[dim]{row['method']}[/]", *cells, "—", f"[dim]{escape(row['source'])}[/]")
    # A reason cut to fit its cell is given whole below the table (and in the CSV and JSON).
    table.caption = "\n".join([*reasons, str(table.caption)])
    table.caption_justify = "left"
    return table


def compare_per_class(
    data: Any,
    dataset: str,
    root: Any,
    methods: str,
    centers: int,
    seed: int,
    target_transform: str,
    gate: bool,
    out: Any,
    models: Any = (),
    cache: Any = None,
    progress: bool = True,
    say: Any = None,
) -> None:
    """`counting compare` on per-class counts: run, print and write every row (``models``:
    ``(path, model)`` pairs of ``--model`` files, counting the same test images; ``say``: how
    informational lines are printed, nowhere under --quiet)."""
    from counting.cli.common import console

    say = console.print if say is None else say
    from counting.evaluate.comparison.voc import run_voc_comparison, voc_published_rows, write_voc_comparison

    def announce(result: Any) -> None:
        shown = (
            f"mRMSE {fmt(result.metrics.get('mrmse'))} m-relRMSE {fmt(result.metrics.get('m_rel_rmse'))}"
            if result.status == "ok"
            else f"{result.status} ({result.note})"
        )
        say(f"  {result.label}: {shown}")

    names = [name.strip() for name in methods.split(",") if name.strip()]
    results = run_voc_comparison(
        data,
        data.class_names,
        names,
        n_centers=centers,
        seed=seed,
        transform=target_transform,
        gate=gate,
        on_result=announce,
    )
    if models:
        from pathlib import Path

        from counting.evaluate.comparison.models import add_model_rows

        def starting(path: Any) -> None:
            say(f"counting the {len(data.test_paths)} test images with {escape(printable(str(path)))}")

        add_model_rows(
            data,
            list(models),
            results,
            cache=cache,
            root=Path(root),
            progress=progress,
            on_start=starting,
            on_result=announce,
        )
    settings = {"target_transform": target_transform, "gate": gate, "n_centers": centers, "seed": seed}
    paths = write_voc_comparison(data, results, out, settings)
    console.print(compare_table(data, results, voc_published_rows(dataset)))
    say("wrote " + ", ".join(str(path) for path in paths.values()))
