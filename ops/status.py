"""``mcpq status``: the deployment at a glance, read from Redis and Celery.

Queue depths per queue, live workers (our heartbeat list and a Celery ping), task counts by
state, parked tasks, outstanding input requests and the age of the oldest unfinished task. It
prints no task ids: storage refs and ids are never shown.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from celery import Celery

from shared.celery_config import celery_config
from shared.keys import Keys
from shared.redis_clients import sync_client
from shared.settings import Settings
from shared.tools import registry


@dataclass
class Status:
    queues: dict[str, int] = field(default_factory=dict)
    workers: dict[str, float] = field(default_factory=dict)  # node -> seconds since heartbeat
    pinged: list[str] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    parked: int = 0
    inputs: int = 0
    active: int = 0
    oldest_active_s: float | None = None


def queue_names(settings: Settings) -> list[str]:
    registry.load(settings.tools)
    names = {settings.default_queue, *settings.worker_queues}
    names.update(t.queue for t in registry.tools.values() if t.queue)
    return sorted(names)


def collect(settings: Settings, ping_timeout: float = 1.0) -> Status:
    r, keys = sync_client(settings), Keys(settings.key_prefix)
    names = queue_names(settings)
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.llen(name)
    pipe.zrange(keys.workers, 0, -1, withscores=True)
    pipe.hgetall(keys.stats)
    pipe.zcard(keys.active)
    pipe.zrange(keys.active, 0, 0, withscores=True)
    *depths, workers, stats, active, oldest = pipe.execute()
    now_ms = time.time() * 1000
    status = Status(queues=dict(zip(names, depths, strict=True)), active=active)
    status.workers = {str(node): round((now_ms - score) / 1000, 1) for node, score in workers}
    for name, raw in stats.items():
        kind, _, label = str(name).partition(":")
        if kind == "state":
            status.states[label] = max(int(raw), 0)
        elif kind in {"created", "completed", "failed", "cancelled"}:
            status.totals[kind] = status.totals.get(kind, 0) + int(raw)
    status.parked = max(int(stats.get("parked", 0)), 0)
    status.inputs = max(int(stats.get("inputs", 0)), 0)
    if oldest:
        status.oldest_active_s = round((now_ms - oldest[0][1]) / 1000, 1)
    status.pinged = _ping(settings, ping_timeout)
    return status


def _ping(settings: Settings, timeout: float) -> list[str]:
    if timeout <= 0:
        return []
    app = Celery("mcpq-status")
    app.conf.update(celery_config(settings))
    replies: list[dict[str, Any]] = app.control.ping(timeout=timeout) or []
    return sorted(node for reply in replies for node in reply)


def render(status: Status) -> str:
    lines = ["queues:"]
    lines += [f"  {name:<24} {depth:>8} waiting" for name, depth in status.queues.items()]
    lines.append("workers (heartbeat age):")
    lines += [f"  {node:<40} {age:>6}s ago" for node, age in sorted(status.workers.items())]
    if status.pinged:
        lines.append(f"workers answering a Celery ping: {len(status.pinged)}")
    lines.append("tasks:")
    for state in ("working", "input_required"):
        lines.append(f"  {state:<24} {status.states.get(state, 0):>8}")
    lines.append(f"  {'parked (no worker slot)':<24} {status.parked:>8}")
    lines.append(f"  {'input requests waiting':<24} {status.inputs:>8}")
    for kind in ("created", "completed", "failed", "cancelled"):
        lines.append(f"  {kind + ' (total)':<24} {status.totals.get(kind, 0):>8}")
    age = "-" if status.oldest_active_s is None else f"{status.oldest_active_s}s"
    lines.append(f"oldest unfinished task: {age} ({status.active} unfinished)")
    return "\n".join(lines)
