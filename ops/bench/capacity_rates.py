"""What one process of each kind does, each on a private stack of its own: tasks created per
second by one web process, tasks drained per second by one worker process of each pool kind,
and the CPU time per task of each (``python -m mcpq.ops.bench.capacity``, measurements 1 and 2);
each worker's CPU per task in a drain and at a steady arrival rate beside bare Celery's
(``mcpq.ops.bench.capacity_bare``), its idle CPU, and its profile when asked for
(``mcpq.ops.bench.capacity_profile``). The timings are ``mcpq.ops.bench.capacity_phases``'."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mcpq.ops.bench import bare_celery, bench_tools
from mcpq.ops.bench.capacity_bare import BareWorker
from mcpq.ops.bench.capacity_phases import (
    Drained,
    idle_ms_per_s,
    median_drain,
    time_drain,
    time_steady,
    worker_cost,
)
from mcpq.ops.bench.capacity_profile import profile_worker
from mcpq.ops.bench.capacity_report import Plan, Rate
from mcpq.ops.bench.capacity_stacks import (
    COUNTED,
    DEFAULT_FLUSH,
    QUIET,
    completed,
    create_many,
    paced_creates,
    start_worker,
    warm,
)
from mcpq.ops.bench.capacity_versus import Profiled, Versus
from mcpq.ops.bench.cpu import tree_cpu_seconds
from mcpq.ops.bench.load import Load
from mcpq.ops.bench.loadgen import spread
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS, Settings


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


# -- 2. one worker process per pool kind, and bare Celery's ------------------------------------
@dataclass
class WorkerMeasured:
    """mcpq's worker of one pool kind: its drain rate (the sizing's), beside bare Celery's, and
    its profile when asked for."""

    rate: Rate
    versus: Versus
    profiled: Profiled | None


def measure_worker(
    pool_kind: str, plan: Plan, workdir: Path, profile_to: Path | None = None
) -> tuple[WorkerMeasured, int]:
    """mcpq's worker of ``pool_kind`` against bare Celery's on the same Redis: backlogs drained
    by each in turn (``plan.drain_rounds`` rounds), then mcpq's idle and steady runs (and, with
    ``profile_to``, a profiled worker's steady run), then bare Celery's."""
    # The no-op tool (bench_noop: returns at once), as bare Celery's no-op task does nothing.
    tools = f"{DEFAULT_TOOLS},{bench_tools.MODULE}"
    stack = Stack(f"capacity-{pool_kind}", workdir, tools=tools, env=COUNTED)
    stack.knobs["WEB_CONCURRENCY"] = "2"  # the backlog is made before the worker starts
    bare: BareWorker | None = None
    try:
        stack.start_redis()
        stack.start_web()
        load = Load(stack.url(), bench_tools.NOOP, {})
        count = partial(completed, stack)
        concurrency = Settings.from_env(stack.child_env()).concurrency(pool_kind)
        bare = BareWorker(stack, pool_kind, concurrency, plan)
        # In turn, so that the host's drift over the run (tens of percent within an hour) falls
        # on both sides alike: each round's ratio compares two drains a minute apart at most.
        mine: list[Drained] = []
        theirs: list[Drained] = []
        for round_ in range(plan.drain_rounds):
            mine.append(_drain(stack, load, pool_kind, plan.backlog, round_))
            theirs.append(bare.drain())

        def produce() -> tuple[int, float]:
            created, took = asyncio.run(paced_creates(load, plan.rate, plan.steady_s))
            return len(created), took

        # Idle and steady: a worker of mcpq's default settings (its counts written every second,
        # not every 50 ms as the drain's window needs), warmed first.
        worker = start_worker(stack, f"capacity-{pool_kind}-steady", pool_kind, **DEFAULT_FLUSH)
        warm(stack, load)
        idle = idle_ms_per_s(worker, plan.worker_idle_s)
        mcpq = worker_cost(mine, idle, time_steady(worker, count, produce))
        stack.stop_child(worker)
        profiled = None
        if profile_to is not None:
            profiled = profile_worker(stack, pool_kind, load, produce, mcpq.steady_ms, profile_to)
        versus = Versus(
            pool_kind, bare_celery.POOLS[pool_kind], concurrency, mcpq, bare.finish(theirs)
        )
        rate = median_drain(mine).rate(pool_kind)
        return WorkerMeasured(rate, versus, profiled), load.failures
    finally:
        if bare is not None:
            bare.close()
        stack.close()


def _drain(stack: Stack, load: Load, pool_kind: str, backlog: int, round_: int) -> Drained:
    """A backlog of ``backlog`` no-op tasks created while no worker runs, then drained by one
    mcpq worker of ``pool_kind`` started after."""
    before = completed(stack)
    ids = asyncio.run(create_many(load, backlog, 16))
    spawned = time.monotonic()
    name = f"capacity-{pool_kind}-{round_}"
    worker = stack.spawn_pool("mcpq", name, concurrency=None, pool=pool_kind)
    drained = time_drain(worker, len(ids), lambda: completed(stack) - before, spawned)
    stack.stop_child(worker)
    return drained
