"""The tests' layer over `ops.harness.stack.Stack`: short knobs, a registry of live stacks, strict
close.

Every test layer (e2e, faults, ops, conformance) builds its stacks as :class:`LiveStack`. While
one runs it is listed by :func:`live_stacks`, so the root ``conftest.py`` can attach the tails of
its process logs to a failing test's report; ``close()`` asserts that no process is left.

``broker``: ``redis`` (the private Redis is the task store and Celery's broker) or ``rabbitmq``
(Celery's broker is a vhost of the shared RabbitMQ made for this stack, ``tests.support.rabbitmq``,
deleted when it closes; the private Redis stays the task store).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import redis

from mcpq.ops.harness.stack import Stack
from mcpq.shared.store import Keys
from tests.support import rabbitmq

#: The brokers the lifecycle and fault suites run on.
BROKERS = ("redis", "rabbitmq")
#: The worker pool kinds (``mcpq worker --pool``) the tests of the worker's side run on.
POOLS = ("io", "cpu")

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
        self,
        name: str,
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
        broker: str = "redis",
        **kwargs: Any,
    ) -> None:
        assert broker in BROKERS, broker
        #: The stack's own RabbitMQ vhost (``broker="rabbitmq"``), deleted by ``close``.
        self.vhost = rabbitmq.create_vhost() if broker == "rabbitmq" else None
        broker_url = self.vhost.url if self.vhost is not None else ""
        env = FAST_KNOBS if env is None else env
        super().__init__(name, workdir, env=env, broker_url=broker_url, **kwargs)
        _LIVE.append(self)

    def close(self, *, check: bool = True) -> dict[str, list[int]]:
        """Stop everything (then delete the stack's vhost); with ``check``, assert that nothing
        is left behind."""
        try:
            left = super().close()
        finally:
            if self in _LIVE:
                _LIVE.remove(self)
            if self.vhost is not None:
                vhost, self.vhost = self.vhost, None
                rabbitmq.delete_vhost(vhost)
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
        """The stored hash of task ``ref`` (``mcpq.shared.store.task_ref(taskId)``)."""
        with self.redis_client() as client:
            return client.hgetall(Keys().task(ref))  # type: ignore[return-value]

    def abort(self) -> None:
        self.close(check=False)
