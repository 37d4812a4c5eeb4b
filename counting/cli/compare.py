"""`counting compare`: every method on the same features and split, beside the published figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from counting import defaults
from counting.cli.common import console, feature_cache, parse_grid_option, parse_input_size, print_error
from counting.cli.runtime_options import DEFAULT_RUNTIME, RuntimeOption, ThreadsOption, use_runtime
from counting.errors import CountingError

def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def results_table(data, results, published, sequence: bool) -> Table:
    """One rich table: our rows (measured) then the published ones."""
    title = (
        f"{data.dataset} · split {data.split} · {len(data.train_counts)} train / {len(data.test_counts)} test · "
        f"{data.settings['backbone']} @ {data.settings['input_size'] or 'native'}"
        f"{' · ROI' if data.settings['roi'] else ''}"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("method")
    table.add_column("features")
    for name in ["MAE", "MSE", "RMSE"] + (["MAE smoothed", "RMSE smoothed"] if sequence else []) + ["fit s", "predict s"]:
        table.add_column(name, justify="right")
    table.add_column("source")
    best = min((r.metrics["mae"] for r in results if r.status == "ok"), default=None)
    for result in results:
        if result.status != "ok":
            blanks = ["—"] * (4 if sequence else 2)
            table.add_row(result.label, result.features, f"[yellow]{result.status}[/]", result.note[:60], *blanks, "—", "measured")
            continue
        metrics = result.metrics
        mae = _fmt(metrics["mae"])
        if best is not None and metrics["mae"] == best:
            mae = f"[bold green]{mae}[/]"
        cells = [mae, _fmt(metrics["mse"]), _fmt(metrics["rmse"])]
        if sequence:
            cells += [_fmt(metrics.get("smoothed_mae")), _fmt(metrics.get("smoothed_rmse"))]
        cells += [_fmt(result.fit_seconds), _fmt(result.predict_seconds, 3)]
        table.add_row(result.label, result.features, *cells, "measured")
    for row in published:
        cells = [_fmt(row.get("mae")), _fmt(row.get("mse")), _fmt(row.get("rmse"))]
        cells += ["—"] * (4 if sequence else 2)
        table.add_row(f"[dim]{row['method']}[/]", "[dim]published[/]", *cells, f"[dim]{row['source'][:48]}[/]")
    return table


def compare(
    dataset: Annotated[str, typer.Option(help="Dataset: mall, shanghaitech, ucsd or folder (crowd counts).")],
    root: Annotated[Path, typer.Option(help="Folder holding the dataset.", file_okay=False)],
    split: Annotated[
        Optional[str],
        typer.Option(help="Split; default mall 'train=1-600,test=601-800', shanghaitech 'random:0.25:0', else 'standard'."),
    ] = None,
    backbone: Annotated[str, typer.Option(help="Backbone giving the descriptors.")] = defaults.BACKBONE,
    input_size: Annotated[
        str, typer.Option(help="Short side in pixels the frames are resized to, or 'native'.")
    ] = str(defaults.INPUT_SIZE or "native"),
    grid: Annotated[
        str, typer.Option(help="Tile grid ROWSxCOLS for the tiled rows (one pass per frame), or 'none'.")
    ] = "x".join(map(str, defaults.GRID)) if defaults.GRID else "3x3",
    roi: Annotated[bool, typer.Option("--roi/--no-roi", help="Mask out pixels and heads outside the dataset's ROI.")] = True,
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods on whole frames (ridge, gp, sparse-gp, center-gp, "
                                "agp-univariate, agp-diagonal, agp-lowrank, hog, hog-calibrated).")
    ] = "ridge,gp,sparse-gp,center-gp,agp-univariate,agp-diagonal,hog,hog-calibrated",
    tiled_methods: Annotated[
        str, typer.Option(help="Comma-separated feature methods also run on tiles (exact GP: concatenated cells only).")
    ] = "ridge,gp,agp-univariate",
    centers: Annotated[int, typer.Option(help="AGP centres, and the sparse GP's inducing points.", min=1)] = defaults.N_CENTERS,
    smoothing: Annotated[
        int, typer.Option(help="Window (frames) of the temporal smoothing in the sequence figures.", min=1)
    ] = defaults.SMOOTHING_WINDOW,
    hog_train_images: Annotated[
        int, typer.Option(help="Training images the HOG calibration line is fitted on (spread evenly).", min=2)
    ] = 150,
    seed: Annotated[int, typer.Option(help="Seed for centres and every random choice.")] = defaults.SEED,
    out: Annotated[Path, typer.Option(help="Folder for compare-DATASET.csv / .json / .md.", file_okay=False)] = Path("."),
    cache_dir: Annotated[
        Optional[Path], typer.Option(help="Feature cache folder (default $COUNTING_CACHE_DIR or ~/.cache/counting).")
    ] = None,
    runtime: RuntimeOption = DEFAULT_RUNTIME,
    threads: ThreadsOption = None,
) -> None:
    """Run ridge, exact and sparse GPs, the paper's AGP variants and the HOG detector on the same
    features and split; print one table with MAE / MSE / RMSE and fit / predict times beside the
    published figures, and write it as CSV, JSON and Markdown."""
    use_runtime(runtime, threads)
    from counting.comparison import (
        check_methods, load_comparison_data, published_rows, run_comparison, write_comparison,
    )

    size, tiles = parse_input_size(input_size), parse_grid_option(grid)
    try:
        check_methods(_names(methods), _names(tiled_methods))
        data = load_comparison_data(
            dataset, root, split=split, backbone=backbone, input_size=size, grid=tiles, use_roi=roi,
            cache=feature_cache(cache_dir, True),
        )
        if data.train_counts.ndim != 1:
            raise CountingError(f"{root}: compare works on single counts; {dataset} has per-class counts")

        def announce(result) -> None:
            shown = _fmt(result.metrics.get("mae")) if result.status == "ok" else result.status
            console.print(f"  {result.label} · {result.features}: MAE {shown}")

        results = run_comparison(
            data, methods=_names(methods), tiled_methods=_names(tiled_methods), n_centers=centers, seed=seed,
            smoothing_window=smoothing, max_hog_train_images=hog_train_images, on_result=announce,
        )
        paths = write_comparison(data, results, out)
    except CountingError as error:
        print_error(str(error))
        raise typer.Exit(1) from None
    console.print(results_table(data, results, published_rows(data.dataset), data.is_sequence))
    console.print("wrote " + ", ".join(str(path) for path in paths.values()))
