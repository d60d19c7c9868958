"""Status reports (``ctx.report``) written a moment late, so that a run which reports and then
ends at once spends no write on a message nobody could have seen.

A report is progress for people: clients read it when they poll (``pollIntervalMs``, a second
or more), and the run's end clears it (``finish.lua`` stores the final status without one). So
``ctx.report`` only records the message, and one thread per worker process (:class:`ReportFlusher`)
writes it ``MCPQ_REPORT_DELAY_MS`` later (up to half as much again: due times share a grid), the
latest message of the run in one write, counted as all the reports it stands for (``reports``,
which 2025-era streams turn into progress notifications). A run that ends within the delay
writes none of it: for a short tool that is a round trip and five Redis commands fewer per task,
and its result is out that much sooner.

``ctx.report_progress`` is a report with numbers (``prog``, ``total``: a synchronous call's
stream sends them as ``notifications/progress``). Log messages (``ctx.info``...) of a
synchronous call ride the same writes: they are only sent on its stream, so they wait with the
report, are written in one batch, and, unlike a status, are written before the run's end
(``RunContext.flush_logs``): a stream sends them before the result.

Ordering: a run's other writes (asking for input, parking, saving a step) first write its
pending report, in the run's own thread, under the run's write lock (:class:`PendingReport`);
the flusher takes the same lock, so a report is never stored after a later write of its run. A
flushed report the store refuses (the task was cancelled, or the run superseded) interrupts the
run, as the lease keeper would.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.store import Reply

log = logging.getLogger("mcpq.worker")


@dataclass(frozen=True)
class Report:
    """One write of a run's reports: its latest status (``message``, standing for ``count``
    reports, made at ``at_ms`` on Redis's clock, with the numbers of ``report_progress``), or
    none (``message`` None: only log messages), and the log messages made since the last write,
    numbered in the run's order from ``first_log``."""

    message: str | None
    count: int = 0
    at_ms: int = 0
    progress: float | None = None
    total: float | None = None
    logs: tuple[Any, ...] = ()
    first_log: int = 0


#: Writes a report → the store's reply.
Write = Callable[[Report], Reply]
#: How many log messages one run keeps waiting for a write: a tool that logs in a tight loop
#: writes them then and there, in batches of this many.
MAX_PENDING_LOGS = 100


class PendingReport:
    """One run's report not yet written, and the lock that orders the run's writes."""

    def __init__(self, write: Write, on_refused: Callable[[Reply], None]) -> None:
        self._write = write
        self._on_refused = on_refused
        self.lock = threading.Lock()  # held across a write: a run's writes stay in order
        self._message: str | None = None
        self._count = 0
        self._at_ms = 0
        self._progress: float | None = None
        self._total: float | None = None
        self._logs: list[Any] = []
        self._first_log = 0

    def _pending(self) -> bool:
        return self._message is not None or bool(self._logs)

    def set(
        self,
        message: str,
        at_ms: int,
        progress: float | None = None,
        total: float | None = None,
    ) -> bool:
        """Record ``message``, made at ``at_ms`` (the task's lastUpdatedAt once written); True
        when nothing was pending (the caller schedules a flush)."""
        with self.lock:
            first = not self._pending()
            self._message, self._count, self._at_ms = message, self._count + 1, at_ms
            self._progress, self._total = progress, total
            return first

    def add_log(self, entry: Any, number: int) -> tuple[bool, bool]:
        """Record log message ``number`` of the run (numbers follow each other). Returns (True
        when nothing was pending: schedule a flush, True when so many wait that the caller
        should write them now)."""
        with self.lock:
            first = not self._pending()
            if not self._logs:
                self._first_log = number
            self._logs.append(entry)
            return first, len(self._logs) >= MAX_PENDING_LOGS

    def flush(self) -> Reply:
        """Write what is pending now (``OK`` when nothing is). The run's own thread calls this
        before its other writes and handles the reply; callers hold no lock."""
        with self.lock:
            if not self._pending():
                return Reply.OK
            report = Report(
                self._message,
                self._count,
                self._at_ms,
                self._progress,
                self._total,
                tuple(self._logs),
                self._first_log,
            )
            self._message, self._count, self._logs = None, 0, []
            return self._write(report)

    def discard(self) -> None:
        """The run ends: its final write replaces any status message (log messages stay: the
        run writes them before its end, ``RunContext.flush_logs``)."""
        with self.lock:
            self._message, self._count = None, 0

    def flush_late(self) -> None:
        """The flusher's write: a refusal interrupts the run (it learns at its next call)."""
        try:
            reply = self.flush()
        except StoreUnavailable:
            log.warning("status report not written: task store unavailable")
            return
        if reply is not Reply.OK:
            self._on_refused(reply)


class ReportFlusher:
    """One thread per worker process: writes each pending report once its delay has passed."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._grid = delay_s / 2
        self._due: list[tuple[float, int, PendingReport]] = []
        self._order = itertools.count()  # ties: first scheduled, first written
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def schedule(self, pending: PendingReport) -> None:
        # NOTE: due times fall on a grid of half the delay, so one wake-up of the flusher writes
        # every report due in that step (between one and one and a half delays late), and the
        # flusher is woken only when the new report is due before every other: with a report
        # per run, a wake-up per run cost a no-op run about a tenth of its CPU.
        due = time.monotonic() + self.delay_s
        if self._grid > 0:
            due = math.ceil(due / self._grid) * self._grid
        with self._changed:
            sooner = not self._due or due < self._due[0][0]
            heapq.heappush(self._due, (due, next(self._order), pending))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="mcpq-reports", daemon=True)
                self._thread.start()
            if sooner:
                self._changed.notify()

    def _loop(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._changed.wait(timeout)
                _, _, pending = heapq.heappop(self._due)
            pending.flush_late()  # outside the condition: a slow write delays no schedule()
