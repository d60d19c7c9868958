"""Worker metrics: tool runs by tool and outcome, and their durations.

Pool processes record into prometheus-client's multiprocess directory (``mcpq worker`` sets
``PROMETHEUS_MULTIPROC_DIR``); the worker's main process serves them on
``MCPQ_WORKER_METRICS_PORT`` when it is set, bound to ``MCPQ_WORKER_METRICS_ADDRESS`` (loopback
unless told otherwise: the endpoint has no login).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    multiprocess,
    start_http_server,
)

from mcpq.shared.settings import Settings
from mcpq.workers.outcomes import RunOutcome

RUNS = Counter("mcpq_tool_runs", "Tool runs by tool and outcome", ["tool", "outcome"])
DURATION = Histogram(
    "mcpq_tool_run_duration_seconds",
    "Tool run durations by tool and outcome",
    ["tool", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)


#: Each (tool, outcome)'s two series, found once: ``labels()`` checks, locks and looks up on
#: every call, a cost each run paid twice. The set is bounded (served tools by outcomes).
_SERIES: dict[tuple[str, str], tuple[Any, Any]] = {}


def record(tool: str, outcome: RunOutcome, seconds: float) -> None:
    """One run of ``tool``: its ``outcome`` is a label, from a closed set (``RunOutcome``)."""
    key = (tool, outcome.value)
    series = _SERIES.get(key)
    if series is None:
        series = _SERIES.setdefault(key, (RUNS.labels(*key), DURATION.labels(*key)))
    series[0].inc()
    series[1].observe(seconds)


def serve(settings: Settings) -> None:
    """Expose the metrics of every pool process on the configured port (main process only)."""
    if settings.worker_metrics_port <= 0:
        return
    registry = REGISTRY
    if settings.prometheus_multiproc_dir:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    start_http_server(
        settings.worker_metrics_port, addr=settings.worker_metrics_address, registry=registry
    )
