"""mcpq's io pool: jobs on threads of the worker's process, a tool run on its job's own thread,
and a slot that can be let go of.

Celery's threads pool (a ``ThreadPoolExecutor``) cannot do the one thing a pool of waiting tools
needs: stop counting a job whose tool ignored its cancel. A thread cannot be killed, so such a
job would hold its thread, and its Celery slot, for as long as the tool runs. Hence the tool
used to run on a thread of its own while its job waited: two thread hand-offs per run, which
on a no-op run cost more than the run (context switches, GIL hand-offs, cold caches). Here:

- up to ``limit`` threads (started as jobs need them) each run a job, and its tool, on
  themselves; the thread that went idle last takes the next job, and when all are busy jobs
  wait in order;
- a job whose tool must be stopped is **let go of** (:meth:`Slot.let_go`, called by the lease
  keeper through ``mcpq.workers.execution``): Celery is answered at once as for a job that raised
  ``Ignore`` (the message is acked, nothing is stored), another thread takes the slot's place,
  and the stuck thread leaves the pool when its tool returns (whatever it still writes is
  fenced by its run's generation; its late answer to Celery is dropped);
- stopping the pool (Heroku's SIGTERM, as ``mcpq worker`` remaps it: a cold shutdown) hands
  every run of the process back first (:class:`HandsBackRuns`, the pool's Celery app: their
  leases are released, so other workers resume them at once, as a prefork child does on
  SIGTERM) and lets go of them, so the pool stops now;
- cancelling a request kills nothing (a cancelled run is stopped the io pool's way).

Selected with ``--pool custom`` and ``CELERY_CUSTOM_WORKER_POOL=workers.io_pool:IoPool`` (Celery's
way to name a pool of one's own); ``mcpq worker --pool io`` sets both.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from billiard.einfo import ExceptionInfo
from celery.concurrency.base import BasePool, apply_target
from celery.exceptions import Ignore

log = logging.getLogger("mcpq.worker")

#: How long stopping the pool waits for the jobs still on its threads (their runs were handed
#: back and let go of: what is left are claims and finishes, round trips).
STOP_WAIT_S = 5.0

_current = threading.local()


@runtime_checkable
class HandsBackRuns(Protocol):
    """The pool's Celery app, as the worker's is (``mcpq.workers.celery_app.WorkerApp``): it can
    hand back the runs of this process. Looked up on the app Celery gives the pool, so the
    pool does not import the app's module (which imports this one)."""

    def hand_back_runs(self) -> None: ...


def current_slot() -> Slot | None:
    """The io-pool slot of the job running on this thread (``None`` outside an io pool)."""
    slot: Slot | None = getattr(_current, "slot", None)
    return slot


def _ignored() -> tuple[int, ExceptionInfo, float]:
    """What Celery's tracer returns for a job that raised ``Ignore``: the request is acked,
    no state is stored (``Request.on_success`` → ``on_failure`` → ``acknowledge``)."""
    try:
        raise Ignore()
    except Ignore:
        return (1, ExceptionInfo(internal=True), 0.0)


class Slot:
    """One job's hold on the pool: answered to Celery once, by the job or by :meth:`let_go`."""

    def __init__(self, pool: IoPool, callback: Callable[[Any], None] | None) -> None:
        self._pool = pool
        self._callback = callback
        self._lock = threading.Lock()
        self._answered = False
        self.let_go_of = False

    def done(self, ret: Any) -> None:
        """The job returned (``apply_target``'s callback): Celery hears it, unless the job was
        let go of (Celery has its answer already)."""
        with self._lock:
            if self._answered:
                return
            self._answered = True
        if self._callback is not None:
            self._callback(ret)

    def let_go(self) -> bool:
        """Stop counting this job: Celery is answered as for ``Ignore`` and another thread takes
        its place. False when the job had already ended (nothing to let go of)."""
        with self._lock:
            if self._answered:
                return False
            self._answered = True
            self.let_go_of = True
        if self._callback is not None:
            self._callback(_ignored())
        self._pool.replace()
        return True


class _Result:
    """What Celery keeps of an applied job (a weak reference): it may ``terminate`` it."""

    def terminate(self, signal: Any = None) -> None:
        """Nothing to kill: a cancelled run stops the io pool's way (``mcpq.workers.execution``)."""


_Job = tuple[Any, Any, Any, Any, Any]


