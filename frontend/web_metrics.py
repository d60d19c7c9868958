"""``GET /metrics`` of the web tier (Prometheus text format).

Two sources: per-process request metrics (multiprocess mode under gunicorn when
``PROMETHEUS_MULTIPROC_DIR`` is set, as ``mcpq web`` does), and deployment-wide task counters
that the Lua scripts keep in Redis (``{mcpq}:stats``), read in one round trip per scrape. Queue
depths come with that read on a Redis broker, from the broker itself on RabbitMQ.

Not public: the route exists only when ``MCPQ_METRICS_TOKEN`` is set (else 404, as for any unknown
path), and a scrape must carry it as a bearer token (else 401, before Redis is read). A token,
not "loopback clients only": behind a reverse proxy on the same host every client is loopback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
from collections.abc import Awaitable, Callable

import falcon
import falcon.asgi
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.settings import Settings
from mcpq.shared.store import OUTCOMES, DeploymentStats, StatsSnapshot

CONTENT_TYPE = CONTENT_TYPE_LATEST
log = logging.getLogger("mcpq.web")

REQUESTS = Counter("mcpq_requests", "MCP requests served", ["method", "http_status"])
LATENCY = Histogram(
    "mcpq_request_duration_seconds",
    "MCP request latency by method",
    ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
STORE_ERRORS = Counter("mcpq_store_errors", "Requests that found the task store unavailable")
#: The metric children of each (method, status): ``labels()`` validates and locks per call,
#: and every request records one. Bounded: methods are the known ones, statuses a handful.
_REQUEST_CHILDREN: dict[tuple[str, int], tuple[Counter, Histogram]] = {}


def observe_request(method: str, status: int, latency_s: float) -> None:
    """Count one MCP request and its latency (``method``: a known method, or ``other``)."""
    children = _REQUEST_CHILDREN.get((method, status))
    if children is None:
        children = (REQUESTS.labels(method, str(status)), LATENCY.labels(method))
        _REQUEST_CHILDREN[(method, status)] = children
    children[0].inc()
    children[1].observe(latency_s)
    if status == 503:
        STORE_ERRORS.inc()


LIMIT_REJECTIONS = Counter(
    "mcpq_limit_rejections", "Creates refused by a per-principal limit (429)", ["limit"]
)


_OUTCOME_HELP = {
    "poisoned": "Tasks failed because their runs kept losing their worker (MCPQ_MAX_RUNS), by tool",
}


class StatsCollector(Collector):
    """Deployment-wide gauges and counters from Redis (the same on every web replica)."""

    def __init__(self, snapshot: StatsSnapshot, window_s: float) -> None:
        self.snapshot = snapshot
        self.window_s = window_s  # a worker is alive if it beat within this window

    def collect(self):  # type: ignore[no-untyped-def]
        outcomes = {
            kind: CounterMetricFamily(
                f"mcpq_tasks_{kind}",
                _OUTCOME_HELP.get(kind, f"Tasks {kind}, by tool"),
                labels=["tool"],
            )
            for kind in OUTCOMES
        }
        states = GaugeMetricFamily(
            "mcpq_tasks_in_state", "Tasks now in each state", labels=["state"]
        )
        snap = self.snapshot
        for kind, by_tool in snap.totals.items():
            for tool, count in by_tool.items():
                outcomes[kind].add_metric([tool], count)
        for state, count in snap.states.items():
            states.add_metric([state], count)
        yield from outcomes.values()
        yield states
        yield GaugeMetricFamily(
            "mcpq_input_requests_outstanding", "Input requests awaiting answers", value=snap.inputs
        )
        yield GaugeMetricFamily(
            "mcpq_tasks_parked", "Tasks waiting for input with no worker slot", value=snap.parked
        )
        depth = GaugeMetricFamily(
            "mcpq_queue_depth", "Runs waiting in each Celery queue", labels=["queue"]
        )
        for queue, waiting in self.snapshot.queues.items():
            depth.add_metric([queue], waiting)
        yield depth
        yield GaugeMetricFamily(
            "mcpq_workers_alive",
            "Worker nodes with a recent heartbeat",
            value=self.snapshot.workers_alive(self.window_s),
        )
        yield GaugeMetricFamily(
            "mcpq_oldest_unfinished_task_seconds",
            "Age of the oldest task not yet completed, failed or cancelled",
            value=self.snapshot.oldest_unfinished_s,
        )


def render(snapshot: StatsSnapshot, multiprocess_mode: bool, window_s: float = 15.0) -> bytes:
    registry = CollectorRegistry()
    if multiprocess_mode:
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        for collector in (REQUESTS, LATENCY, STORE_ERRORS):
            registry.register(collector)
    registry.register(StatsCollector(snapshot, window_s))
    return generate_latest(registry)


def bearer_matches(header: str | None, token: str) -> bool:
    """Does ``Authorization: Bearer <token>`` carry ``token``? Compared in constant time (as
    bytes: ``compare_digest`` refuses non-ASCII text); an empty ``token`` matches nothing."""
    scheme, _, given = (header or "").strip().partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


class MetricsResource:
    """``GET /metrics``: this process's request series and the deployment's task series."""

    def __init__(
        self,
        stats: DeploymentStats,
        settings: Settings,
        queues: list[str],
        depths: Callable[[list[str]], Awaitable[dict[str, int]]] | None = None,
    ) -> None:
        """``depths``: how the broker counts each queue's waiting runs, when the broker is not
        the store's Redis (RabbitMQ); ``None``: the store reads them with its snapshot."""
        self.stats, self.settings, self.queues, self.depths = stats, settings, queues, depths

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if not bearer_matches(req.get_header("Authorization"), self.settings.metrics_token):
            # No detail: a missing token and a wrong one read the same.
            resp.status = falcon.HTTP_401
            resp.set_header("WWW-Authenticate", 'Bearer realm="metrics"')
            resp.content_type = falcon.MEDIA_TEXT
            resp.text = "401 Unauthorized\n"
            return
        snapshot = StatsSnapshot()
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                snapshot = await self.stats.snapshot(self.queues if self.depths is None else [])
        except (StoreUnavailable, TimeoutError):
            STORE_ERRORS.inc()  # the scrape still answers: this process's own series
        if self.depths is not None:
            try:
                async with asyncio.timeout(self.settings.redis_timeout_s):
                    queues = await self.depths(self.queues)
                snapshot = dataclasses.replace(snapshot, queues=queues)
            except Exception as exc:  # the broker is down: no depths rather than wrong ones
                log.warning("reading queue depths from the broker failed (%s)", type(exc).__name__)
        multiprocess_mode = bool(self.settings.prometheus_multiproc_dir)
        window_s = self.settings.ready_worker_window_s
        resp.data = render(snapshot, multiprocess_mode, window_s)
        resp.content_type = CONTENT_TYPE
