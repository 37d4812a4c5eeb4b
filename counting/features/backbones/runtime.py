"""Which inference runtime runs the backbones, and with how many threads.

Two runtimes compute the same descriptors (to 1e-4):

* ``onnxruntime`` (default): the trunk exported once to ONNX (:mod:`counting.features.backbones.onnx_export`)
  and run by ONNX Runtime's CPU provider; measured 2.5-2.8x faster than torch on this project's
  2-core machine, and its dynamic input shapes need no trace per image size.
* ``torch``: the frozen TorchScript trace (eager for one-off shapes), the reference the exports
  are checked against.

Commands set the process-wide choice once (``--runtime``, ``--threads``) with
:func:`configure_runtime`; library functions that build backbones read it through
:func:`default_runtime` unless given a runtime explicitly.
"""

from __future__ import annotations

import os
import threading
from typing import Literal

from counting.core import defaults

__all__ = [
    "RUNTIMES",
    "RuntimeName",
    "available_cpus",
    "check_runtime",
    "cpu_description",
    "configure_runtime",
    "configured_threads",
    "default_runtime",
    "default_threads",
]

RuntimeName = Literal["onnxruntime", "torch"]
RUNTIMES: tuple[str, ...] = ("onnxruntime", "torch")
MAX_THREADS_PER_CPU = 4

_lock = threading.Lock()
_settings: dict[str, object] = {"runtime": None, "threads": None}


def available_cpus() -> int:
    """CPU cores this process may run on (respects affinity masks and container limits)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def cpu_description() -> str:
    """The CPU's model name and the vector extensions the forward pass uses, e.g.
    ``"AMD EPYC (avx2)"``: speed figures are only comparable on the same kind of CPU (the
    project's machines have been AVX-512/AMX Intel and AVX2-only AMD ones)."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() == "model name":
                    model = value.strip()
                elif name.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:  # not Linux
        return model
    extensions = [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if flag in flags]
    return f"{model} ({', '.join(extensions) or 'no AVX2'})"


def check_runtime(name: str) -> str:
    """``name`` if it is a known runtime, else ``ValueError`` listing the choices."""
    if name not in RUNTIMES:
        raise ValueError(f"{name!r}: unknown runtime (choose from {', '.join(RUNTIMES)})")
    return name


def configure_runtime(runtime: str | None = None, threads: int | None = None) -> None:
    """Set the process-wide runtime and thread count (``None`` restores the default)."""
    if runtime is not None:
        check_runtime(runtime)
    if threads is not None and not 1 <= threads <= MAX_THREADS_PER_CPU * available_cpus():
        # Thousands of intra-op threads exhaust memory before they compute anything.
        raise ValueError(
            f"threads must be 1 to {MAX_THREADS_PER_CPU * available_cpus()} "
            f"({MAX_THREADS_PER_CPU} per CPU core), got {threads}"
        )
    with _lock:
        _settings["runtime"] = runtime
        _settings["threads"] = threads


def default_runtime() -> str:
    """The runtime configured for this process, else ``defaults.RUNTIME``."""
    with _lock:
        configured = _settings["runtime"]
    return str(configured) if configured is not None else defaults.RUNTIME


def configured_threads() -> int | None:
    """The thread count set by :func:`configure_runtime` (``--threads``), else ``None``."""
    with _lock:
        configured = _settings["threads"]
    return None if configured is None else int(configured)  # type: ignore[call-overload]


def default_threads() -> int:
    """Intra-op threads for a forward pass: ``--threads`` if given, else ``OMP_NUM_THREADS``,
    else every core this process may use."""
    with _lock:
        configured = _settings["threads"]
    if configured is not None:
        return int(configured)  # type: ignore[call-overload]
    from_env = os.environ.get("OMP_NUM_THREADS", "")
    if from_env.isdigit() and int(from_env) > 0:
        return int(from_env)
    return available_cpus()
