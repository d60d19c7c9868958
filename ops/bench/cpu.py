"""CPU time of what a benchmark measures: process trees (``/proc``) and Redis servers (``INFO``).

Rates measured on a shared machine depend on what else runs; the CPU time a process spends per
task does much less, so the capacity benchmark reports both. Deltas only: every reader here
returns a running total, and the caller subtracts two readings (and an idle baseline).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import redis

from mcpq.ops.bench.memory import process_tree

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time so far of the live processes ``pids`` (each with all its
    threads); processes gone meanwhile count nothing."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                raw = handle.read()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()  # the command name may contain spaces
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total * _TICK_S


def tree_cpu_seconds(pid: int) -> float:
    """`cpu_seconds` of ``pid`` and all its descendants (a gunicorn master and its worker, a
    Celery worker and its prefork children)."""
    return cpu_seconds(process_tree(pid))


@dataclass(frozen=True)
class RedisReading:
    """One reading of a Redis server's running totals."""

    at: float  #: ``time.monotonic()`` of the reading
    cpu_s: float  #: ``INFO cpu``: used_cpu_sys + used_cpu_user (the whole process)
    usec: dict[str, int] = field(default_factory=dict)  #: ``INFO commandstats`` usec by command
    calls: dict[str, int] = field(default_factory=dict)  #: and calls by command


def read_redis(client: redis.Redis) -> RedisReading:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    usec, calls = {}, {}
    for key, value in stats.items():
        name = str(key).removeprefix("cmdstat_").upper()
        usec[name], calls[name] = int(value["usec"]), int(value["calls"])
    cpu_s = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
    return RedisReading(time.monotonic(), cpu_s, usec, calls)


@dataclass(frozen=True)
class RedisDelta:
    """What a Redis server did between two readings, less its idle rate over that time."""

    seconds: float
    cpu_s: float
    usec: dict[str, float]
    calls: dict[str, float]


def redis_delta(
    before: RedisReading, after: RedisReading, idle: RedisDelta | None = None
) -> RedisDelta:
    """``after - before``; with ``idle`` (a delta measured on the idle deployment), its rate
    times this delta's duration is subtracted (heartbeats, the sweeper, the broker's polls)."""
    seconds = after.at - before.at
    scale = seconds / idle.seconds if idle is not None and idle.seconds > 0 else 0.0

    def minus(
        now: dict[str, int], then: dict[str, int], base: dict[str, float]
    ) -> dict[str, float]:
        return {
            name: max(0.0, value - then.get(name, 0) - scale * base.get(name, 0.0))
            for name, value in now.items()
            if value - then.get(name, 0) > 0
        }

    cpu_s = after.cpu_s - before.cpu_s - (scale * idle.cpu_s if idle is not None else 0.0)
    return RedisDelta(
        seconds,
        max(0.0, cpu_s),
        minus(after.usec, before.usec, idle.usec if idle else {}),
        minus(after.calls, before.calls, idle.calls if idle else {}),
    )


def idle_delta(client: redis.Redis, seconds: float) -> RedisDelta:
    """What the Redis server does in ``seconds`` with nothing asked of the deployment."""
    before = read_redis(client)
    time.sleep(seconds)
    return redis_delta(before, read_redis(client))
