"""``GET /metrics`` of the web tier (Prometheus text format).

Two sources: per-process request metrics (multiprocess mode under gunicorn when
``PROMETHEUS_MULTIPROC_DIR`` is set, as ``mcpq web`` does), and deployment-wide task counters
that the Lua scripts keep in Redis (``{mcpq}:stats``), read in one round trip per scrape.
"""

from __future__ import annotations

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


class StatsCollector(Collector):
    """Task counters from the Redis stats hash (one snapshot per scrape)."""

    def __init__(self, stats: dict[str, str]) -> None:
        self.stats = stats

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
        for field, raw in self.stats.items():
            kind, _, label = field.partition(":")
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


def render(stats: dict[str, str], multiprocess_mode: bool) -> bytes:
    registry = CollectorRegistry()
    if multiprocess_mode:
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        for collector in (REQUESTS, LATENCY, STORE_ERRORS):
            registry.register(collector)
    registry.register(StatsCollector(stats))
    return generate_latest(registry)
