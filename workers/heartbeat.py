"""The lease keeper: one thread per worker process renews the lease of every run the process
holds, notices cancellation, enforces the grace, and stops a tool that stopped making progress.

Every ``lease/3`` seconds (at most every 0.5 s) it renews all leases in one round trip (one
``renew.lua`` call per shard and 500 runs: 10,000 runs are 20 calls in one pipeline), so the
sweeper knows the runs are alive: a prefork pool process holds one run, a thread pool process
may hold thousands, and a thread and a connection per run would not scale. When a run's task
turns out cancelled it interrupts the run (``on_cancel``: the context wakes, an async tool's
task is cancelled); if the tool has still not returned after the grace period it stops the run
(``terminate``: the pool process is killed, or the run abandoned and its io-pool job let go of;
see ``mcpq.workers.execution``).

Renewing is automatic, so without a bound a hung tool (blocked forever outside ``ctx``) would
keep its lease, its pool slot and its task ``working`` forever: the sweeper only recovers runs
whose lease expired. The :class:`Watchdog` is that bound: once the tool has run its own code for
``max_run_s`` without calling its context, the run is stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.logs import task_hash
from mcpq.shared.store import Renewal, Reply, TaskStore

log = logging.getLogger("mcpq.worker")


@dataclass(frozen=True, slots=True)
class Watchdog:
    """``busy_for()`` seconds of the tool's own code since its last context call, the limit
    (0: none), and what ends the task when the limit is passed (before the run is stopped)."""

    busy_for: Callable[[], float]
    limit_s: float
    fail_task: Callable[[], None]

    def tripped(self) -> bool:
        return self.limit_s > 0 and self.busy_for() > self.limit_s


@dataclass(eq=False, slots=True)
class KeptRun:
    """One run under the keeper's watch."""

    ref: str
    gen: int
    #: The task ended (``TERMINAL``: a cancel) or this run lost it (``SUPERSEDED``, ``GONE``).
    on_cancel: Callable[[Reply], None]
    terminate: Callable[[], None]
    watchdog: Watchdog
    cancelled_at: float | None = field(default=None)


