"""How a tool's code runs inside a job: sync or ``async def``; in the job's own thread (a
prefork pool process runs one job) or in a thread of its own (a thread pool runs many jobs in
one process); and how a run that ignores its cancel is stopped.

- **async tools** get an event loop of their own, on the thread that runs them: ``await`` an
  HTTP call, a database, a subprocess. A cancel cancels the asyncio task at once, wherever it
  awaits (``CancelledError`` inside the tool, ``TaskCancelled`` for the run). The context's
  methods may be called from the coroutine; they block only this run's own loop.
- **prefork (cpu pools)**: the tool runs in the job's thread. A tool that ignores its cancel for
  the grace period gets its pool process killed (Celery starts another): nothing else runs
  there.
- **threads (io pools)**: the tool runs in a thread of its own (reused from run to run:
  ``workers.tool_threads``) and the job waits for it. A tool
  that ignores its cancel gets ``TaskCancelled`` raised inside its thread (it ends at the next
  Python instruction it runs), and the job stops waiting at once: the pool slot is free for the
  next job, whatever the tool's thread still does (blocked in C code, it leaves when that call
  returns; whatever it then writes is fenced by the run's generation). The process, and every
  other run in it, goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from shared.errors import TaskCancelled
from workers.tool_threads import TOOL_THREADS

log = logging.getLogger("mcpq.worker")


class RunAbandoned(BaseException):
    """The job stopped waiting for a tool thread that ignored its cancel (or its run limit)."""


class ToolCall:
    """One call of a tool's function with its context and arguments."""

    def __init__(self, call: Callable[[], Any], name: str) -> None:
        self._call = call
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Future[Any] | None = None
        self._interrupted = False
        self._ident: int | None = None  # the thread running the tool (threads)
        self._finished = threading.Event()
        self._done = False
        self._abandoned = False
        self._outcome: tuple[bool, Any] = (False, None)

    # -- running ---------------------------------------------------------------------------------
    def here(self) -> Any:
        """Run on the calling thread (prefork: the job's own)."""
        value = self._call()
        if inspect.iscoroutine(value):
            return self._run_async(value)
        return value

    def in_thread(self) -> Any:
        """Run on a thread of its own and wait for it, or for :meth:`abandon`."""
        TOOL_THREADS.run(self._body)
        self._finished.wait()
        if self._abandoned:
            raise RunAbandoned()
        ok, value = self._outcome
        if not ok:
            raise value
        return value

    def _body(self) -> bool:
        """The tool's thread; True when the thread must not be reused (abandoned)."""
        with self._lock:
            if self._abandoned:  # abandoned before it started: nothing to run
                return True
            self._ident = threading.get_ident()
        threading.current_thread().name = f"tool-{self._name}"
        try:
            outcome: tuple[bool, Any] = (True, self.here())
        except BaseException as exc:  # handed to the job's thread, re-raised there
            outcome = (False, exc)
        # Under the lock that abandon() takes: either the call is done first, and no
        # exception is ever raised into this thread again (it may take the next call), or
        # it was abandoned first, and this thread ends (the exception may still be on its way).
        with self._lock:
            self._done = True
            self._outcome = outcome
            abandoned = self._abandoned
        self._finished.set()
        return abandoned

    def _run_async(self, coroutine: Any) -> Any:
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(coroutine)
            with self._lock:
                self._loop, self._task = loop, task
                if self._interrupted:  # the cancel came before the loop existed
                    task.cancel()
            try:
                return loop.run_until_complete(task)
            except asyncio.CancelledError:
                raise TaskCancelled() from None
        finally:
            with self._lock:
                self._loop = self._task = None
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    # -- stopping (called from the lease keeper's thread) -----------------------------------------
    def interrupt(self) -> None:
        """The task was cancelled: cancel an async tool's task where it awaits. (A sync tool
        sees it at its next context call; the context wakes it if it waits.)"""
        with self._lock:
            self._interrupted = True
            loop, task = self._loop, self._task
            if loop is not None and task is not None:
                # The loop may have closed meanwhile: the run is ending anyway.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(task.cancel)

    def abandon(self) -> None:
        """The grace is over (threads): raise ``TaskCancelled`` in the tool's thread and free
        the job at once."""
        if self._finished.is_set():
            return
        self.interrupt()
        with self._lock:
            if self._done or self._abandoned:
                return
            self._abandoned = True
            if self._ident is not None:
                # The only way to stop a Python thread from outside; it takes effect at the
                # thread's next bytecode (not inside a blocking C call, hence the job does not
                # wait for it). Under the lock: the thread cannot have moved on to another call.
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._ident), ctypes.py_object(TaskCancelled)
                )
        self._finished.set()
