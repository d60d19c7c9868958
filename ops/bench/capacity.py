"""Capacity planning, measured: ``python -m ops.bench.capacity [--json] [--quick]``.

What one process of each kind does, and what one task costs Redis (and RabbitMQ), each measured
on a private stack of its own (``ops.stack.Stack``: redis-server on a free loopback port, never
the shared one), with the no-op tool (``slow_compute seconds=0``):

1. **web**: tasks created per second by one web process (``mcpq web``, ``WEB_CONCURRENCY=1``,
   no worker), driven by the load generator of ``ops.bench.loadgen`` in ``--procs`` processes;
   and the web process's CPU time per task (its busy share says whether it was the limit).
2. **workers**: a backlog of tasks created first, then one ``mcpq worker`` process started, once
   with the io pool (the default) and once with the cpu pool (``--pool cpu``), each with its
   default concurrency: tasks drained per second between 10 % and 90 % of the backlog (start-up
   left out), and the worker's CPU time per task (prefork children included).
3. **Redis per task**, the store as broker (the default): a burst of tasks created by 10 clients,
   run by one io worker, then read once each (``tasks/get``); Redis's CPU time (``INFO cpu``:
   used_cpu_sys + used_cpu_user) and command time (``INFO commandstats`` usec) over that,
   less the idle deployment's rate measured just before, divided by the tasks; hence the tasks/s
   at which one Redis core saturates. Then, separately (``MONITOR`` costs Redis CPU itself),
   the commands and round trips per task (``ops.bench.costs.per_task_costs``).
4. the same with **RabbitMQ as broker** (a vhost of its own on the machine's RabbitMQ,
   ``mcpq-bench-<hex>``, deleted after; never ``/``), plus RabbitMQ's own CPU per task from its
   Erlang VM's ``/proc`` times, less an idle baseline measured just before and just after (it
   is a shared server: both baselines are reported, their difference is the noise). Left out,
   with the reason, where RabbitMQ is not usable.
5. **a Redis Cluster** of 3 primaries (``MCPQ_REDIS_CLUSTER``, ``MCPQ_STORE_SHARDS=6``, a plain
   redis-server as broker): tasks/s through one web and one io worker process, and each
   primary's CPU per task, to show the cluster spreads the load. Left out without Redis 7.

Prints a table (measured, then the sizing derived from it for 100, 1,000 and 10,000 tasks/s);
``--json`` prints one object. ``--quick`` is a small run for development and the smoke test:
its numbers mean little.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import redis

from ops import rabbitmq
from ops.bench.capacity_report import (
    Capacity,
    ClusterCost,
    Plan,
    Rate,
    RedisCost,
)
from ops.bench.costs import per_task_costs
from ops.bench.cpu import RedisDelta, idle_delta, read_redis, redis_delta, tree_cpu_seconds
from ops.bench.load import TOOL, Load
from ops.bench.loadgen import spread, steal_s
from ops.bench.rawhttp import RawClient
from ops.processes import wait_until
from ops.redis_binary import RedisProcess, choose_redis_server
from ops.redis_cluster import LocalCluster, cluster_binaries
from ops.stack import Stack
from shared.settings import DEFAULT_TOOLS

CLUSTER_PRIMARIES, CLUSTER_SHARDS = 3, 6
QUIET = {"MCPQ_LOG_LEVEL": "WARNING"}
#: Where completions are counted to time a rate (the store's counters, which processes write
#: every MCPQ_STATS_FLUSH_MS: a second by default, too coarse for a window of a few hundred
#: tasks): written every 50 ms instead, a pipeline of two commands per process each time.
COUNTED = {**QUIET, "MCPQ_STATS_FLUSH_MS": "50"}


# -- helpers ------------------------------------------------------------------------------------
def completed(stack: Stack) -> int:
    """Tasks of the no-op tool completed so far, from the store's counters (every shard)."""
    return stack.stats().totals.get("completed", {}).get(TOOL, 0)


async def create_many(load: Load, count: int, clients: int) -> list[str]:
    """``count`` tasks created by ``clients`` concurrent clients; their ids."""
    ids: list[str] = []
    left = [count]

    async def client() -> None:
        async with RawClient(load.url) as http:
            while left[0] > 0:
                left[0] -= 1
                if (task_id := await load.create(http)) is not None:
                    ids.append(task_id)

    await asyncio.gather(*(client() for _ in range(clients)))
    return ids


async def read_each(load: Load, ids: list[str], clients: int) -> None:
    """One ``tasks/get`` per task, by ``clients`` concurrent clients; a task not completed is
    a failure."""
    todo = list(ids)

    async def client() -> None:
        async with RawClient(load.url) as http:
            while todo:
                if await load.status(http, todo.pop()) != "completed":
                    load.failures += 1

    await asyncio.gather(*(client() for _ in range(clients)))


def _reached(stack: Stack, count: int) -> bool:
    return completed(stack) >= count


def wait_completed(stack: Stack, count: int, timeout: float) -> None:
    wait_until(
        partial(_reached, stack, count),
        timeout=timeout,
        interval=0.25,
        message=f"{count} completed tasks",
    )


def start_worker(stack: Stack, node: str, pool: str | None = None) -> Any:
    """``mcpq worker`` with its default concurrency; returns once it beats in Redis."""
    worker = stack.spawn_pool("mcpq", node, concurrency=None, pool=pool)
    stack.wait_ready(worker, lambda: any(n.startswith(f"{node}@") for n in stack.stats().workers))
    return worker


