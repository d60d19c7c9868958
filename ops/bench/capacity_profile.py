"""The capacity benchmark's ``--profile``: where mcpq's worker's CPU goes over a steady run.

A worker of the pool kind asked for, of its own, started with the profiler of
``mcpq.ops.bench.thread_profile`` (every thread, each on its own CPU clock; turned on through the
environment, nothing changed in ``workers``) on the same stack, once the unprofiled worker is
stopped, with mcpq's default stats interval as the unprofiled steady worker has. It is warmed
(threads started, connections made), its profilers are cleared in every process of its tree,
the same steady arrival as the unprofiled run's is sent, then every process writes its profile;
they are merged into one ``pstats`` file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mcpq.ops.bench import thread_profile
from mcpq.ops.bench.capacity_phases import time_steady
from mcpq.ops.bench.capacity_stacks import DEFAULT_FLUSH, completed, start_worker, warm
from mcpq.ops.bench.capacity_versus import Profiled
from mcpq.ops.bench.load import Load
from mcpq.ops.bench.memory import process_tree
from mcpq.ops.harness.stack import Stack

TOP_OWN, TOP_CUMULATIVE = 25, 15


def profile_worker(
    stack: Stack,
    pool_kind: str,
    load: Load,
    produce: Callable[[], tuple[int, float]],
    unprofiled_ms: float,
    out: Path,
) -> Profiled:
    """Profile a fresh worker of ``pool_kind`` over ``produce()``'s steady arrival; the merged
    profile is written to ``out``."""
    directory = stack.workdir / f"profile-{pool_kind}"
    env = {**DEFAULT_FLUSH, **thread_profile.hook_env(directory, stack.child_env()["PYTHONPATH"])}
    worker = start_worker(stack, f"capacity-{pool_kind}-profiled", pool=pool_kind, **env)
    try:
        warm(stack, load)
        pids = process_tree(worker.popen.pid)
        if thread_profile.reset(pids, directory) < len(pids):
            raise RuntimeError(f"the profiler did not start in every process of {pids}")
        steady = time_steady(worker, lambda: completed(stack), produce)
        files = thread_profile.dump(pids, directory)
        if not files:
            raise RuntimeError(f"no profile came from {pids}")
    finally:
        stack.stop_child(worker)
    stats = thread_profile.merge(files)
    out.parent.mkdir(parents=True, exist_ok=True)
    stats.dump_stats(str(out))
    tasks = max(1, steady.tasks)

    def entries(by: str, count: int) -> list[dict[str, object]]:
        return [
            {
                "function": e.function,
                "calls": round(e.calls / tasks, 3),
                "own_us": round(e.own_s * 1e6 / tasks, 2),
                "cumulative_us": round(e.cumulative_s * 1e6 / tasks, 2),
            }
            for e in thread_profile.top(stats, count, by)
        ]

    return Profiled(
        kind=pool_kind,
        path=str(out),
        processes=len(files),
        tasks=steady.tasks,
        cpu_ms=1000 * steady.cpu_s / tasks,
        unprofiled_ms=unprofiled_ms,
        accounted_ms=1000 * thread_profile.total_s(stats) / tasks,
        top_own=entries("own", TOP_OWN),
        top_cumulative=entries("cumulative", TOP_CUMULATIVE),
    )
