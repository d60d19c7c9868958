"""Deployment-wide numbers, read in one round trip: what ``/metrics`` and ``mcpq status`` show.

The counters and gauges are kept by the Lua scripts themselves in the ``stats`` hash (see
``keyspace``), so they are the same whichever web replica is scraped. A sharded store has one such
hash (and one ``active`` index) per shard: a snapshot reads them all in its one pipeline (a
cluster client splits it by node) and adds them up. Reads that are not scripts
are :class:`~shared.store.call_types.PipelineCall` values, executed by both stores (one pipeline,
no transaction). :class:`DeploymentStats` is the web tier's face on them (``/readyz``,
``/metrics``); the synchronous store reads them for ``mcpq status``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcpq.shared.store.call_types import PipelineCall, Queue
from mcpq.shared.store.keyspace import Keys, Shard

if TYPE_CHECKING:
    from mcpq.shared.store.async_driver import AsyncDriver

#: Counters by tool in the stats hash (``<kind>:<tool>``). ``poisoned``: failed because its runs
#: kept losing their worker (``MCPQ_MAX_RUNS``), counted under ``failed`` too.
OUTCOMES = ("created", "completed", "failed", "cancelled", "poisoned")
_WORKER_MEMORY_MS = 24 * 3600 * 1000  # a node silent for a day leaves the worker list


@dataclass(frozen=True)
class StatsSnapshot:
    """Counters by outcome and tool, gauges by state, queue depths, worker heartbeats and the
    oldest unfinished task, as read at ``read_at_ms`` (this host's clock)."""

    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    states: dict[str, int] = field(default_factory=dict)
    parked: int = 0
    inputs: int = 0
    queues: dict[str, int] = field(default_factory=dict)
    workers: dict[str, float] = field(default_factory=dict)  # node -> last heartbeat (ms)
    unfinished: int = 0
    oldest_created_ms: float | None = None
    read_at_ms: float = 0.0

    def workers_alive(self, window_s: float) -> int:
        since = self.read_at_ms - window_s * 1000
        return sum(1 for beat in self.workers.values() if beat >= since)

    @property
    def oldest_unfinished_s(self) -> float:
        if self.oldest_created_ms is None:
            return 0.0
        return max(0.0, (self.read_at_ms - self.oldest_created_ms) / 1000)


def _merge(per_shard: list[tuple[Any, Any, Any]]) -> tuple[dict[str, int], int, list[Any]]:
    """The shards' stats hashes added up, their unfinished counts too, and the oldest of their
    oldest unfinished tasks (``[(ref, createdAt)]``, or ``[]``)."""
    merged: dict[str, int] = {}
    unfinished, oldest = 0, list[Any]()
    for stats, count, first in per_shard:
        for name, raw in stats.items():
            merged[str(name)] = merged.get(str(name), 0) + int(raw)
        unfinished += int(count)
        if first and (not oldest or float(first[0][1]) < float(oldest[0][1])):
            oldest = first
    return merged, unfinished, oldest


def _parse_stats(queues: Sequence[str], shards: int, replies: list[Any]) -> StatsSnapshot:
    # The first shard's reads around the worker list (the order of a store of one shard), then
    # the other shards' three reads each, then the queue depths.
    first, workers, count, oldest_first = replies[:4]
    rest = replies[4 : 4 + 3 * (shards - 1)]
    depths = replies[4 + 3 * (shards - 1) :]
    per_shard = [(first, count, oldest_first)]
    per_shard += [(rest[i], rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
    stats, unfinished, oldest = _merge(per_shard)
    totals: dict[str, dict[str, int]] = {kind: {} for kind in OUTCOMES}
    states: dict[str, int] = {}
    for name, raw in stats.items():
        kind, _, label = str(name).partition(":")
        if kind in totals:
            totals[kind][label] = int(raw)
        elif kind == "state" and label != "working":  # (a gauge older versions kept)
            # NOTE: gauges drift below zero when a task reaches its TTL unfinished (its key
            # vanishes without a transition); a negative count is never shown.
            states[label] = max(int(raw), 0)
    # Not a gauge of its own (one command less on every create and finish): every unfinished
    # task is working unless it is input_required.
    states["working"] = max(int(unfinished) - states.get("input_required", 0), 0)
    return StatsSnapshot(
        totals=totals,
        states=states,
        parked=max(int(stats.get("parked", 0)), 0),
        inputs=max(int(stats.get("inputs", 0)), 0),
        queues=dict(zip(queues, map(int, depths), strict=True)),
        workers={str(node): float(score) for node, score in workers},
        unfinished=int(unfinished),
        oldest_created_ms=float(oldest[0][1]) if oldest else None,
        read_at_ms=time.time() * 1000,
    )


def _shard_reads(shard: Shard) -> list[Queue]:
    return [
        lambda p: p.hgetall(shard.stats),
        lambda p: p.zcard(shard.active),
        lambda p: p.zrange(shard.active, 0, 0, withscores=True),
    ]


def _llen(key: str) -> Queue:
    return lambda p: p.llen(key)


def snapshot(k: Keys, queues: Sequence[str]) -> PipelineCall[StatsSnapshot]:
    """The snapshot; ``queues`` are Celery queue names, whose depth is the broker's list."""
    names = list(queues)
    first, *others = k.all_shards
    stats, count, oldest = _shard_reads(first)
    commands: list[Queue] = [stats, lambda p: p.zrange(k.workers, 0, -1, withscores=True)]
    commands += [count, oldest]
    commands += [read for shard in others for read in _shard_reads(shard)]
    commands += [_llen(queue) for queue in names]
    shards = len(k.all_shards)
    return PipelineCall(commands, lambda replies: _parse_stats(names, shards, replies))


def live_workers(k: Keys, window_s: float) -> PipelineCall[int]:
    """How many worker nodes sent a heartbeat within the window (``/readyz``)."""
    since = time.time() * 1000 - window_s * 1000
    return PipelineCall([lambda p: p.zcount(k.workers, since, "+inf")], lambda r: int(r[0]))


def beat_worker(k: Keys, node: str) -> PipelineCall[None]:
    """Record that ``node`` is alive (and forget nodes silent for a day)."""
    now_ms = int(time.time() * 1000)
    commands: list[Queue] = [
        lambda p: p.zadd(k.workers, {node: now_ms}),
        lambda p: p.zremrangebyscore(k.workers, "-inf", now_ms - _WORKER_MEMORY_MS),
    ]
    return PipelineCall(commands, lambda replies: None)


class DeploymentStats:
    """The deployment's numbers as the web tier reads them, each in one round trip."""

    def __init__(self, io: AsyncDriver, keys: Keys) -> None:
        self._io, self._keys = io, keys

    async def live_workers(self, window_s: float) -> int:
        """Worker nodes with a heartbeat within the window; raises ``StoreUnavailable`` when
        Redis does not answer (``/readyz``)."""
        return await self._io.pipeline(live_workers(self._keys, window_s))

    async def snapshot(self, queues: list[str]) -> StatsSnapshot:
        """The counters, gauges, heartbeats and ``queues``' depths (``/metrics``)."""
        return await self._io.pipeline(snapshot(self._keys, queues))
