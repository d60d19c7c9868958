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
    def __init__(self, store: AsyncTaskStore, settings: Settings, queues: list[str]) -> None:
        self.store, self.settings, self.queues = store, settings, queues

    async def snapshot(self) -> metrics.Snapshot:
        """Counters, queue depths, live workers and the oldest unfinished task: one round trip."""
        keys, now_ms = self.store.keys, time.time() * 1000
        since = now_ms - self.settings.ready_worker_window_s * 1000
        async with self.store.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.stats)
            pipe.zcount(keys.workers, since, "+inf")
            pipe.zrange(keys.active, 0, 0, withscores=True)
            for queue in self.queues:
                pipe.llen(queue)
            stats, workers, oldest, *depths = await pipe.execute()
        return metrics.Snapshot(
            stats={str(k): str(v) for k, v in stats.items()},
            queues=dict(zip(self.queues, map(int, depths), strict=True)),
            workers_alive=int(workers),
            oldest_unfinished_s=max(0.0, (now_ms - oldest[0][1]) / 1000) if oldest else 0.0,
        )

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        snapshot = metrics.Snapshot()
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                snapshot = await self.snapshot()
        except _DOWN:
            metrics.STORE_ERRORS.inc()
        resp.data = metrics.render(snapshot, bool(self.settings.prometheus_multiproc_dir))
        resp.content_type = metrics.CONTENT_TYPE
