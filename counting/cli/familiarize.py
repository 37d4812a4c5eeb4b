"""`counting familiarize`: add a familiarity score to an existing model file (its counts unchanged)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from counting.cli.common import (
    informational,
    load_model_option,
    open_dataset,
    optional_cache,
    refuse_outputs_on_inputs,
    say_outputs_on_interrupt,
    use_runtime,
)
from counting.cli.option_groups import PictureRun, with_groups
from counting.cli.options import (
    CountsCsvOption,
    DatasetOption,
    DifficultOption,
    ModelOption,
    RootOption,
    SplitOption,
    out_option,
)
from counting.core.errors import CountingError
from counting.core.files import check_writable, printable
from counting.heads.familiarity import FLAG_RATE


@with_groups
def familiarize(
    dataset: DatasetOption,
    root: RootOption,
    out: Annotated[Path, out_option("Model file to write: the model with its familiarity score (.npz).")],
    model: ModelOption = None,
    split: SplitOption = None,
    counts_csv: CountsCsvOption = None,
    include_difficult: DifficultOption = False,
    flag_rate: Annotated[
        float,
        typer.Option(
            "--flag-rate",
            min=0.0,
            max=0.5,
            metavar="X",
            help="Threshold: about this fraction of pictures like the training ones are marked unfamiliar.",
        ),
    ] = FLAG_RATE,
    run: PictureRun = PictureRun(),
) -> None:
    """Fit a model's familiarity score on its training pictures (the train split of --dataset;
    --split defaults to the split recorded in the model) and write the model with it to --out.

    Only the familiarity section is added: the model counts every picture as before, and each
    count now says how much its picture resembles the training pictures.
    """
    from counting.train.familiarity import add_familiarity

    use_runtime(run.runtime, run.threads)
    say = informational(run.quiet)
    cache = optional_cache(run.cache_dir, not run.no_cache)
    check_writable(out)
    refuse_outputs_on_inputs(
        [out], inputs=[counts_csv], model=model, data_root=root, cache=cache, cache_dir=run.cache_dir
    )
    say_outputs_on_interrupt([out], cache)
    counting_model = load_model_option(model)
    chosen = split or counting_model.dataset.get("split") or "standard"
    data = open_dataset(dataset, root, chosen, counts_csv, include_difficult)
    samples = list(data.subset("train").samples)
    if not samples:
        raise CountingError(f"{root}: the train split {chosen!r} of {dataset} is empty")
    say(f"fitting the familiarity of {escape(printable(counting_model.name))} on {len(samples)} train pictures")
    section = add_familiarity(
        counting_model,
        [str(sample.path) for sample in samples],
        order=[sample.index for sample in samples],
        cache=cache,
        batch_size=run.batch_size,
        progress=run.shows_progress,
        flag_rate=flag_rate,
        trained_on=f"{dataset} {chosen}",
    )
    counting_model.save(out)
    say(
        f"familiarity: {section.probe} probe, {section.settings['n_components']} axes, "
        f"{section.settings['n_pictures']} pictures, threshold {section.threshold:g}; "
        f"model written to {escape(printable(str(out)))}"
    )
