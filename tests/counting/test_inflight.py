"""computed_in_order: results in order, a second computation in flight, failures of the source."""

from __future__ import annotations

import threading
import time

import pytest

from counting.core.inflight import computed_in_order


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_results_come_back_in_the_order_of_the_items(depth: int) -> None:
    def slow_for_even(item: int) -> int:
        time.sleep(0.01 if item % 2 == 0 else 0.0)  # later items would overtake earlier ones
        return item * item

    assert list(computed_in_order(range(7), slow_for_even, depth)) == [(k, k * k) for k in range(7)]


def test_two_computations_overlap() -> None:
    running = 0
    most = 0
    lock = threading.Lock()

    def compute(item: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return item

    list(computed_in_order(range(6), compute, depth=2))
    assert most == 2


def test_items_taken_before_the_source_fails_are_still_handed_back() -> None:
    def source():
        yield from (1, 2, 3)
        raise OSError("stream lost")

    seen: list[int] = []
    with pytest.raises(OSError, match="stream lost"):
        for _item, result in computed_in_order(source(), lambda item: item * 10, depth=2):
            seen.append(result)
    assert seen == [10, 20, 30]


def test_a_failing_computation_raises_in_the_caller() -> None:
    def compute(item: int) -> int:
        if item == 2:
            raise ValueError("bad item 2")
        return item

    results = computed_in_order(range(5), compute, depth=2)
    assert next(results) == (0, 0)
    assert next(results) == (1, 1)
    with pytest.raises(ValueError, match="bad item 2"):
        next(results)
