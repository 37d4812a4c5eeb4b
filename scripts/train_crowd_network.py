"""Train the crowd network (issue 48: Lite0's blocks 5-10 and a density decoder) and print its
validation figures as it goes.

    python scripts/train_crowd_network.py --data ../shared/data -o crowd-network.npz --steps 8000

Resumable: the state is kept in ``<output>.ckpt`` (every 200 steps); run the same command again to
go on from it (``--stop-after MINUTES`` ends a run early, checkpoint written). Uses a GPU when torch
sees one (``--device``). Trains on the train parts of the four shared crowd sets
(counting.data.datasets.crowd: ShanghaiTech A and B train, Mall frames 1-600, coco-voc20 person box
centres, photo 000000002299 left out: its label is wrong, ../shared/data/README.md), and counts
their fixed validation parts every ``--eval-every`` steps (Mall: every ``--mall-every``-th frame of
601-800 while training, all 200 at the end). Writes the network (.npz of arrays), the history
(``<output>.history.csv``) and the learning curves (``<output>.curves.png``).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from counting.core import CountingError, atomic_write, check_outputs, check_writable
from counting.data import read_crowd
from counting.train import (
    NetworkSettings,
    TrainingPictures,
    averaged_network,
    checkpoint_state,
    crowd_parts,
    load_network,
    save_network,
    train_network,
    validation_figures,
)


def main() -> None:
    defaults = NetworkSettings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("COUNTING_SHARED_DATA", "../shared/data"))
    parser.add_argument("-o", "--output", required=True, type=Path, help="network file to write (.npz)")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--crop", type=int, default=defaults.crop)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--loss", choices=("density", "bayesian"), default=defaults.loss, help="docs/network.md says why density"
    )
    parser.add_argument("--width", type=int, default=defaults.width, help="the decoder's channels")
    parser.add_argument("--init", help="a network file to start from (a finished run), not the ImageNet weights")
    parser.add_argument(
        "--precision",
        choices=("float32", "bfloat16"),
        default=defaults.precision,
        help="bfloat16: autocast forward, 1.55x faster on CPUs with AVX-512 BF16 or AMX (and GPUs)",
    )
    parser.add_argument("--device", default="auto", help="auto (a GPU when torch sees one), cpu, cuda")
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--mall-every", type=int, default=4)
    parser.add_argument("--stop-after", type=float, help="minutes: write the checkpoint and stop")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument(
        "--export", action="store_true", help="write the checkpoint's network as it stands (a stopped run) and stop"
    )
    args = parser.parse_args()
    try:
        _train(args)
    except (CountingError, ValueError, OSError) as error:
        sys.exit(f"train_crowd_network.py: {error}")
    except KeyboardInterrupt:
        checkpoint = args.output.with_name(args.output.name + ".ckpt")
        if checkpoint.is_file():
            sys.exit(f"train_crowd_network.py: interrupted; {checkpoint} is kept: the same command goes on from it")
        sys.exit("train_crowd_network.py: interrupted before the first checkpoint (every 200 steps); nothing kept")


def _train(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = NetworkSettings(
        steps=args.steps,
        batch=args.batch,
        crop=args.crop,
        learning_rate=args.learning_rate,
        seed=args.seed,
        loss=args.loss,
        width=args.width,
        init=args.init,
        precision=args.precision,
    )
    started = time.time()
    checkpoint = args.output.with_name(args.output.name + ".ckpt")
    # Before an hour of training: every file written must be writable and none an input.
    history_file = args.output.with_name(args.output.stem + ".history.csv")
    curves_file = args.output.with_name(args.output.stem + ".curves.png")
    written = [args.output] if args.export else [args.output, checkpoint, history_file, curves_file]
    for path in written:
        check_writable(path)
    check_outputs(written, inputs=[settings.init], input_folders=[args.data])
    if settings.init is not None:
        load_network(Path(settings.init))  # a bad file is refused now, not after the pictures are read
    if args.export:
        state = checkpoint_state(settings, checkpoint)
        save_network(state, settings, args.output)
        print(f"wrote {args.output}: the weight average at step {state.step} of {settings.steps}")
        return
    train, validation = crowd_parts(read_crowd(args.data))
    watched = {name: (items[:: args.mall_every] if name == "mall" else items) for name, items in validation.items()}
    print(
        f"train pictures {', '.join(f'{k} {len(v)}' for k, v in train.items())}; "
        f"validation {', '.join(f'{k} {len(v)}' for k, v in validation.items())}",
        file=sys.stderr,
    )
    pictures = TrainingPictures(train, settings.shares)
    print(
        f"read {len(pictures)} train pictures in {time.time() - started:.0f} s; device "
        f"{'cuda' if args.device == 'auto' and torch.cuda.is_available() else args.device}, threads {torch.get_num_threads()}",
        file=sys.stderr,
    )
    state = train_network(
        settings,
        pictures,
        watched,
        checkpoint,
        device=args.device,
        eval_every=args.eval_every,
        stop_after=None if args.stop_after is None else args.stop_after * 60,
        log=lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True),
    )
    _write_history(state.history, history_file)
    _plot(state.history, curves_file, settings.loss)
    if state.step < settings.steps:
        return
    save_network(state, settings, args.output)
    network = averaged_network(state)
    final = validation_figures(network, validation, next(network.parameters()).device)
    print(f"wrote {args.output}; validation (all frames) " + ", ".join(f"{k} {v:.3f}" for k, v in final.items()))
    print(f"wall {time.time() - started:.0f} s; load {os.getloadavg()[0]:.1f}", file=sys.stderr)


def _write_history(history: list[dict[str, float]], path: Path) -> None:
    if not history:
        return
    columns = list(dict.fromkeys(key for row in history for key in row))
    with atomic_write(path, newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(history)


def _plot(history: list[dict[str, float]], path: Path, loss: str) -> None:
    if not history:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([row["step"] for row in history])
    keys = [key for key in history[0] if key.endswith("MAE")]
    figure, axes = plt.subplots(1, len(keys) + 1, figsize=(4 * (len(keys) + 1), 3.2))
    axes[0].plot(steps, [row["loss"] for row in history])
    axes[0].set_title(f"training loss ({loss})")
    for axis, key in zip(axes[1:], keys, strict=True):
        axis.plot(steps, [row.get(key, np.nan) for row in history], marker="o")
        axis.set_title(f"validation {key}")
    for axis in axes:
        axis.set_xlabel("step")
    figure.tight_layout()
    with atomic_write(path, "wb") as file:
        figure.savefig(file, format="png", dpi=90)
    plt.close(figure)


if __name__ == "__main__":
    main()
