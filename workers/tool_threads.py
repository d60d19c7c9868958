"""The threads io-pool tools run on, reused from one run to the next.

Starting a thread and joining it cost about 0.7 ms on the machines we measure on (more than a
no-op run's whole work), so a thread that finished a call waits for the next one instead. A
thread whose call was abandoned (``workers.execution``: its tool ignored its cancel) never
takes another: an asynchronous exception may still be on its way to it. Idle threads leave
after a minute.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable

IDLE_S = 60.0

#: A call: returns True when its thread must not be reused (the call was abandoned).
Body = Callable[[], bool]


class ToolThreads:
    def __init__(self, idle_s: float = IDLE_S) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._idle_s = idle_s

    def run(self, body: Body) -> None:
        """Start ``body`` on an idle thread, or on a new one."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self)
            worker.thread.start()
        worker.calls.put(body)

    @property
    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def _rest(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def _retire(self, worker: _Worker) -> bool:
        """An idle thread's wait ran out: it leaves, unless a call was just handed to it."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False


class _Worker:
    def __init__(self, pool: ToolThreads) -> None:
        self.pool = pool
        self.calls: queue.SimpleQueue[Body] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="tool", daemon=True)

    def _loop(self) -> None:
        # A late TaskCancelled meant for an abandoned call may land anywhere in here: the
        # thread then just ends (it was never going to be reused).
        with contextlib.suppress(BaseException):
            while True:
                try:
                    body = self.calls.get(timeout=self.pool._idle_s)
                except queue.Empty:
                    if self.pool._retire(self):
                        return
                    continue  # handed a call as it timed out: take it
                if body():
                    return
                self.pool._rest(self)


#: The process's tool threads (an io pool's runs share them).
TOOL_THREADS = ToolThreads()