class _Thread(threading.Thread):
    """A pool thread, its first job, and the inbox a job is handed to it through while idle."""

    def __init__(self, serve: Callable[[_Thread], None], first: _Job | None) -> None:
        super().__init__(target=serve, args=(self,), name="io-pool", daemon=True)
        self.first = first
        self.inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()


class IoPool(BasePool):
    body_can_be_buffer = True
    signal_safe = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._backlog: collections.deque[_Job] = collections.deque()
        self._idle: list[_Thread] = []  # a stack: the thread that went idle last serves next
        self._threads: set[_Thread] = set()
        self._slots = 0  # threads that hold a slot: all but those let go of
        self._stopping = False

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    def _spawn(self, first: _Job | None) -> None:
        """A thread for a slot already counted in ``_slots``; started outside the lock."""
        thread = _Thread(self._serve, first)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def replace(self) -> None:
        """A slot was let go of: its thread no longer counts, and jobs waiting for a slot get
        a new thread now (otherwise the next job starts one)."""
        with self._lock:
            self._slots -= 1
            spawn = not self._stopping and bool(self._backlog)
            if spawn:
                self._slots += 1
        if spawn:
            self._spawn(None)

    def _next(self, me: _Thread) -> _Job | None:
        """The next job: the backlog's oldest, or the one handed to this thread once idle
        (``None``: the pool stops)."""
        with self._lock:
            if self._stopping:
                return None
            if self._backlog:
                return self._backlog.popleft()
            self._idle.append(me)
        return me.inbox.get()

    def _serve(self, me: _Thread) -> None:
        job, me.first = me.first, None
        slot: Slot | None = None
        try:
            while job is not None or (job := self._next(me)) is not None:
                target, args, kwargs, callback, accept_callback = job
                job = None
                slot = Slot(self, callback)
                _current.slot = slot
                try:
                    apply_target(target, args, kwargs, slot.done, accept_callback)
                except BaseException:  # WorkerShutdown and the like: the job's, not the pool's
                    if not slot.let_go_of:
                        log.exception("io pool job raised")
                finally:
                    _current.slot = None
                if slot.let_go_of:
                    return  # its slot went to another thread
        except BaseException:
            # A late TaskCancelled meant for a run that was let go of may land anywhere in
            # here: this thread's slot went to another one already, so it just ends. Anything
            # else is a fault of the pool's own: the thread ends and gives its slot back.
            if slot is None or not slot.let_go_of:
                log.exception("io pool thread failed")
                with self._lock:
                    self._slots -= 1
            return
        finally:
            with self._lock:
                self._threads.discard(me)

    def on_apply(  # type: ignore[override]  # (the stubs say it returns None; Celery keeps it)
        self,
        target: Any,
        args: Any = None,
        kwargs: Any = None,
        callback: Callable[[Any], None] | None = None,
        accept_callback: Callable[..., None] | None = None,
        **_: Any,
    ) -> _Result:
        job = (target, args, kwargs, callback, accept_callback)
        # NOTE: the thread that went idle last takes the job (its stack and what it touched are
        # still in the CPU's caches); a new thread starts only while fewer than ``limit`` hold a
        # slot (threads start as the load needs them, as Celery's threads pool's do); past
        # that, the job waits, in order.
        with self._lock:
            idle = self._idle.pop() if self._idle else None
            spawn = idle is None and self._slots < self.limit
            if spawn:
                self._slots += 1
            elif idle is None:
                self._backlog.append(job)
        if idle is not None:
            idle.inbox.put(job)
        elif spawn:
            self._spawn(job)
        return _Result()

    def terminate_job(self, pid: Any, signal: Any = None) -> None:
        """Nothing to kill: see the module's docstring."""

    def _hand_back(self) -> None:
        if isinstance(self.app, HandsBackRuns):
            self.app.hand_back_runs()

    def on_stop(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            threads = list(self._threads)
            idle, self._idle = self._idle, []
        self._hand_back()
        for thread in idle:  # the busy ones see _stopping when their job returns
            thread.inbox.put(None)
        for thread in threads:
            thread.join(STOP_WAIT_S / max(len(threads), 1))

    def on_terminate(self) -> None:
        # A cold shutdown terminates the pool rather than stopping it: the same hand-back.
        self.on_stop()

    def _get_info(self) -> dict[str, Any]:
        return {
            "implementation": f"{type(self).__module__}:{type(self).__name__}",
            "max-concurrency": self.limit,
            "threads": self.threads,
        }
