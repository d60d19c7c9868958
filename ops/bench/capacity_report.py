"""The results of ``python -m mcpq.ops.bench.capacity`` and the sizing derived from them: what is
measured (rates, CPU time per task, Redis cost) and the table and plan it prints."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from mcpq.ops.bench.capacity_versus import Profiled, Versus, render_versus

TARGETS = (100, 1_000, 10_000)
#: The derived sizing plans every process and every Redis core at this share of a core busy:
#: headroom for bursts, for the sweeper's and the heartbeats' work, and for a noisy neighbour.
UTILIZATION = 0.7


@dataclass(frozen=True)
class Plan:
    """How much of everything one run measures."""

    web_seconds: float
    web_clients: int
    procs: int
    backlog: int
    burst: int
    monitored: int
    idle_s: float
    broker_idle_s: float  #: RabbitMQ's idle baselines (a shared server: longer)
    rate: float  #: the steady arrival of no-op tasks at a worker, tasks/s
    steady_s: float  #: for this long
    worker_idle_s: float  #: a worker's idle CPU (``/proc`` counts 10 ms ticks: not too short)
    #: Drains of a backlog by each worker against bare Celery's, mcpq's and bare Celery's in
    #: turn (their median and the median of each round's ratio are reported): one drain of each
    #: moved by ±0.2 in ratio between runs on a shared host.
    drain_rounds: int

    @classmethod
    def full(cls, procs: int) -> Plan:
        return cls(10.0, 32, procs, 3000, 2000, 300, 3.0, 5.0, 200.0, 10.0, 10.0, 3)

    @classmethod
    def quick(cls, procs: int) -> Plan:
        return cls(1.5, 6, procs, 120, 60, 20, 1.0, 1.0, 50.0, 1.0, 1.0, 1)


@dataclass
class Rate:
    """One process's throughput: measured, and its CPU time per task."""

    kind: str
    tasks: int
    per_s: float  #: measured here
    cpu_ms_per_task: float  #: CPU time of the process tree per task
    busy: float  #: CPU seconds per wall second during the measurement (1.0: one core)

    @property
    def per_core_s(self) -> float:
        """Tasks/s if the process had one core to itself: 1 s / CPU per task (derived)."""
        return 1000 / self.cpu_ms_per_task if self.cpu_ms_per_task else 0.0


@dataclass
class RedisCost:
    """What one task (created, run, read once) costs the task store's Redis (and the broker)."""

    broker: str
    tasks: int
    tasks_per_s: float  #: the burst's rate (creates by 10 clients, runs by one io worker)
    cpu_ms_per_task: float  #: Redis process CPU (INFO cpu), idle rate subtracted
    command_us_per_task: float  #: INFO commandstats usec, every command (scripts' inner too)
    script_us_per_task: float  #: of which EVALSHA/EVAL (a script's usec includes its calls)
    usec_by_command: dict[str, float]  #: per task, the largest
    idle_cpu_ms_per_s: float  #: the idle deployment's Redis CPU (subtracted)
    commands_per_task: float  #: MONITOR: every command, those inside scripts included
    round_trips_per_task: float
    broker_cpu_ms_per_task: float | None = None  #: RabbitMQ's CPU per task, where measured
    broker_idle_cpu_ms_per_s: list[float] = field(default_factory=list)  #: before, after
    #: The RabbitMQ vhost the measurement made and deleted (``None`` on Redis): a check that it
    #: is gone names this one, not every benchmark vhost (another benchmark may hold one).
    broker_vhost: str | None = None

    @property
    def saturates_at(self) -> float:
        """Tasks/s at which one Redis core is busy all the time (derived: 1 s / CPU per task)."""
        return 1000 / self.cpu_ms_per_task if self.cpu_ms_per_task else 0.0

    @property
    def broker_saturates_at(self) -> float | None:
        if not self.broker_cpu_ms_per_task:
            return None
        return 1000 / self.broker_cpu_ms_per_task


@dataclass
class ClusterCost:
    primaries: int
    shards: int
    tasks: int
    tasks_per_s: float  #: created by 10 clients through one web process, run by one io worker
    cpu_ms_per_task_by_primary: list[float]
    broker_cpu_ms_per_task: float  #: the plain Redis that carries Celery's messages

    @property
    def shares(self) -> list[float]:
        total = sum(self.cpu_ms_per_task_by_primary)
        return [round(ms / total, 3) if total else 0.0 for ms in self.cpu_ms_per_task_by_primary]


