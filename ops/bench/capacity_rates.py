"""What one process of each kind does, each on a private stack of its own: tasks created per
second by one web process, tasks drained per second by one worker process of each pool kind,
and the CPU time per task of each (``python -m mcpq.ops.bench.capacity``, measurements 1 and 2)."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

from mcpq.ops.bench.capacity_report import Plan, Rate
from mcpq.ops.bench.capacity_stacks import (
    COUNTED,
    QUIET,
    completed,
    completed_at_least,
    create_many,
    start_worker,
    wait_completed,
)
from mcpq.ops.bench.cpu import tree_cpu_seconds
from mcpq.ops.bench.load import Load
from mcpq.ops.bench.loadgen import spread
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS


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


#: The shortest window between the 10 % and 90 % marks that is measured as such.
MIN_WINDOW_S = 0.5


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
        started = (time.monotonic(), tree_cpu_seconds(pid), completed(stack))
        total = len(ids)
        low, high = max(1, total // 10), max(2, total * 9 // 10)
        # The window between 10 % and 90 % of the backlog: the worker's start-up (imports,
        # connections, the first prefetch) and the tail (a last slot finishing alone) are out.
        marks: list[tuple[float, float, int]] = []
        for mark in (low, high):
            wait_until(
                partial(completed_at_least, stack, mark),
                timeout=600,
                interval=0.02,
                message=f"{mark} completions",
            )
            marks.append((time.monotonic(), tree_cpu_seconds(pid), completed(stack)))
        (t0, cpu0, n0), (t1, cpu1, n1) = marks
        wait_completed(stack, total, timeout=600)
        missed = n1 - n0 < max(1, (high - low) // 2)
        # Too short to measure: the completion counters move in steps (a worker's counts are
        # written in batches), so both marks can land on one step; a window of a few ms reads
        # 0 CPU at the kernel's tick. Seen: 66 completions "in 8 ms", 0.0 ms of CPU.
        too_short = t1 - t0 < MIN_WINDOW_S or cpu1 - cpu0 <= 0
        if missed or too_short:
            # NOTE: the polls missed the window (a loaded host read the counters late, and the
            # worker drained most of the backlog in between), or it was too short to measure:
            # the whole drain instead, from the worker's start (its start-up counted: a lower
            # rate, never a made-up one).
            (t0, cpu0, n0) = started
            (t1, cpu1, n1) = (time.monotonic(), tree_cpu_seconds(pid), completed(stack))
        done = max(1, n1 - n0)
        cpu_s, wall_s = cpu1 - cpu0, t1 - t0
        rate = Rate(pool_kind, n1 - n0, done / wall_s, 1000 * cpu_s / done, cpu_s / wall_s)
        return rate, load.failures
    finally:
        stack.close()
