"""``mcpq.shared.flag.Flag``: a ``threading.Event`` that is a bool until a thread waits."""

from __future__ import annotations

import threading
import time
import tracemalloc
from collections.abc import Callable

import pytest

from mcpq.shared.flag import Flag

pytestmark = pytest.mark.quick


def test_it_behaves_as_an_event() -> None:
    flag = Flag()
    assert not flag.is_set()
    assert flag.wait(0.01) is False
    flag.set()
    assert flag.is_set()
    assert flag.wait(0) is True  # set before the wait: returns at once
    flag.clear()
    assert not flag.is_set()
    assert flag.wait(0.01) is False


def test_a_set_wakes_a_thread_that_waits() -> None:
    flag = Flag()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(flag.wait(10)))
    waiter.start()
    time.sleep(0.05)  # (it waits, or is about to: either way the set must reach it)
    flag.set()
    waiter.join(5)
    assert woke == [True]


def test_no_set_is_lost_to_a_waiter_that_arrives_at_the_same_time() -> None:
    for _ in range(200):
        flag = Flag()
        woke: list[bool] = []
        waiter = threading.Thread(target=lambda f=flag, w=woke: w.append(f.wait(5)))
        waiter.start()
        flag.set()
        waiter.join(5)
        assert woke == [True]


def _allocated(make: Callable[[], object], count: int) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make() for _ in range(count)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return after - before


def test_a_flag_nobody_waits_on_is_a_fraction_of_an_event() -> None:
    # What it is for: 10,000 runs on the run loop hold three each and never wait on them.
    flags, events = _allocated(Flag, 1000), _allocated(threading.Event, 1000)
    assert flags * 5 < events, (flags, events)
