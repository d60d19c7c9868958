"""``mcpq status``: the deployment at a glance, read from Redis and Celery.

Queue depths per queue (from the store's Redis when it is the broker, else from the broker),
live workers (our heartbeat list and a Celery ping), task counts by state, parked tasks,
outstanding input requests, tasks failed because their runs kept losing their worker (by tool)
and the age of the oldest unfinished task. It prints no task ids: storage
refs and ids are never shown.

Its first line names the Redis it reads (:func:`locate_redis`, password redacted) and where that
came from: ``REDIS_URL``, else the `mcpq dev` this user runs (its state file), else the default,
said as such. ``mcpq tasks`` finds its Redis the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from celery import Celery

from mcpq.frontend.producer import broker_queue_depths
from mcpq.ops.dev.state import running_dev
from mcpq.shared.celery_config import broker_is_store, celery_config
from mcpq.shared.redis_urls import redact_url
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.shared.store import StatsSnapshot, TaskStatus, open_store


@dataclass
class Status:
    snapshot: StatsSnapshot
    pinged: list[str] = field(default_factory=list)
    #: Why the broker could not count its queues (RabbitMQ unreachable), else empty.
    broker_problem: str = ""

    @property
    def worker_ages(self) -> dict[str, float]:
        """Seconds since each worker node's last heartbeat."""
        now = self.snapshot.read_at_ms
        return {node: round((now - beat) / 1000, 1) for node, beat in self.snapshot.workers.items()}


@dataclass(frozen=True)
class RedisTarget:
    """The environment a command reads the store with (``REDIS_URL`` filled in when it came from
    a running `mcpq dev`), the line that says which Redis that is, and why it cannot be used."""

    environ: Mapping[str, str]
    line: str
    problem: str = ""


def locate_redis(environ: Mapping[str, str]) -> RedisTarget:
    """Which Redis an operator command reads: ``REDIS_URL``; unset, the Redis of the `mcpq dev`
    this user runs (``mcpq.ops.dev.state.running_dev``); else the default ``REDIS_URL``, said."""
    if url := environ.get("REDIS_URL"):
        return RedisTarget(environ, f"redis: {redact_url(url)} (REDIS_URL)")
    dev = running_dev(environ)
    if dev is None:
        default = Settings.from_env({}).redis_url
        why = "the default: REDIS_URL is unset and no mcpq dev is running"
        return RedisTarget(environ, f"redis: {default} ({why})")
    if dev.redis_url is None:
        problem = (
            f"the running mcpq dev (pid {dev.pid}) uses {dev.redis_shown}, whose password is "
            "not recorded; set REDIS_URL"
        )
        return RedisTarget(environ, f"redis: {dev.redis_shown}", problem)
    line = f"redis: {dev.redis_shown} (the running mcpq dev, pid {dev.pid}; REDIS_URL is unset)"
    return RedisTarget({**environ, "REDIS_URL": dev.redis_url}, line)


def queue_names(settings: Settings) -> list[str]:
    names = {settings.default_queue, *settings.worker_queues}
    names.update(Registry.from_modules(settings.tools).queues())
    return sorted(names)


def collect(settings: Settings, ping_timeout: float = 1.0) -> Status:
    names = queue_names(settings)
    if broker_is_store(settings):  # the queues are lists of the store's Redis: one round trip
        return Status(open_store(settings).stats(names), _ping(settings, ping_timeout))
    # Another broker (RabbitMQ) counts its queues itself.
    snapshot, problem = open_store(settings).stats([]), ""
    try:
        snapshot = dataclasses.replace(
            snapshot, queues=broker_queue_depths(celery_app(settings), names)
        )
    except Exception as exc:  # the store's numbers are still worth printing
        problem = f"the broker did not answer ({type(exc).__name__})"
    return Status(snapshot, _ping(settings, ping_timeout), problem)


def celery_app(settings: Settings) -> Celery:
    app = Celery("mcpq-status")
    app.conf.update(celery_config(settings))
    return app


def _ping(settings: Settings, timeout: float) -> list[str]:
    if timeout <= 0:
        return []
    replies: list[dict[str, Any]] = celery_app(settings).control.ping(timeout=timeout) or []
    return sorted(node for reply in replies for node in reply)


def render(status: Status) -> str:
    snap = status.snapshot
    lines = ["queues:"]
    if status.broker_problem:
        lines.append(f"  (unknown: {status.broker_problem})")
    lines += [f"  {name:<24} {depth:>8} waiting" for name, depth in snap.queues.items()]
    lines.append("workers (heartbeat age):")
    lines += [f"  {node:<40} {age:>6}s ago" for node, age in sorted(status.worker_ages.items())]
    if status.pinged:
        lines.append(f"workers answering a Celery ping: {len(status.pinged)}")
    lines.append("tasks:")
    for state in (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED):
        lines.append(f"  {state:<24} {snap.states.get(state, 0):>8}")
    lines.append(f"  {'parked (no worker slot)':<24} {snap.parked:>8}")
    lines.append(f"  {'input requests waiting':<24} {snap.inputs:>8}")
    for kind, by_tool in snap.totals.items():
        lines.append(f"  {kind + ' (total)':<24} {sum(by_tool.values()):>8}")
    # Which tools kill their workers (MCPQ_MAX_RUNS): the one count an operator acts on by tool.
    for tool, count in sorted(snap.totals.get("poisoned", {}).items()):
        lines.append(f"    {tool:<22} {count:>8}")
    age = "-" if snap.oldest_created_ms is None else f"{round(snap.oldest_unfinished_s, 1)}s"
    lines.append(f"oldest unfinished task: {age} ({snap.unfinished} unfinished)")
    return "\n".join(lines)
