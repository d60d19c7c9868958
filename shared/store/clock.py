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
clocks since, a few parts per million. It is read again (once) every :data:`REFRESH_S`, sooner
while it is poor (:data:`GOOD_ERROR_S`), and a reading replaces the anchor only if it is at
least as accurate as the anchor has remained (:data:`DRIFT`) or contradicts it. A reading taken
while the process was busy (a web process starting under load reads with round trips of 4-7 ms)
thus cannot put its clock milliseconds off the other processes'; they stay within a fraction of
a millisecond of each other, so a task's ``created_ms`` (the web's clock) precedes its
``updated_ms`` (a worker's). That is well inside what the store's deadlines (leases of seconds)
care about. With shards on several Redis nodes (a Redis Cluster) the anchor is one node's clock,
as NTP keeps them: a few milliseconds apart.

A suspended host (a laptop asleep) is the one case the monotonic clock misses: until the next
refresh, this process's ``now`` is behind by the time it slept. Its writes then carry times in
the past: a lease it stamps may look lapsed early, and the sweeper recovers a run that is still
alive, which the fencing generations make safe (the late run's writes are refused).
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

#: Seconds between two readings of Redis's ``TIME`` by one store (drift in that time: well
#: under a millisecond).
REFRESH_S = 30.0

#: An anchor this accurate (half a round trip of 0.5 ms) is read again every
#: :data:`REFRESH_S`; a less accurate one (read while the process was busy) sooner:
#: :data:`RETRY_S`, then twice as long each time, up to :data:`REFRESH_S`, so that a quiet
#: moment soon gives a better one at the cost of a few ``TIME`` commands.
GOOD_ERROR_S = 0.00025

#: Seconds a caller has to read ``TIME`` for a stale anchor before another caller tries, and
#: the first wait before reading again for a poor anchor.
RETRY_S = 1.0

#: The rate at which an anchor's error is assumed to grow: the drift between this process's
#: monotonic clock and Redis's wall clock, 20 parts per million (two NTP-disciplined clocks
#: agree far better; on one host both are slewed alike and do not drift at all).
DRIFT = 20e-6


class _Anchor(NamedTuple):
    redis_ms: float  # Redis's time at ``at``
    at: float  # monotonic s
    error: float  # s: half the round trip of the reading
    due: float  # monotonic s at which TIME is to be read again
    wait: float  # s between the last reading and ``due``


class RedisClock:
    """Redis's time in milliseconds, from an anchor (``TIME`` and the monotonic clock when it
    was read) that the owning store refreshes when :meth:`now_ms` says it is due.

    A reading replaces the anchor only when it is at least as good: its error (half its round
    trip) no larger than the anchor's own plus the drift since. A reading taken while the
    process was busy (an event loop serving twenty clients, a worker's threads holding the GIL)
    has a long round trip and, taken alone, could put this process's clock milliseconds off the
    others'; then the anchor it would replace is kept."""

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        #: One tuple, replaced whole, so a reader never sees half of an update.
        self._anchor: _Anchor | None = None

    def now_ms(self) -> int | None:
        """Redis's time now, or ``None`` when this caller must read ``TIME`` (then
        :meth:`anchor`): there is no anchor yet, or a reading is due and this caller is the
        first to find it so. The others meanwhile carry on with the anchor (it is still
        accurate: the refresh bounds drift, which is tiny), so a busy process does not send one
        ``TIME`` per request in flight, each slow."""
        anchor = self._anchor  # one read of one attribute: never half of an update
        if anchor is None:
            return None
        now = time.monotonic()
        if now >= anchor.due and self._claim_reading(now):
            return None
        return int(anchor.redis_ms + (now - anchor.at) * 1000)

    def _claim_reading(self, now: float) -> bool:
        """Whether this caller is the one to read ``TIME`` now. The reading is put off by
        :data:`RETRY_S` for the others, so that if it fails another caller tries soon."""
        with self._lock:
            anchor = self._anchor
            if anchor is None or now < anchor.due:
                return False  # another caller claimed the reading first
            self._anchor = anchor._replace(due=now + RETRY_S)
            return True

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
        with self._lock:
            kept = self._anchor
            redis_ms = seconds * 1000 + micros / 1000
            if kept is None or self._better(redis_ms, at, error, kept):
                chosen = _Anchor(redis_ms, at, error, 0.0, 0.0)
            else:
                chosen = kept
            # A poor anchor is read again soon, then less and less often (see GOOD_ERROR_S).
            if chosen.error <= GOOD_ERROR_S:
                wait = self._refresh_s
            else:
                wait = min(self._refresh_s, max(RETRY_S, (kept.wait if kept else 0) * 2))
            self._anchor = chosen._replace(due=at + wait, wait=wait)
        return int(chosen.redis_ms + (time.monotonic() - chosen.at) * 1000)

    @staticmethod
    def _better(redis_ms: float, at: float, error: float, kept: _Anchor) -> bool:
        """Whether a reading should replace the anchor ``kept``: it is at least as accurate, or
        the two disagree by more than both errors allow. The anchor is then wrong, whatever its
        round trip: the host slept (the monotonic clock stood still), Redis's wall clock was
        set, or Redis is another host now (a failover)."""
        aged = kept.error + (at - kept.at) * DRIFT
        projected = kept.redis_ms + (at - kept.at) * 1000
        return error <= aged or abs(redis_ms - projected) > (error + aged) * 1000
