"""Redis's clock, read without a command per script.

Every timestamp and deadline in the store (``created_ms``, leases, the unclaimed bound, TTLs)
is on one clock, Redis's own, so web replicas and workers on other hosts agree on when a lease
has lapsed whatever their own clocks say. The scripts used to read it with ``TIME``, one command
in every script that needs it: three or four per task. Instead each store reads ``TIME`` once
(:meth:`RedisClock.anchor`) and carries it forward with this process's monotonic clock, which
neither jumps nor steps when the wall clock is set; the scripts get ``now`` as their last ARGV
(``lua/_clock.lua``).

Accuracy: the anchor is off by at most half the round trip of the ``TIME`` that set it (the
reading is placed at the round trip's midpoint; the store reads twice and keeps the shorter
round trip, since the first may include connecting), plus the drift between the two clocks since, a
few parts per million; it is read again (once) every :data:`REFRESH_S`. That is well inside what the
store's deadlines (leases of seconds) care about. With shards on several Redis nodes (a Redis
Cluster) the anchor is one node's clock, as NTP keeps them: a few milliseconds apart.

A suspended host (a laptop asleep) is the one case the monotonic clock misses: until the next
refresh, this process's ``now`` is behind by the time it slept. Its writes then carry times in
the past: a lease it stamps may look lapsed early, and the sweeper recovers a run that is still
alive, which the fencing generations make safe (the late run's writes are refused).
"""

from __future__ import annotations

import threading
import time
from typing import Any

#: Seconds between two readings of Redis's ``TIME`` by one store (drift in that time: well
#: under a millisecond).
REFRESH_S = 30.0


class RedisClock:
    """Redis's time in milliseconds, from an anchor (``TIME`` and the monotonic clock when it
    was read) that the owning store refreshes when :meth:`now_ms` says it is stale."""

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        self._anchor: tuple[float, float] | None = None  # (Redis ms, monotonic s) at one instant

    def now_ms(self) -> int | None:
        """Redis's time now, or ``None`` when the anchor is missing or stale (read ``TIME``,
        then :meth:`anchor`)."""
        anchor = self._anchor  # one read of one attribute: never half of an update
        if anchor is None:
            return None
        redis_ms, at = anchor
        elapsed = time.monotonic() - at
        if elapsed >= self._refresh_s:
            return None
        return int(redis_ms + elapsed * 1000)

    #: How many ``TIME`` readings a store takes to set its first anchor (:meth:`anchor_best`).
    READINGS = 2

    def readings(self) -> int:
        """How many ``TIME`` readings to take now: :data:`READINGS` for the first anchor (the
        first round trip may include connecting), one to refresh it."""
        return self.READINGS if self._anchor is None else 1

    def anchor_best(self, readings: list[tuple[float, float, Any]]) -> int:
        """Set the anchor from the reading with the shortest round trip: ``(sent, received,
        TIME reply)`` each. The first reading may include connecting."""
        sent, received, reply = min(readings, key=lambda r: r[1] - r[0])
        return self.anchor(reply, sent, received)

    def anchor(self, reply: tuple[int, int] | list[int], sent: float, received: float) -> int:
        """Set the anchor from a ``TIME`` reply (seconds, microseconds) whose round trip ran
        from ``sent`` to ``received`` (monotonic); returns Redis's time now."""
        seconds, micros = int(reply[0]), int(reply[1])
        redis_ms = seconds * 1000 + micros / 1000
        with self._lock:
            self._anchor = (redis_ms, (sent + received) / 2)
        return int(redis_ms + (time.monotonic() - (sent + received) / 2) * 1000)
