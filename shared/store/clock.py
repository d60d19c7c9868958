"""Redis's clock, read without a command per script.

Every timestamp and deadline in the store (``created_ms``, leases, the unclaimed bound, TTLs)
is on one clock, Redis's own, so web replicas and workers on other hosts agree on when a lease
has lapsed whatever their own clocks say. The scripts used to read it with ``TIME``, one command
in every script that needs it: three or four per task. Instead each store reads ``TIME`` once
(:meth:`RedisClock.anchor`) and carries it forward with this process's monotonic clock, which
neither jumps nor steps when the wall clock is set; the scripts get ``now`` as their last ARGV
(``lua/_clock.lua``).

Accuracy: the anchor is off by at most half the round trip of the ``TIME`` that set it (the
reading is placed at the round trip's midpoint; the store reads three times and keeps the
shortest round trip, since the first may include connecting), plus the drift between the two
clocks since, a few parts per million. It is read again (once) every :data:`REFRESH_S`, and that
reading replaces the anchor only if it is at least as accurate as the anchor has remained
(:data:`DRIFT`) or contradicts it. A refresh taken while the process was busy thus cannot put
its clock milliseconds off the other processes'; they stay within a fraction of a millisecond of
each other, so a task's ``created_ms`` (the web's clock) precedes its ``updated_ms`` (a
worker's). That is well inside what the store's deadlines (leases of seconds) care about. With
shards on several Redis nodes (a Redis Cluster) the anchor is one node's clock, as NTP keeps
them: a few milliseconds apart.

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

#: The rate at which an anchor's error is assumed to grow: the drift between this process's
#: monotonic clock and Redis's wall clock, 20 parts per million (two NTP-disciplined clocks
#: agree far better; on one host both are slewed alike and do not drift at all).
DRIFT = 20e-6


class RedisClock:
    """Redis's time in milliseconds, from an anchor (``TIME`` and the monotonic clock when it
    was read) that the owning store refreshes when :meth:`now_ms` says it is stale.

    A reading replaces the anchor only when it is at least as good: its error (half its round
    trip) no larger than the anchor's own plus the drift since. A reading taken while the
    process was busy (an event loop serving twenty clients, a worker's threads holding the GIL)
    has a long round trip and, taken alone, could put this process's clock milliseconds off the
    others'; then the anchor it would replace is kept until the next refresh."""

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        #: (Redis ms, monotonic s) at one instant, that instant's error (s), and when TIME was
        #: last read (monotonic s). One tuple, so a reader never sees half of an update.
        self._anchor: tuple[float, float, float, float] | None = None

    def now_ms(self) -> int | None:
        """Redis's time now, or ``None`` when the anchor is missing or stale (read ``TIME``,
        then :meth:`anchor`)."""
        anchor = self._anchor
        if anchor is None:
            return None
        redis_ms, at, _error, checked = anchor
        now = time.monotonic()
        if now - checked >= self._refresh_s:
            return None
        return int(redis_ms + (now - at) * 1000)

    #: How many ``TIME`` readings a store takes to set its first anchor (:meth:`anchor_best`).
    READINGS = 3

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
        """Take a ``TIME`` reply (seconds, microseconds) whose round trip ran from ``sent`` to
        ``received`` (monotonic) as the anchor, unless the anchor in place is more accurate;
        returns Redis's time now."""
        seconds, micros = int(reply[0]), int(reply[1])
        at, error = (sent + received) / 2, (received - sent) / 2
        reading = (seconds * 1000 + micros / 1000, at, error, at)
        with self._lock:
            kept = self._anchor
            if kept is None or self._better(reading, kept):
                self._anchor = reading
            else:
                self._anchor = (*kept[:3], at)  # read now: kept, not stale, to the next refresh
            redis_ms, anchored_at = self._anchor[:2]
        return int(redis_ms + (time.monotonic() - anchored_at) * 1000)

    @staticmethod
    def _better(reading: tuple[float, float, float, float], kept: tuple[float, ...]) -> bool:
        """Whether ``reading`` should replace the anchor ``kept``: it is at least as accurate,
        or the two disagree by more than both errors allow. The anchor is then wrong, whatever
        its round trip: the host slept (the monotonic clock stood still), Redis's wall clock was
        set, or Redis is another host now (a failover)."""
        redis_ms, at, error, _checked = reading
        kept_ms, kept_at, kept_error = kept[0], kept[1], kept[2]
        aged = kept_error + (at - kept_at) * DRIFT
        projected = kept_ms + (at - kept_at) * 1000
        return error <= aged or abs(redis_ms - projected) > (error + aged) * 1000
