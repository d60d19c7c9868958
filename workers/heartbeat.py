"""The lease heartbeat of a run: renews the lease, notices cancellation, enforces the grace.

A thread in the process running the tool. Every ``lease/3`` seconds it renews the run's lease
(so the sweeper knows the worker is alive). When the task turns out cancelled it flags the
context, and if the tool has still not returned after the grace period it asks Celery to
terminate the pool process that runs it (for tools that never call ``ctx``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from shared.errors import StoreUnavailable
from shared.store import TaskStore

log = logging.getLogger("mcpq.worker")


class Heartbeat(threading.Thread):
    def __init__(
        self,
        store: TaskStore,
        ref: str,
        gen: int,
        lease_s: float,
        grace_s: float,
        cancel_seen: threading.Event,
        terminate: Callable[[], None],
    ) -> None:
        super().__init__(name=f"heartbeat-{ref[:8]}", daemon=True)
        self._store, self._ref, self._gen = store, ref, gen
        self._lease_ms = int(lease_s * 1000)
        self._interval = max(lease_s / 3, 0.05)
        self._grace_s = grace_s
        self._cancel_seen = cancel_seen
        self._terminate = terminate
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        cancelled_at: float | None = None
        while not self._stop.wait(self._poll_interval(cancelled_at)):
            try:
                status = self._store.renew(self._ref, self._gen, self._lease_ms)
            except StoreUnavailable:
                log.warning("lease renewal failed: task store unavailable")
                continue
            except Exception:  # e.g. Redis out of memory: keep beating, the next one may pass
                log.warning("lease renewal failed", exc_info=True)
                continue
            if status == "PARKED":  # the run let go of the task; it is ending
                return
            if status in {"cancelled", "GONE", "SUPERSEDED", "completed", "failed"}:
                self._cancel_seen.set()
                cancelled_at = cancelled_at or time.monotonic()
            if cancelled_at is not None and time.monotonic() - cancelled_at >= self._grace_s:
                log.warning("tool ignored cancellation for %.1fs: terminating it", self._grace_s)
                self._terminate()
                return

    def _poll_interval(self, cancelled_at: float | None) -> float:
        return min(self._interval, 0.25) if cancelled_at is not None else min(self._interval, 0.5)
