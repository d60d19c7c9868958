"""``/readyz`` is what the web needs to serve: Redis. Workers are reported, never required: with
every worker down, clients still create (tasks queue durably), poll, answer and cancel."""

from __future__ import annotations

import asyncio

from mcpq.frontend.health import ReadyResource
from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.settings import Settings


class Store:
    def __init__(self, workers: int | None) -> None:
        self.workers = workers

    async def live_workers(self, window_s: float) -> int:
        if self.workers is None:
            raise StoreUnavailable()
        return self.workers


def check(workers: int | None) -> dict[str, object]:
    return asyncio.run(ReadyResource(Store(workers), Settings()).check())  # type: ignore[arg-type]


def test_ready_with_redis_and_no_worker() -> None:
    assert check(0) == {"redis": True, "workers": 0, "ready": True}


def test_ready_with_workers() -> None:
    assert check(2) == {"redis": True, "workers": 2, "ready": True}


def test_not_ready_without_redis() -> None:
    assert check(None) == {"redis": False, "workers": 0, "ready": False}