class LeaseKeeper:
    def __init__(
        self, store: TaskStore, lease_s: float, grace_s: float, *, min_peers: int = 0
    ) -> None:
        self._store = store
        #: What each renewal tells the store of this process's other runs, at least (see
        #: ``TaskStore.renew_many``; a run of its own says 1: ``mcpq.workers.solo``).
        self._min_peers = min_peers
        self._lease_ms = int(lease_s * 1000)
        self._interval = min(max(lease_s / 3, 0.05), 0.5)
        self._grace_s = grace_s
        self._lock = threading.Lock()
        self._runs: set[KeptRun] = set()
        #: Runs to renew before the next round (:meth:`soon`), and what wakes the keeper for them.
        self._urgent: set[KeptRun] = set()
        self._soon = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def keep(self, run: KeptRun) -> Iterator[KeptRun]:
        """Keep ``run``'s lease while the block runs."""
        self.add(run)
        try:
            yield run
        finally:
            self.drop(run)

    def add(self, run: KeptRun) -> None:
        """Keep ``run``'s lease until :meth:`drop` (:meth:`keep` without the block, for a run
        that outlives the call that claimed it: a run on the run loop)."""
        with self._lock:
            self._runs.add(run)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="mcpq-leases", daemon=True)
                self._thread.start()
        # NOTE: the keeper is not woken: it ticks every interval whether runs come or go. A new
        # run's lease was just set by its claim and needs renewing only a third of a lease
        # later; waking the keeper for each run cost a no-op run about a tenth of its CPU.

    def peers(self) -> int:
        """What a run this process claims now has as peers: the runs it holds (at least
        ``min_peers``), as its renewals will say."""
        with self._lock:
            return max(len(self._runs), self._min_peers)

    def hand_back_all(self) -> int:
        """The worker is shutting down: release every run this process holds, so other
        workers take them at once instead of after their leases expire. (A thread pool's runs
        live in the worker's main process; a prefork child hands its own run back.)"""
        with self._lock:
            runs = list(self._runs)
            self._runs.clear()
        for run in runs:
            try:
                self._store.release(run.ref, run.gen)
            except Exception:  # the lease expires anyway; the sweeper then takes over
                log.warning("could not hand back a run", exc_info=True)
            run.terminate()  # an io run is abandoned and its job let go of
        return len(runs)

    def drop(self, run: KeptRun) -> None:
        with self._lock:
            self._runs.discard(run)

    def soon(self, run: KeptRun) -> None:
        """Renew ``run`` now, out of turn, alone (one short round trip): its task changed, and
        if it was cancelled, the run learns it at once, wherever it waits. (A run on the run
        loop that awaits anything but its context, an HTTP call, hears of a cancel only so or
        from the next round, which at 10,000 runs comes every 0.8 s or so.)"""
        with self._lock:
            if run not in self._runs:
                return
            self._urgent.add(run)
        self._soon.set()

    def _loop(self) -> None:
        last = time.monotonic()
        while True:
            with self._lock:
                pending = any(run.cancelled_at is not None for run in self._runs)
            period = 0.25 if pending else self._interval
            if self._soon.wait(max(last + period - time.monotonic(), 0.0)):
                self._soon.clear()
                with self._lock:
                    urgent, self._urgent = self._urgent & self._runs, set()
                if urgent and time.monotonic() < last + period:
                    self._safely(partial(self._renew, list(urgent)))
                    continue
            last = time.monotonic()
            self._safely(self.tick)

    @staticmethod
    def _safely(call: Callable[[], None]) -> None:
        try:
            call()
        except Exception:  # never let the keeper die: the next tick may pass
            log.warning("lease keeper tick failed", exc_info=True)

    def tick(self) -> None:
        """One round: stalled runs are stopped, the others renewed in one round trip."""
        with self._lock:
            runs = list(self._runs)
        live = []
        for run in runs:
            if run.watchdog.tripped():
                self._stop_stalled(run)
            else:
                live.append(run)
        self._renew(live)

    def _renew(self, live: list[KeptRun]) -> None:
        if not live:
            return
        try:
            pairs = [(r.ref, r.gen) for r in live]
            renewals = self._store.renew_many(pairs, self._lease_ms, self._min_peers)
        except StoreUnavailable:
            log.warning("lease renewal failed: task store unavailable")
            return
        for run, renewal in zip(live, renewals, strict=True):
            self._judge(run, renewal)

    def _judge(self, run: KeptRun, renewal: Renewal) -> None:
        if renewal.reply is Reply.PARKED:  # the run let go of the task; it is ending
            self.drop(run)
            return
        if renewal.reply is not Reply.OK:  # ended (cancelled), gone, or taken over
            if run.cancelled_at is None:
                run.cancelled_at = time.monotonic()
                run.on_cancel(renewal.reply)
            elif time.monotonic() - run.cancelled_at >= self._grace_s:
                log.warning(
                    "tool ignored cancellation for %.1fs: stopping it",
                    self._grace_s,
                    extra={"task": task_hash(run.ref)},
                )
                self.drop(run)
                run.terminate()

    def _stop_stalled(self, run: KeptRun) -> None:
        """The task fails first (fenced by this run's generation, so a cancel or a newer run
        wins), then the run is stopped: a hung tool cannot be interrupted any other way."""
        log.warning(
            "tool made no progress for %gs (max_run_s): stopping its run",
            run.watchdog.limit_s,
            extra={"task": task_hash(run.ref)},
        )
        self.drop(run)
        try:
            run.watchdog.fail_task()
        except Exception:  # the store is down: the lease lapses and the sweeper re-runs it
            log.warning("could not mark the stalled run failed", exc_info=True)
        run.terminate()