@dataclass
class Capacity:
    machine: dict[str, Any]
    web: Rate
    workers: list[Rate]
    redis: RedisCost
    rabbitmq: RedisCost | None
    cluster: ClusterCost | None
    skipped: dict[str, str]
    failures: int
    steal_s: float
    versus: list[Versus] = field(default_factory=list)  #: each worker against bare Celery's
    profile: Profiled | None = None  #: ``--profile``'s

    def worker(self, kind: str) -> Rate:
        return next(rate for rate in self.workers if rate.kind == kind)

    def sizing(self) -> list[dict[str, Any]]:
        """What each target rate needs, derived from the CPU time per task measured here, every
        process and Redis core planned at `UTILIZATION`: web processes, io worker processes,
        cpu-pool processes (prefork slots: a node with ``--concurrency c`` counts ``c``), the
        cores of a single Redis (the store as broker); with the cluster measured, its primaries
        and the cores of the separate Redis broker it needs."""
        rows = []
        for target in TARGETS:
            row: dict[str, Any] = {"tasks_per_s": target, "web": _need(target, self.web)}
            for rate in self.workers:
                row[f"worker_{rate.kind}"] = _need(target, rate)
            row["redis_cores"] = round(target * self.redis.cpu_ms_per_task / 1000, 2)
            row["single_redis"] = row["redis_cores"] <= UTILIZATION
            if (c := self.cluster) is not None:
                cores = target * sum(c.cpu_ms_per_task_by_primary) / 1000
                # Assumes the shards spread evenly (the measured shares say how evenly).
                row["cluster_primaries"] = max(c.primaries, math.ceil(cores / UTILIZATION))
                row["broker_cores"] = round(target * c.broker_cpu_ms_per_task / 1000, 2)
            rows.append(row)
        return rows

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["versus"] = [row.as_json() for row in self.versus]
        out["profile"] = None if self.profile is None else self.profile.as_json()
        out["web"]["per_core_s"] = round(self.web.per_core_s, 1)
        for rate, raw in zip(self.workers, out["workers"], strict=True):
            raw["per_core_s"] = round(rate.per_core_s, 1)
        for name in ("redis", "rabbitmq"):
            cost = getattr(self, name)
            if cost is not None:
                out[name]["saturates_at"] = round(cost.saturates_at, 1)
                saturates = cost.broker_saturates_at
                out[name]["broker_saturates_at"] = round(saturates, 1) if saturates else None
        if self.cluster is not None:
            out["cluster"]["shares"] = self.cluster.shares
        out["sizing"] = self.sizing()
        return out

    def render(self) -> str:
        m = self.machine
        lines = [
            f"capacity, no-op tool; {m['cpus']} CPUs, load average {m['load_before']:.2f} "
            f"before the run, Redis {m['redis']}, host steal {self.steal_s:.2f} s",
            "measured                                  tasks/s   CPU ms/task   busy   "
            "tasks/s per core",
        ]
        for rate in [self.web, *self.workers]:
            lines.append(
                f"  {_LABELS[rate.kind]:<38}{rate.per_s:9.1f}{rate.cpu_ms_per_task:12.3f}"
                f"{rate.busy:8.2f}{rate.per_core_s:14.1f}"
            )
        lines += render_versus(self.versus)
        if self.profile is not None:
            lines += self.profile.render()
        lines.append(
            "Redis per task (created, run, read once)    CPU ms   cmd µs  commands  "
            "round trips  1 core saturates at"
        )
        for cost in filter(None, [self.redis, self.rabbitmq]):
            lines.append(
                f"  store's Redis, {cost.broker + ' as broker':<27}{cost.cpu_ms_per_task:8.3f}"
                f"{cost.command_us_per_task:9.1f}{cost.commands_per_task:10.1f}"
                f"{cost.round_trips_per_task:13.1f}{cost.saturates_at:12.0f} tasks/s"
            )
            lines.append(
                f"    (burst {cost.tasks} tasks at {cost.tasks_per_s:.0f}/s; idle Redis "
                f"{cost.idle_cpu_ms_per_s:.1f} ms/s subtracted; scripts "
                f"{cost.script_us_per_task:.1f} µs of the command time)"
            )
            if cost.broker_cpu_ms_per_task is not None:
                before, after = cost.broker_idle_cpu_ms_per_s
                lines.append(
                    f"  RabbitMQ itself{'':<28}{cost.broker_cpu_ms_per_task:8.3f}"
                    f"{'':<32}{cost.broker_saturates_at or 0:12.0f} tasks/s"
                )
                lines.append(
                    f"    (shared server: idle {before:.1f} ms/s before, {after:.1f} ms/s after, "
                    "their mean subtracted)"
                )
        if (c := self.cluster) is not None:
            per = ", ".join(f"{ms:.3f}" for ms in c.cpu_ms_per_task_by_primary)
            shares = ", ".join(f"{share:.0%}" for share in c.shares)
            lines += [
                f"Redis Cluster, {c.primaries} primaries, MCPQ_STORE_SHARDS={c.shards}, "
                f"one web + one io worker: {c.tasks_per_s:.1f} tasks/s",
                f"  CPU ms per task by primary  {per}  (shares {shares})",
                f"  the broker's Redis          {c.broker_cpu_ms_per_task:.3f} ms per task",
            ]
        if self.web.busy < 0.8:
            lines.append(
                "  (the web process used less than 0.8 of a core: the load generator or the "
                "machine, not the web process, limited its rate)"
            )
        for name, why in self.skipped.items():
            lines.append(f"not measured: {name}: {why}")
        lines.append(
            f"derived sizing (from CPU per task, every process and Redis core at "
            f"{UTILIZATION:.0%} busy)"
        )
        lines.append(
            "  tasks/s    web   io workers   cpu-pool processes   single Redis cores"
            "   cluster primaries + broker cores"
        )
        for row in self.sizing():
            cluster = (
                f"{row['cluster_primaries']:9d} + {row['broker_cores']:.2f}"
                if "cluster_primaries" in row
                else ""
            )
            verdict = "" if row["single_redis"] else " (too many)"
            lines.append(
                f"  {row['tasks_per_s']:7d}{row['web']:7d}{row['worker_io']:13d}"
                f"{row['worker_cpu']:21d}{row['redis_cores']:21.2f}{verdict:<11}{cluster}"
            )
        lines.append(f"failed requests: {self.failures}")
        return "\n".join(lines)


_LABELS = {
    "web": "web process (created/s)",
    "io": "worker process, io pool (drained/s)",
    "cpu": "worker process, cpu pool (drained/s)",
}


def _need(target: float, rate: Rate) -> int:
    """Processes of that kind for ``target`` tasks/s, each planned at `UTILIZATION` of a core
    (every kind is one thread of Python at a time: one process uses one core at most)."""
    per_process = rate.per_core_s * UTILIZATION
    return math.ceil(target / per_process) if per_process > 0 else 0
