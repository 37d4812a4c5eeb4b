"""Split strings and the registry entry point."""

from __future__ import annotations

import numpy as np
import pytest

from counting.core.defaults import DATASETS as DEFAULT_DATASET_NAMES
from counting.core.errors import DatasetError
from counting.data.datasets import DATASETS, load_dataset, parse_split
from counting.data.datasets.splits import random_labels


def test_standard_split_parses() -> None:
    assert parse_split(" standard ").kind == "standard"


def test_range_split_labels_frames_and_drops_the_rest() -> None:
    spec = parse_split("train=3-5,test=8-9")
    labels = spec.range_labels(np.arange(1, 11))
    assert labels.tolist() == ["", "", "train", "train", "train", "", "", "test", "test", ""]


def test_range_split_joins_ranges_with_plus_and_accepts_single_numbers() -> None:
    spec = parse_split("train=601-1400,test=1-600+1401-2000")
    assert spec.ranges == {"train": ((601, 1400),), "test": ((1, 600), (1401, 2000))}
    labels = spec.range_labels(np.array([1, 600, 601, 1400, 1401, 2000]))
    assert labels.tolist() == ["test", "test", "train", "train", "test", "test"]
    assert parse_split("test=7").ranges == {"test": ((7, 7),)}


def test_random_split_parses_fraction_and_seed() -> None:
    spec = parse_split("random:0.25:7")
    assert (spec.kind, spec.fraction, spec.seed) == ("random", 0.25, 7)
    assert parse_split("random:0.5").seed == 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "std",
        "train=5-3",
        "train=0-4",
        "train=1-5,test=5-9",
        "train=1-5,train=6-7",
        "val=1-4",
        "train=a-b",
        "random",
        "random:1.0",
        "random:0",
        "random:half",
        "random:0.2:x",
        "random:0.2:1:2",
    ],
)
def test_invalid_split_strings_explain_the_syntax_on_one_line(text: str) -> None:
    with pytest.raises(DatasetError) as caught:
        parse_split(text)
    message = str(caught.value)
    assert "\n" not in message
    assert "split" in message


def test_unknown_split_message_names_every_accepted_form() -> None:
    with pytest.raises(DatasetError, match=r"standard.*train=A-B,test=C-D.*random:FRACTION\[:SEED\]"):
        parse_split("everything")


def test_random_labels_have_the_asked_fraction_and_depend_only_on_the_seed() -> None:
    first = random_labels(200, 0.25, seed=3)
    assert (first == "test").sum() == 50
    assert np.array_equal(first, random_labels(200, 0.25, seed=3))
    assert not np.array_equal(first, random_labels(200, 0.25, seed=4))


def test_registry_serves_every_dataset_the_commands_accept() -> None:
    assert tuple(DATASETS) == DEFAULT_DATASET_NAMES


def test_load_dataset_rejects_unknown_names_options_and_roots(tmp_path) -> None:
    with pytest.raises(DatasetError, match="unknown dataset; choose one of ucsd, voc, mall"):
        load_dataset("coco", tmp_path)
    with pytest.raises(DatasetError, match="unknown option 'include_difficult'"):
        load_dataset("mall", tmp_path, include_difficult=True)
    with pytest.raises(DatasetError, match="folder not found"):
        load_dataset("mall", tmp_path / "absent")
