"""The io pool's event loop for ``async def`` tools (``MCPQ_ASYNC_RUNS``): a run whose tool
awaits holds no thread while it waits.

Without it, an ``async def`` tool's run holds its job's pool thread for its whole life, with an
event loop of its own on it (``mcpq.workers.execution``): a thousand waiting runs are a thousand
threads. With ``MCPQ_ASYNC_RUNS`` set, an io pool process has one more thread, running one event
loop, and a claimed run of an async tool is handed to it (``mcpq.workers.runner``): its job's
thread returns at once, and the run awaits on the loop, up to ``MCPQ_ASYNC_RUNS`` of them; one
more waits on its job's thread for a place (so the pool, and then Celery's prefetch, take no more
messages meanwhile).

Why the job may end before its run (Celery acks the message, Flower shows it succeeded): a
run's durability is the task store's, never the message's. The run holds its lease (the
process's lease keeper renews every held run in one round trip), a lost process's runs are
replayed by the sweeper once their leases lapse, and a stopping process hands them back
(``LeaseKeeper.hand_back_all``) before the loop's tasks are cancelled. Everything a run writes
is fenced by its generation, so a run cancelled late writes nothing.

A tool that blocks the loop (a ``time.sleep``, a blocking client) stalls every run on it; such
a call belongs on a thread (``asyncio.to_thread``), or the tool in a sync ``def``. (Not guarded
yet: this is why the loop is off unless ``MCPQ_ASYNC_RUNS`` is set.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("mcpq.worker")


class RunLoop:
    """One event loop on a thread of its own, where up to ``limit`` runs await at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._places = threading.BoundedSemaphore(limit)
        self._loop = asyncio.new_event_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name="mcpq-run-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @property
    def running(self) -> int:
        """Runs on the loop now."""
        with self._lock:
            return len(self._tasks)

    def start(self, run: Callable[[], Awaitable[None]]) -> None:
        """Run ``run()`` on the loop; waits (on the caller's thread) while the loop is full.

        NOTE: the place is taken before the run is scheduled and given back when it ends,
        whatever ends it (its own end, a cancel at stop): a full loop makes the io pool's
        threads wait here, and so Celery takes no more messages than the loop can hold."""
        self._places.acquire()
        try:
            asyncio.run_coroutine_threadsafe(self._held(run), self._loop)
        except BaseException:  # the loop is closed: nothing will give the place back
            self._places.release()
            raise

    async def _held(self, run: Callable[[], Awaitable[None]]) -> None:
        task = asyncio.current_task()
        assert task is not None
        with self._lock:
            self._tasks.add(task)
        try:
            await run()
        except asyncio.CancelledError:
            pass  # the loop stops: the run was handed back already
        except Exception:
            log.exception("a run on the run loop failed")
        finally:
            with self._lock:
                self._tasks.discard(task)
            self._places.release()

    def stop(self, wait_s: float = 5.0) -> None:
        """Cancel every run on the loop (their leases were handed back first) and stop it."""
        if self._stopped:
            return
        self._stopped = True

        def cancel_all() -> None:
            for task in list(self._tasks):
                task.cancel()

        with contextlib.suppress(RuntimeError):  # the loop is gone already
            self._loop.call_soon_threadsafe(cancel_all)
        deadline = time.monotonic() + wait_s
        while self.running and time.monotonic() < deadline:
            time.sleep(0.01)
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(wait_s)


_loop: tuple[int, RunLoop] | None = None
_made = threading.Lock()


def run_loop(limit: int) -> RunLoop:
    """This process's run loop, made at its first use (a forked process makes its own)."""
    global _loop
    with _made:
        if _loop is None or _loop[0] != os.getpid():
            _loop = (os.getpid(), RunLoop(limit))
        return _loop[1]


def current() -> RunLoop | None:
    """This process's run loop, if it made one."""
    held = _loop
    return held[1] if held is not None and held[0] == os.getpid() else None
