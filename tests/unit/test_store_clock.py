"""The store's reading of Redis's clock: anchored at the midpoint of a ``TIME`` round trip,
carried forward on the monotonic clock, read again when stale."""

from __future__ import annotations

import time

import pytest

from mcpq.shared.store import clock as clock_module
from mcpq.shared.store.clock import RedisClock


def test_no_anchor_means_read_time_first() -> None:
    assert RedisClock().now_ms() is None


#: Half a round trip of 0.12 ms, exact in binary floating point.
HALF_RT = 2.0**-14


def _fake_clock(
    monkeypatch: pytest.MonkeyPatch, refresh_s: float = 30
) -> tuple[RedisClock, list[float]]:
    """A clock on a monotonic clock the test sets (``mono[0]``, from 100.0 s)."""
    mono = [100.0]
    monkeypatch.setattr(clock_module.time, "monotonic", lambda: mono[0])
    return RedisClock(refresh_s=refresh_s), mono


def test_the_anchor_is_the_round_trip_s_midpoint_carried_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, mono = _fake_clock(monkeypatch, refresh_s=10)
    # TIME said 1 700 000 000.250 000 s; the round trip's midpoint was 100.0 (now)
    sent, received = 100.0 - HALF_RT, 100.0 + HALF_RT
    assert clock.anchor([1_700_000_000, 250_000], sent, received) == 1_700_000_000_250
    mono[0] = 104.0  # 4 s after the midpoint
    assert clock.now_ms() == 1_700_000_004_250
    mono[0] = 110.0  # the refresh is due: this caller must read TIME again
    assert clock.now_ms() is None
    # Meanwhile the other callers carry on with the anchor: one TIME, not one per request.
    assert clock.now_ms() == 1_700_000_010_250
    mono[0] = 111.0  # the reading was not taken within a second: another caller takes it
    assert clock.now_ms() is None
    assert clock.now_ms() == 1_700_000_011_250


def test_a_poor_anchor_is_read_again_soon_then_less_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, mono = _fake_clock(monkeypatch)
    # The process was busy: a 4 ms round trip (2 ms of error, above GOOD_ERROR_S).
    clock.anchor([1_000, 0], 99.996, 100.0)
    due = []
    for _ in range(7):
        while clock.now_ms() is not None:
            mono[0] += 0.25
        due.append(mono[0])
        clock.anchor([1_000, 0], mono[0] - 0.004, mono[0])  # busy again each time
    waits = [round(later - earlier) for earlier, later in zip([100.0, *due], due, strict=False)]
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    # A quiet moment gives a good reading: then every REFRESH_S only.
    clock.anchor([1_000, 0], mono[0] - 2 * HALF_RT, mono[0])
    start = mono[0]
    while clock.now_ms() is not None:
        mono[0] += 0.25
    assert mono[0] - start == pytest.approx(30, abs=0.01)


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


def _clock_at(monkeypatch: pytest.MonkeyPatch, at: float) -> tuple[RedisClock, list[float]]:
    """A clock anchored at 100.0 s, then read at ``at``."""
    clock, mono = _fake_clock(monkeypatch)
    # Anchored by a 0.1 ms round trip around 100.0 s: Redis said 1 000 000.000 s then.
    clock.anchor([1_000_000, 0], sent=100.0 - HALF_RT, received=100.0 + HALF_RT)
    mono[0] = at
    return clock, mono


def test_a_refresh_with_a_slow_round_trip_keeps_the_more_accurate_anchor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, mono = _clock_at(monkeypatch, 130.0)
    assert clock.now_ms() is None, "stale: the store reads TIME again"
    # A busy process read TIME with a 6 ms round trip; its midpoint reading is 2 ms early.
    assert clock.anchor([1_000_029, 995_000], sent=129.994, received=130.0) == 1_000_030_000
    assert clock.now_ms() == 1_000_030_000, "the old anchor, carried forward, and fresh again"
    mono[0] = 159.0
    assert clock.now_ms() == 1_000_059_000


def test_a_more_accurate_reading_replaces_the_anchor(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, mono = _clock_at(monkeypatch, 130.0)
    # 0.08 ms round trip, and Redis's clock is 0.4 ms ahead of the projection: taken.
    assert clock.anchor([1_000_030, 400], sent=129.99996, received=130.00004) == 1_000_030_000
    mono[0] = 131.0
    assert clock.now_ms() == 1_000_031_000  # 1 000 031 000.4, whole milliseconds


def test_an_old_anchor_gives_way_to_a_slower_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, _ = _clock_at(monkeypatch, 400.0)
    # 300 s on: the anchor's error has grown to 0.05 ms + 300 s x 20 ppm = 6.05 ms, so a
    # reading with a 6 ms round trip (3 ms of error) is the better one now.
    assert clock.anchor([1_000_300, 1_000], sent=399.997, received=400.003) == 1_000_300_001


def test_a_reading_that_contradicts_the_anchor_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, mono = _clock_at(monkeypatch, 130.0)
    # The host slept 5 s (the monotonic clock stood still): Redis is 5 s ahead of the anchor's
    # projection, far beyond both errors, so a slow reading is still taken.
    assert clock.anchor([1_000_035, 0], sent=129.994, received=130.006) == 1_000_035_000
    mono[0] = 131.0
    assert clock.now_ms() == 1_000_036_000
