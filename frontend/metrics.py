"""``GET /metrics`` of the web tier (Prometheus text format).

Two sources: per-process request metrics (multiprocess mode under gunicorn when
``PROMETHEUS_MULTIPROC_DIR`` is set, as ``mcpq web`` does), and deployment-wide task counters
that the Lua scripts keep in Redis (``{mcpq}:stats``), read in one round trip per scrape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

CONTENT_TYPE = CONTENT_TYPE_LATEST

REQUESTS = Counter("mcpq_requests", "MCP requests served", ["method", "http_status"])
LATENCY = Histogram(
    "mcpq_request_duration_seconds",
    "MCP request latency by method",
    ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
STORE_ERRORS = Counter("mcpq_store_errors", "Requests that found the task store unavailable")


@dataclass
class Snapshot:
    """What one scrape read from Redis, in one round trip."""

    stats: dict[str, str] = field(default_factory=dict)
    queues: dict[str, int] = field(default_factory=dict)
    workers_alive: int = 0
    oldest_unfinished_s: float = 0.0


class StatsCollector(Collector):
    """Deployment-wide gauges and counters from Redis (the same on every web replica)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.stats = snapshot.stats  # the Redis stats hash: counters and gauges by field name

    def collect(self):  # type: ignore[no-untyped-def]
        outcomes = {
            kind: CounterMetricFamily(
                f"mcpq_tasks_{kind}", f"Tasks {kind}, by tool", labels=["tool"]
            )
            for kind in ("created", "completed", "failed", "cancelled")
        }
        states = GaugeMetricFamily(
            "mcpq_tasks_in_state", "Tasks now in each state", labels=["state"]
        )
        inputs = 0
        for name, raw in self.stats.items():
            kind, _, label = name.partition(":")
            value = int(raw)
            if kind in outcomes:
                outcomes[kind].add_metric([label], value)
            elif kind == "state":
                states.add_metric([label], max(value, 0))
            elif kind == "inputs":
                inputs = max(value, 0)
        yield from outcomes.values()
        yield states
        yield GaugeMetricFamily(
            "mcpq_input_requests_outstanding", "Input requests awaiting answers", value=inputs
        )
        parked = max(int(self.stats.get("parked", 0)), 0)
        yield GaugeMetricFamily(
            "mcpq_tasks_parked", "Tasks waiting for input with no worker slot", value=parked
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
            value=self.snapshot.workers_alive,
        )
        yield GaugeMetricFamily(
            "mcpq_oldest_unfinished_task_seconds",
            "Age of the oldest task not yet completed, failed or cancelled",
            value=self.snapshot.oldest_unfinished_s,
        )


def render(snapshot: Snapshot, multiprocess_mode: bool) -> bytes:
    registry = CollectorRegistry()
    if multiprocess_mode:
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        for collector in (REQUESTS, LATENCY, STORE_ERRORS):
            registry.register(collector)
    registry.register(StatsCollector(snapshot))
    return generate_latest(registry)
