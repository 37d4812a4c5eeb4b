"""Options that commands take together, declared once as a group: a frozen dataclass whose fields
are options of :mod:`counting.cli.options` (name, default, help), and :func:`with_groups`, which
spreads a group's fields into a command's signature (what typer reads) and hands the command one
object.

``count``, ``features``, ``evaluate``, ``report`` and ``familiarize`` read pictures the same way
(:class:`PictureRun`; ``train`` and ``compare`` name the same options one by one, in their own
order of panels, and ``video`` has its own batch default);
``evaluate`` and ``report`` evaluate a model on the same test split (:class:`EvaluationSplit`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from counting.cli.options import (
    PROGRESS_DEFAULT,
    SMOOTH_DEFAULT,
    BatchSizeOption,
    CacheDirOption,
    CountingClusterOption,
    CountsCsvOption,
    DifficultOption,
    NoCacheOption,
    ProgressOption,
    QuietOption,
    RuntimeOption,
    SmoothOption,
    SplitOption,
    ThreadsOption,
    WeightsOption,
)
from counting.core import defaults


@dataclass(frozen=True)
class PictureRun:
    """How a command turns pictures into descriptors: the feature cache, batches, progress, runtime."""

    cache_dir: CacheDirOption = None
    no_cache: NoCacheOption = False
    batch_size: BatchSizeOption = defaults.BATCH_SIZE
    progress: ProgressOption = PROGRESS_DEFAULT
    quiet: QuietOption = False
    runtime: RuntimeOption = defaults.RUNTIME
    threads: ThreadsOption = None

    @property
    def shows_progress(self) -> bool:
        return self.progress and not self.quiet


@dataclass(frozen=True)
class EvaluationSplit:
    """The test split a model is evaluated on, and how: labels, smoothing, weights, a cluster."""

    split: SplitOption = "standard"
    counts_csv: CountsCsvOption = None
    include_difficult: DifficultOption = False
    smooth: SmoothOption = SMOOTH_DEFAULT
    weights: WeightsOption = None
    cluster: CountingClusterOption = None


def with_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with each parameter annotated by a group class replaced, in its place, by that
    group's fields (each an option); the command is called with the group object built from them."""
    hints = get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, type] = {}
    for parameter in inspect.signature(command).parameters.values():
        kind = hints.get(parameter.name, parameter.annotation)
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            parameters.append(parameter.replace(annotation=kind))
            continue
        groups[parameter.name] = kind
        field_hints = get_type_hints(kind, include_extras=True)
        parameters += [
            inspect.Parameter(field.name, parameter.kind, default=field.default, annotation=field_hints[field.name])
            for field in dataclasses.fields(kind)
        ]
    names = [parameter.name for parameter in parameters]
    if len(set(names)) != len(names):
        raise TypeError(f"{command.__name__}: an option of a group has the name of another parameter")
    fields = {name: [field.name for field in dataclasses.fields(kind)] for name, kind in groups.items()}

    @functools.wraps(command)
    def grouped(**options: Any) -> Any:
        for name, kind in groups.items():
            options[name] = kind(**{field: options.pop(field) for field in fields[name]})
        return command(**options)

    grouped.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    grouped.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return grouped
