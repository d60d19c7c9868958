"""``/healthz`` (the process is alive), ``/readyz`` (Redis answers within a bound and a worker
sent a heartbeat recently; cached for a second so probes stay cheap) and ``/metrics``."""

from __future__ import annotations

import asyncio
import time

import falcon
import falcon.asgi
import redis.exceptions as rexc

from frontend import metrics
from shared.async_store import AsyncTaskStore
from shared.settings import Settings

_DOWN = (rexc.RedisError, OSError, asyncio.TimeoutError)


class HealthResource:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.media = {"status": "ok"}


class ReadyResource:
    def __init__(self, store: AsyncTaskStore, settings: Settings) -> None:
        self.store, self.settings = store, settings
        self._cached: tuple[float, dict[str, object]] | None = None

    async def check(self) -> dict[str, object]:
        if self._cached and time.monotonic() - self._cached[0] < 1.0:
            return self._cached[1]
        report: dict[str, object] = {"redis": False, "workers": 0}
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                await self.store.redis.ping()
                report["redis"] = True
                since = int(time.time() * 1000 - self.settings.ready_worker_window_s * 1000)
                report["workers"] = await self.store.redis.zcount(
                    self.store.keys.workers, since, "+inf"
                )
        except _DOWN:
            pass
        report["ready"] = bool(report["redis"]) and bool(report["workers"])
        self._cached = (time.monotonic(), report)
        return report

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        report = await self.check()
        resp.media = report
        resp.status = falcon.HTTP_200 if report["ready"] else falcon.HTTP_503


class MetricsResource:
    def __init__(self, store: AsyncTaskStore, settings: Settings) -> None:
        self.store, self.settings = store, settings

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        stats: dict[str, str] = {}
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                raw = await self.store.redis.hgetall(self.store.keys.stats)
                stats = {str(k): str(v) for k, v in raw.items()}
        except _DOWN:
            metrics.STORE_ERRORS.inc()
        resp.data = metrics.render(stats, bool(self.settings.prometheus_multiproc_dir))
        resp.content_type = metrics.CONTENT_TYPE
