"""Where the app's own code runs for a resource read, a prompt render and a completion: in the
web process, on threads of its own, bounded in time, number and size.

Why here, not on a worker: clients call these synchronously and expect one round trip, and the
suite's fixtures (and most real resources: a policy text, a row by id) are quick reads; a queue
hop would add a broker round trip and a worker's turn to every ``resources/read``. Why on
threads: the code is the user's, sync or ``async def``, and may block (a file, a database
driver): on the event loop it would stall every request of the process. So each call runs on a
pool of ``MCPQ_READ_THREADS`` threads (an ``async def`` function on an event loop of its call's
own), and the request waits at most ``MCPQ_READ_TIMEOUT_S`` (its turn included): past it, the
client gets ``-32603`` and the web goes on serving; the thread finishes or hangs on its own
(Python cannot stop a thread), holding one of the pool's threads, not the loop. What comes back
is bounded by ``MCPQ_MAX_RESULT_BYTES``. One principal holds at most half the threads (at least
one): a client that floods reads gets 429 while others' reads go on. An exception is a JSON-RPC
error whose text is the user's only when they raised :class:`~mcpq.shared.errors.ToolError`;
anything else is logged with its traceback under an error id, and the client gets the id.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import INTERNAL_ERROR, LIMIT_EXCEEDED, McpError, ToolError, new_error_id
from mcpq.shared.settings import Settings

log = logging.getLogger("mcpq.web")
T = TypeVar("T")


def _called(fn: Callable[[], Any]) -> Any:
    value = fn()
    if inspect.iscoroutine(value):
        return asyncio.run(value)  # an async def function: a loop of its own, on this thread
    return value


class UserCode:
    def __init__(self, settings: Settings) -> None:
        self._threads = settings.read_threads
        self._pool: ThreadPoolExecutor | None = None  # made at the first call (after a fork)
        self.timeout_s = settings.read_timeout_s
        self.max_bytes = settings.max_result_bytes
        self.per_owner = max(1, self._threads // 2)
        self._running: dict[str, int] = {}  # owner -> calls of theirs under way (this process)

    async def run(
        self, what: str, fn: Callable[[], Any], shape: Callable[[Any], T], owner: str = ""
    ) -> T:
        """``shape(fn())``, both on a pool thread; ``what`` names it in errors and logs (never
        its arguments: they are the client's); ``owner``: whose call it is (its share)."""
        if self._running.get(owner, 0) >= self.per_owner:
            raise McpError(
                LIMIT_EXCEEDED,
                "Too many reads at once: retry after 1000 ms",
                {"limit": "reads", "setting": "MCPQ_READ_THREADS", "retryAfterMs": 1000},
                headers={"Retry-After": "1"},
            )
        self._running[owner] = self._running.get(owner, 0) + 1
        try:
            return await self._run(what, fn, shape)
        finally:
            left = self._running[owner] - 1
            if left:
                self._running[owner] = left
            else:
                del self._running[owner]

    async def _run(self, what: str, fn: Callable[[], Any], shape: Callable[[Any], T]) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="mcpq-read")
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, lambda: shape(_called(fn)))
        try:
            value = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            log.warning("%s took longer than MCPQ_READ_TIMEOUT_S (%g s)", what, self.timeout_s)
            raise McpError(
                INTERNAL_ERROR,
                f"{what} took longer than {self.timeout_s:g} s (MCPQ_READ_TIMEOUT_S)",
            ) from None
        except McpError:
            raise
        except ToolError as exc:  # the app's own words for the client
            raise McpError(INTERNAL_ERROR, str(exc)) from None
        except Exception:
            error_id = new_error_id()
            log.exception("%s failed", what, extra={"error_id": error_id})
            raise McpError(INTERNAL_ERROR, f"{what} failed (error id {error_id})") from None
        try:
            check_bytes(what, value, self.max_bytes, "MCPQ_MAX_RESULT_BYTES")
        except LimitExceeded as exc:
            raise McpError(INTERNAL_ERROR, str(exc)) from None
        return value

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
