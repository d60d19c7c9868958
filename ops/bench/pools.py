"""Throughput of a worker pool with one worker process, then two: ``python -m ops.bench.pools``.

Starts a private redis-server (never the shared one), ``mcpq web`` and
``mcpq worker --queues bulk --concurrency 1`` nodes on loopback, exactly as the Procfile's
``worker_bulk`` formation runs them. It creates ``--tasks`` tasks of ``bench_sleep`` (declared
below on the ``bulk`` queue; it sleeps ``--seconds``) through ``POST /mcp`` and measures tasks
completed per second, from the first create to the last completion (read from the deployment's
task counters in Redis), first with one worker process, then with a second one added. Prints both
rates and their ratio; with ``--json``, one JSON object instead.

This module is also the tool module of the benchmark (``MCPQ_TOOLS=ops.bench.pools``): like any
tool module it is imported by the web tier and the workers, so it imports only ``shared``, the
standard library and ``ops``' process helpers (``ops.bench.stack``) at module level.
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

from ops.bench.stack import BenchStack, McpClient
from ops.processes import wait_until
from shared.keys import Keys
from shared.tools import ToolContext, tool

BULK_QUEUE = "bulk"
TOOL = "bench_sleep"
TOOLS_MODULE = "ops.bench.pools"


@tool(
    task="optional", queue=BULK_QUEUE, description="Benchmark: sleeps `seconds` on the bulk pool."
)
def bench_sleep(ctx: ToolContext, seconds: float = 0.2) -> str:
    ctx.sleep(seconds)
    return "slept"


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


class Bench(BenchStack):
    """The shared bench stack; each process with a metrics directory of its own, quieter logs."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, TOOLS_MODULE, {"MCPQ_LOG_LEVEL": "WARNING"})

    def env(self, name: str) -> dict[str, str]:
        metrics_dir = self.workdir / f"metrics-{name}"
        metrics_dir.mkdir()
        return {**super().env(name), "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}

    def add_worker(self, node: str) -> None:
        """``mcpq worker --queues bulk --concurrency 1``; returns once it beats in Redis."""
        argv = [
            sys.executable, "-m", "ops.cli", "worker", "--queues", BULK_QUEUE,
            "--concurrency", "1", "--hostname", f"{node}@%h",
        ]  # fmt: skip
        with self.redis_client() as client:

            def beating(_: object) -> bool:
                members = client.zrange(Keys().workers, 0, -1)
                return any(str(m).startswith(f"{node}@") for m in members)

            self.start_worker(node, argv, beating)

    def completed(self) -> int:
        with self.redis_client() as client:
            raw = client.hget(Keys().stats, f"completed:{TOOL}")
        return int(raw or 0)


def throughput(bench: Bench, client: McpClient, tasks: int, seconds: float) -> float:
    """Tasks completed per second: N creates, then wait for N more completions."""
    before = bench.completed()
    started = time.monotonic()
    for _ in range(tasks):
        client.create(TOOL, {"seconds": seconds})
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
        client = McpClient(bench.mcp_url)
        bench.add_worker("bench-1")
        throughput(bench, client, 2, seconds)  # warm-up: connections, imports
        one = throughput(bench, client, tasks, seconds)
        bench.add_worker("bench-2")
        throughput(bench, client, 4, seconds)
        two = throughput(bench, client, tasks, seconds)
    finally:
        bench.close()
    return Result(tasks, seconds, round(one, 3), round(two, 3))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.pools",
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