# -- 1. one web process -------------------------------------------------------------------------
def measure_web(plan: Plan, workdir: Path) -> tuple[Rate, int]:
    stack = Stack("capacity-web", workdir, tools=DEFAULT_TOOLS, env=QUIET)
    try:
        stack.start_redis()
        stack.start_web()  # WEB_CONCURRENCY=1; no worker: the web process alone is measured
        web_pid = stack.webs[0].popen.pid
        load = Load(stack.url())
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(plan.procs, mp_context=context) as pool:
            spread(pool, plan.procs, load.url, "create", plan.procs, 0.0)  # warm-up
            # Each generator process starts its clients as soon as it gets its share (spread
            # gives them a second's head start to all be running): the rate and the web
            # process's CPU are read over the same wall-clock span, the whole call.
            cpu_before, wall_before = tree_cpu_seconds(web_pid), time.monotonic()
            created = spread(
                pool, plan.procs, load.url, "create", plan.web_clients, plan.web_seconds
            )
            cpu_s = tree_cpu_seconds(web_pid) - cpu_before
            wall_s = time.monotonic() - wall_before
        tasks = len(created["created"])
        rate = Rate("web", tasks, tasks / wall_s, 1000 * cpu_s / max(1, tasks), cpu_s / wall_s)
        return rate, int(created["failures"])
    finally:
        stack.close()


# -- 2. one worker process per pool kind --------------------------------------------------------
def measure_worker(pool_kind: str, plan: Plan, workdir: Path) -> tuple[Rate, int]:
    stack = Stack(f"capacity-{pool_kind}", workdir, tools=DEFAULT_TOOLS, env=COUNTED)
    stack.knobs["WEB_CONCURRENCY"] = "2"  # the backlog is made before the worker starts
    try:
        stack.start_redis()
        stack.start_web()
        load = Load(stack.url())
        ids = asyncio.run(create_many(load, plan.backlog, 16))
        worker = start_worker(stack, f"capacity-{pool_kind}", pool=pool_kind)
        pid = worker.popen.pid
        total = len(ids)
        low, high = max(1, total // 10), max(2, total * 9 // 10)
        # The window between 10 % and 90 % of the backlog: the worker's start-up (imports,
        # connections, the first prefetch) and the tail (a last slot finishing alone) are out.
        marks: list[tuple[float, float, int]] = []
        for mark in (low, high):
            wait_until(
                partial(_reached, stack, mark),
                timeout=600,
                interval=0.02,
                message=f"{mark} completions",
            )
            marks.append((time.monotonic(), tree_cpu_seconds(pid), completed(stack)))
        (t0, cpu0, n0), (t1, cpu1, n1) = marks
        wait_completed(stack, total, timeout=600)
        done = max(1, n1 - n0)
        cpu_s, wall_s = cpu1 - cpu0, t1 - t0
        rate = Rate(pool_kind, n1 - n0, done / wall_s, 1000 * cpu_s / done, cpu_s / wall_s)
        return rate, load.failures
    finally:
        stack.close()


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


# -- the run ------------------------------------------------------------------------------------
def run(plan: Plan, workdir: Path, only: set[str]) -> Capacity:
    skipped: dict[str, str] = {}
    failures = 0
    stolen = steal_s()
    machine = {
        "cpus": os.cpu_count() or 0,
        "load_before": round(os.getloadavg()[0], 2),
        "redis": "",
    }

    def phase(name: str, measure: Callable[[], tuple[Any, int]]) -> Any:
        nonlocal failures
        print(f"measuring {name}...", file=sys.stderr, flush=True)
        result, failed = measure()
        failures += failed
        return result

    web = phase("one web process", lambda: measure_web(plan, workdir / "web"))
    workers = [
        phase(
            f"one worker process, {kind} pool", partial(measure_worker, kind, plan, workdir / kind)
        )
        for kind in ("io", "cpu")
    ]
    cost = phase("Redis per task", lambda: measure_redis("redis", plan, workdir / "redis"))
    machine["redis"] = _redis_version()
    on_rabbit = None
    if "rabbitmq" not in only:
        skipped["rabbitmq"] = "not asked for (--skip)"
    elif why := rabbitmq.unavailable():
        skipped["rabbitmq"] = why
    else:
        on_rabbit = phase(
            "Redis and RabbitMQ per task, RabbitMQ as broker",
            lambda: measure_redis("rabbitmq", plan, workdir / "rabbitmq"),
        )
    cluster = None
    if "cluster" not in only:
        skipped["cluster"] = "not asked for (--skip)"
    elif cluster_binaries() is None:
        skipped["cluster"] = "a Redis Cluster needs redis-server 7+ and redis-cli"
    else:
        cluster = phase(
            "a 3-primary Redis Cluster", lambda: measure_cluster(plan, workdir / "cluster")
        )
    return Capacity(
        machine, web, workers, cost, on_rabbit, cluster, skipped, failures, steal_s() - stolen
    )


def _redis_version() -> str:
    return choose_redis_server().describe()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.capacity",
        description="Capacity per process and Redis cost per task, measured on private stacks.",
    )
    parser.add_argument("--quick", action="store_true", help="a small run (numbers mean little)")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes (2)")
    parser.add_argument(
        "--skip",
        action="append",
        choices=OPTIONAL,
        default=[],
        help="leave out an optional measurement (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


OPTIONAL = ("rabbitmq", "cluster")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.procs < 1:
        build_parser().error("--procs must be >= 1")
    plan = Plan.quick(args.procs) if args.quick else Plan.full(args.procs)
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-capacity-"))
    try:
        result = run(plan, workdir, set(OPTIONAL) - set(args.skip))
    except BaseException:
        print(f"benchmark failed; logs in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result.as_json()) if args.json else result.render())
    return 0 if result.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
