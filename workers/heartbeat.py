"""The lease heartbeat of a run: renews the lease, notices cancellation, enforces the grace, and
stops a tool that stopped making progress.

A thread in the process running the tool. Every ``lease/3`` seconds (at most every 0.5 s) it
renews the run's lease, so the sweeper knows the worker is alive. When the task turns out
cancelled it flags the context, and if the tool has still not returned after the grace period it
asks Celery to terminate the pool process that runs it (for tools that never call ``ctx``).

Renewing is automatic, so without a bound a hung tool (blocked forever outside ``ctx``) would
keep its lease, its pool slot and its task ``working`` forever: the sweeper only recovers runs
whose lease expired. The :class:`Watchdog` is that bound: once the tool has run its own code for
``max_run_s`` without calling its context, the run is stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.errors import StoreUnavailable
from shared.logs import task_hash
from shared.store import Reply, TaskStore

log = logging.getLogger("mcpq.worker")


@dataclass(frozen=True)
class Watchdog:
    """``busy_for()`` seconds of the tool's own code since its last context call, the limit
    (0: none), and what ends the task when the limit is passed (before the process is killed)."""

    busy_for: Callable[[], float]
    limit_s: float
    fail_task: Callable[[], None]

    def tripped(self) -> bool:
        return self.limit_s > 0 and self.busy_for() > self.limit_s


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
        watchdog: Watchdog,
    ) -> None:
        super().__init__(name=f"heartbeat-{ref[:8]}", daemon=True)
        self._store, self._ref, self._gen = store, ref, gen
        self._lease_ms = int(lease_s * 1000)
        self._interval = max(lease_s / 3, 0.05)
        self._grace_s = grace_s
        self._cancel_seen = cancel_seen
        self._terminate = terminate
        self._watchdog = watchdog
        self._halt = threading.Event()  # not `_stop`: Thread has its own

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        cancelled_at: float | None = None
        while not self._halt.wait(self._poll_interval(cancelled_at)):
            if self._watchdog.tripped():
                self._stop_stalled_run()
                return
            try:
                renewal = self._store.renew(self._ref, self._gen, self._lease_ms)
            except StoreUnavailable:
                log.warning("lease renewal failed: task store unavailable")
                continue
            except Exception:  # e.g. Redis out of memory: keep beating, the next one may pass
                log.warning("lease renewal failed", exc_info=True)
                continue
            if renewal.reply is Reply.PARKED:  # the run let go of the task; it is ending
                return
            if renewal.reply is not Reply.OK:  # ended (cancelled), gone, or taken over
                self._cancel_seen.set()
                cancelled_at = cancelled_at or time.monotonic()
            if cancelled_at is not None and time.monotonic() - cancelled_at >= self._grace_s:
                log.warning(
                    "tool ignored cancellation for %.1fs: terminating it",
                    self._grace_s,
                    extra={"task": task_hash(self._ref)},
                )
                self._terminate()
                return

    def _stop_stalled_run(self) -> None:
        """The task fails first (fenced by this run's generation, so a cancel or a newer run
        wins), then the process is killed: a hung tool cannot be interrupted any other way, and
        Celery replaces the pool process, so the slot serves the next run."""
        log.warning(
            "tool made no progress for %gs (max_run_s): stopping its run",
            self._watchdog.limit_s,
            extra={"task": task_hash(self._ref)},
        )
        try:
            self._watchdog.fail_task()
        except Exception:  # the store is down: the lease lapses and the sweeper re-runs it
            log.warning("could not mark the stalled run failed", exc_info=True)
        self._terminate()

    def _poll_interval(self, cancelled_at: float | None) -> float:
        return min(self._interval, 0.25) if cancelled_at is not None else min(self._interval, 0.5)
