"""Throughput of a worker pool with one worker process, then two: ``python -m
mcpq.ops.bench.pools``.

Starts a private stack (``ops.harness.stack.Stack``: a redis-server on a free loopback port, never
the shared one, and ``mcpq web``) and ``mcpq worker --queues bulk --concurrency 1`` nodes, exactly
as the Procfile's ``worker_bulk`` formation runs them. It creates ``--tasks`` tasks of
``bench_sleep`` (``mcpq.ops.bench.bench_tools``, on the ``bulk`` queue; it sleeps ``--seconds``)
through ``POST /mcp`` and measures tasks completed per second, from the first create to the last
completion (read from the deployment's task counters, ``TaskStore.stats``), first with one worker
process, then with a second one added. Prints both rates and their ratio; with ``--json``, one
JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mcpq.ops.bench.bench_tools import BULK_QUEUE, MODULE, SLEEP
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until

TOOL = SLEEP


@dataclass(frozen=True)
class Result:
    tasks: int
    seconds: float
    one_worker_tasks_per_s: float
    two_workers_tasks_per_s: float

    @property
    def ratio(self) -> float:
        return self.two_workers_tasks_per_s / self.one_worker_tasks_per_s

    def render(self) -> str:
        ideal = 1 / self.seconds
        return "\n".join(
            [
                f"bulk pool: {self.tasks} tasks of {TOOL}({self.seconds:g} s), "
                f"concurrency 1 per worker process (ideal {ideal:.2f} tasks/s per process)",
                f"  1 worker process:   {self.one_worker_tasks_per_s:7.2f} tasks/s",
                f"  2 worker processes: {self.two_workers_tasks_per_s:7.2f} tasks/s",
                f"  ratio:              {self.ratio:7.2f}x",
            ]
        )

    def as_json(self) -> str:
        return json.dumps({**asdict(self), "ratio": round(self.ratio, 3)})


class Bench:
    """The stack of the benchmark; each process with a metrics directory of its own, in the
    work directory, and quieter logs."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        # Completions are timed by the store's counters: written every 50 ms, not every second
        # (MCPQ_STATS_FLUSH_MS), so that they do not lag the tasks by up to a second.
        quiet = {"MCPQ_LOG_LEVEL": "WARNING", "MCPQ_STATS_FLUSH_MS": "50"}
        self.stack = Stack("pools", workdir, tools=MODULE, env=quiet)

    def metrics_env(self, name: str) -> dict[str, str]:
        metrics_dir = self.workdir / f"metrics-{name}"
        metrics_dir.mkdir()
        return {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}

    def start(self) -> None:
        server = self.stack.start_redis()
        print(f"started {server.binary.describe()}", file=sys.stderr, flush=True)
        self.stack.start_web(**self.metrics_env("web"))

    def add_worker(self, node: str) -> None:
        """``mcpq worker --queues bulk --concurrency 1``; returns once it beats in Redis."""
        stack = self.stack
        pool = stack.spawn_pool(BULK_QUEUE, node, concurrency=1, **self.metrics_env(node))
        stack.wait_ready(pool, lambda: any(n.startswith(f"{node}@") for n in stack.stats().workers))

    def completed(self) -> int:
        return self.stack.stats().totals["completed"].get(TOOL, 0)


def throughput(bench: Bench, client: McpClient, tasks: int, seconds: float) -> float:
    """Tasks completed per second: N creates, then wait for N more completions."""
    before = bench.completed()
    started = time.monotonic()
    for _ in range(tasks):
        client.create_task(TOOL, {"seconds": seconds})
    wait_until(
        lambda: bench.completed() >= before + tasks,
        timeout=tasks * seconds * 3 + 60,
        interval=0.01,
        message=f"{tasks} completions",
    )
    return tasks / (time.monotonic() - started)


def run(tasks: int, seconds: float, workdir: Path) -> Result:
    bench = Bench(workdir)
    try:
        bench.start()
        with McpClient(bench.stack.url(), elicitation=False, client_name="mcpq-bench") as client:
            bench.add_worker("bench-1")
            throughput(bench, client, 2, seconds)  # warm-up: connections, imports
            one = throughput(bench, client, tasks, seconds)
            bench.add_worker("bench-2")
            throughput(bench, client, 4, seconds)
            two = throughput(bench, client, tasks, seconds)
    finally:
        if left := bench.stack.close():
            print(f"processes left after the benchmark: {left}", file=sys.stderr)
    return Result(tasks, seconds, round(one, 3), round(two, 3))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.pools",
        description="Bulk-pool throughput with one worker process vs two (concurrency 1 each).",
    )
    parser.add_argument("--tasks", type=int, default=40, help="tasks per measurement (default 40)")
    parser.add_argument(
        "--seconds", type=float, default=0.2, help="each task's sleep (default 0.2)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.tasks < 1 or args.seconds <= 0:
        build_parser().error("--tasks must be >= 1 and --seconds > 0")
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-pools-"))
    try:
        result = run(args.tasks, args.seconds, workdir)
    except BaseException:
        print(f"benchmark failed; logs in {workdir}", file=sys.stderr)
        raise
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print(result.as_json() if args.json else result.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
