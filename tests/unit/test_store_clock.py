"""The store's reading of Redis's clock: anchored at the midpoint of a ``TIME`` round trip,
carried forward on the monotonic clock, read again when stale."""

from __future__ import annotations

import time

import pytest

from shared.store import clock as clock_module
from shared.store.clock import RedisClock


def test_no_anchor_means_read_time_first() -> None:
    assert RedisClock().now_ms() is None


def test_the_anchor_is_the_round_trip_s_midpoint_carried_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mono = [100.0]
    monkeypatch.setattr(clock_module.time, "monotonic", lambda: mono[0])
    clock = RedisClock(refresh_s=10)
    # TIME said 1 700 000 000.250 000 s; the round trip ran from 99.9 to 100.0 (midpoint 99.95)
    assert clock.anchor([1_700_000_000, 250_000], sent=99.9, received=100.0) == 1_700_000_000_300
    mono[0] = 103.95  # 4 s after the midpoint
    assert clock.now_ms() == 1_700_000_004_250
    mono[0] = 109.96  # past the refresh: the store must read TIME again
    assert clock.now_ms() is None


def test_a_real_clock_moves_forward() -> None:
    clock = RedisClock()
    sent = time.monotonic()
    first = clock.anchor((int(time.time()), 0), sent, time.monotonic())
    time.sleep(0.02)
    later = clock.now_ms()
    assert later is not None and later - first >= 15


def test_the_shortest_round_trip_sets_the_anchor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock_module.time, "monotonic", lambda: 10.0)
    clock = RedisClock()
    # The first reading took 4 ms (it connected), the second 0.2 ms: the second one counts.
    slow, fast = (9.0, 9.004, [1_000, 0]), (9.5, 9.5002, [1_000, 600_000])
    assert clock.anchor_best([slow, fast]) == 1_000_600 + int((10.0 - 9.5001) * 1000)
