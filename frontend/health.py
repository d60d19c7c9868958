"""``/healthz`` (the process is alive) and ``/readyz`` (Redis answers within a bound; cached for
a second so probes stay cheap).

Readiness is what the web needs to serve, and that is Redis alone: with every worker down,
clients can still create tasks (they queue durably), poll, answer and cancel, so a load
balancer must keep routing to the web. ``workers`` (nodes that beat within
``MCPQ_READY_WORKER_WINDOW_S``) is reported alongside, for people; alerts on workers read
``mcpq_workers_alive`` in ``/metrics``."""

from __future__ import annotations

import asyncio
import time

import falcon
import falcon.asgi

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.settings import Settings
from mcpq.shared.store import DeploymentStats


class HealthResource:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.media = {"status": "ok"}


class ReadyResource:
    def __init__(self, stats: DeploymentStats, settings: Settings) -> None:
        self.stats, self.settings = stats, settings
        self._cached: tuple[float, dict[str, object]] | None = None

    async def check(self) -> dict[str, object]:
        if self._cached and time.monotonic() - self._cached[0] < 1.0:
            return self._cached[1]
        report: dict[str, object] = {"redis": False, "workers": 0}
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                report["workers"] = await self.stats.live_workers(
                    self.settings.ready_worker_window_s
                )
            report["redis"] = True
        except (StoreUnavailable, TimeoutError):
            pass
        report["ready"] = bool(report["redis"])
        self._cached = (time.monotonic(), report)
        return report

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        report = await self.check()
        resp.media = report
        resp.status = falcon.HTTP_200 if report["ready"] else falcon.HTTP_503
