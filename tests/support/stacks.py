"""The tests' layer over `ops.stack.Stack`: short knobs, a registry of live stacks, strict close.

Every test layer (e2e, faults, ops, conformance) builds its stacks as :class:`LiveStack`. While
one runs it is listed by :func:`live_stacks`, so the root ``conftest.py`` can attach the tails of
its process logs to a failing test's report; ``close()`` asserts that no process is left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import redis

from ops.stack import Stack
from shared.store import Keys

# Short knobs: tests must not wait on production-sized timers.
FAST_KNOBS = {
    "MCPQ_INPUT_HOLD_S": "3",  # a worker waits this long for answers, then parks the task
    "MCPQ_LEASE_S": "3",
    "MCPQ_CANCEL_GRACE_S": "1",
    "MCPQ_SYNC_TIMEOUT_S": "20",
    "MCPQ_SWEEP_INTERVAL_S": "1",
    "MCPQ_POLL_INTERVAL_MS": "200",
}

_LIVE: list[LiveStack] = []


def live_stacks() -> list[LiveStack]:
    """Stacks started and not yet closed."""
    return list(_LIVE)


class LiveStack(Stack):
    """A :class:`Stack` with :data:`FAST_KNOBS` unless told otherwise (``env``), listed as live
    until closed."""

    def __init__(
        self, name: str, workdir: Path, *, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(name, workdir, env=FAST_KNOBS if env is None else env, **kwargs)
        _LIVE.append(self)

    def close(self, *, check: bool = True) -> dict[str, list[int]]:
        """Stop everything; with ``check``, assert that nothing is left behind."""
        try:
            left = super().close()
        finally:
            if self in _LIVE:
                _LIVE.remove(self)
        assert not (check and left), f"processes left after teardown: {left}"
        return left

    # -- white-box reads (tests only: the product reads Redis through the store) ---------------
    @contextlib.contextmanager
    def redis_client(self) -> Iterator[redis.Redis]:
        """A plain client of the stack's Redis, for reads the store does not offer."""
        client = redis.Redis.from_url(self.redis_url, decode_responses=True, socket_timeout=5)
        try:
            yield client
        finally:
            client.close()

    def task_hash(self, ref: str) -> dict[str, str]:
        """The stored hash of task ``ref`` (``shared.store.task_ref(taskId)``)."""
        with self.redis_client() as client:
            return client.hgetall(Keys().task(ref))  # type: ignore[return-value]

    def abort(self) -> None:
        self.close(check=False)
