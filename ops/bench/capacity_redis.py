"""What one task costs Redis (and RabbitMQ), each on a private stack of its own: Redis's CPU
and command time per task with the store as broker, then with RabbitMQ as broker (RabbitMQ's
own CPU per task too), and each primary's share on a Redis Cluster (``python -m
mcpq.ops.bench.capacity``, measurements 3 to 5)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import redis

from mcpq.ops.bench.capacity_report import ClusterCost, Plan, RedisCost
from mcpq.ops.bench.capacity_stacks import (
    COUNTED,
    QUIET,
    create_many,
    read_each,
    start_worker,
    wait_completed,
)
from mcpq.ops.bench.costs import per_task_costs
from mcpq.ops.bench.cpu import RedisDelta, idle_delta, read_redis, redis_delta, tree_cpu_seconds
from mcpq.ops.bench.load import Load
from mcpq.ops.harness import rabbitmq
from mcpq.ops.harness.redis_cluster import LocalCluster
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.redis_binary import RedisProcess
from mcpq.shared.settings import DEFAULT_TOOLS

CLUSTER_PRIMARIES, CLUSTER_SHARDS = 3, 6


# -- 3./4. Redis (and RabbitMQ) per task --------------------------------------------------------
def measure_redis(broker: str, plan: Plan, workdir: Path) -> tuple[RedisCost, int]:
    vhost = rabbitmq.create_vhost(rabbitmq.BENCH_PREFIX) if broker == "rabbitmq" else None
    stack = Stack(
        f"capacity-redis-{broker}",
        workdir,
        tools=DEFAULT_TOOLS,
        env=QUIET,
        broker_url=vhost.url if vhost is not None else "",
    )
    try:
        stack.start_redis()
        stack.start_web()
        start_worker(stack, f"capacity-{broker}")
        load = Load(stack.url())
        asyncio.run(create_many(load, 10, 5))  # warm: connections, caches, queue declarations
        wait_completed(stack, 10, timeout=60)
        admin = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        beam = rabbitmq.server_pid() if vhost is not None else None
        beam_idle_before = _idle_rate(beam, plan.broker_idle_s) if beam else 0.0
        idle = idle_delta(admin, plan.idle_s)
        before, beam_before = read_redis(admin), _cpu(beam)
        ids = asyncio.run(create_many(load, plan.burst, 10))
        wait_completed(stack, 10 + len(ids), timeout=600)
        ran_s = time.monotonic() - before.at
        asyncio.run(read_each(load, ids, 10))
        after, beam_after = read_redis(admin), _cpu(beam)
        beam_idle_after = _idle_rate(beam, plan.broker_idle_s) if beam else 0.0
        delta = redis_delta(before, after, idle)
        n = max(1, len(ids))
        usec = sorted(delta.usec.items(), key=lambda item: -item[1])
        scripts = sum(us for name, us in delta.usec.items() if name in {"EVALSHA", "EVAL"})
        costs = asyncio.run(per_task_costs(load, plan.monitored, stack.redis_url))
        cost = RedisCost(
            broker=broker,
            tasks=len(ids),
            tasks_per_s=len(ids) / ran_s,
            cpu_ms_per_task=1000 * delta.cpu_s / n,
            command_us_per_task=sum(delta.usec.values()) / n,
            script_us_per_task=scripts / n,
            usec_by_command={name: round(us / n, 2) for name, us in usec[:10]},
            idle_cpu_ms_per_s=1000 * idle.cpu_s / idle.seconds,
            commands_per_task=costs.commands,
            round_trips_per_task=costs.round_trips,
            broker_vhost=vhost.name if vhost is not None else None,
        )
        if beam is not None:
            # A shared server: its idle rate, measured just before and just after, is the
            # baseline; their difference says how much the rest of the machine moved it.
            baseline = (beam_idle_before + beam_idle_after) / 2
            used = beam_after - beam_before - baseline * (after.at - before.at)
            cost.broker_cpu_ms_per_task = max(0.0, 1000 * used / n)
            cost.broker_idle_cpu_ms_per_s = [
                round(1000 * beam_idle_before, 2),
                round(1000 * beam_idle_after, 2),
            ]
        admin.close()
        return cost, load.failures
    finally:
        stack.close()
        if vhost is not None:
            rabbitmq.delete_vhost(vhost)


def _cpu(pid: int | None) -> float:
    return tree_cpu_seconds(pid) if pid else 0.0


def _idle_rate(pid: int, seconds: float) -> float:
    """CPU seconds per second of process ``pid`` over the next ``seconds``."""
    before = tree_cpu_seconds(pid)
    time.sleep(seconds)
    return (tree_cpu_seconds(pid) - before) / seconds


def _idle_together(clients: list[redis.Redis], seconds: float) -> list[RedisDelta]:
    """Each server's idle delta over one shared window."""
    before = [read_redis(c) for c in clients]
    time.sleep(seconds)
    return [redis_delta(b, read_redis(c)) for b, c in zip(before, clients, strict=True)]


# -- 5. a Redis Cluster -------------------------------------------------------------------------
def measure_cluster(plan: Plan, workdir: Path) -> tuple[ClusterCost, int]:
    cluster = LocalCluster(workdir / "cluster", primaries=CLUSTER_PRIMARIES, replicas=0)
    broker = RedisProcess()  # kombu has no cluster transport: a plain Redis carries the runs
    clients: list[redis.Redis] = []
    stack: Stack | None = None
    try:
        cluster.start()
        broker.start()
        knobs = {**COUNTED, "MCPQ_REDIS_CLUSTER": "true", "MCPQ_STORE_SHARDS": str(CLUSTER_SHARDS)}
        stack = Stack(
            "capacity-cluster",
            workdir / "stack",
            tools=DEFAULT_TOOLS,
            env=knobs,
            store_url=cluster.url,
            broker_url=broker.url,
        )
        stack.start_web()
        start_worker(stack, "capacity-cluster")
        load = Load(stack.url())
        asyncio.run(create_many(load, 10, 5))
        wait_completed(stack, 10, timeout=60)
        # The primaries first, the broker last.
        clients = [cluster.client(node) for node in cluster.primary_nodes()]
        clients.append(redis.Redis.from_url(broker.url))
        idles = _idle_together(clients, plan.idle_s)
        befores = [read_redis(c) for c in clients]
        started = time.monotonic()
        ids = asyncio.run(create_many(load, plan.burst, 10))
        wait_completed(stack, 10 + len(ids), timeout=600)
        took = time.monotonic() - started
        deltas = [
            redis_delta(b, read_redis(c), i)
            for b, c, i in zip(befores, clients, idles, strict=True)
        ]
        n = max(1, len(ids))
        cost = ClusterCost(
            primaries=len(clients) - 1,
            shards=CLUSTER_SHARDS,
            tasks=len(ids),
            tasks_per_s=len(ids) / took,
            cpu_ms_per_task_by_primary=[round(1000 * d.cpu_s / n, 4) for d in deltas[:-1]],
            broker_cpu_ms_per_task=round(1000 * deltas[-1].cpu_s / n, 4),
        )
        return cost, load.failures
    finally:
        for client in clients:
            client.close()
        if stack is not None:
            stack.close()
        broker.close()
        cluster.close()
