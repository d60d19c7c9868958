"""Recovery benchmark: how fast does a task resume after the worker running it is SIGKILLed?

``python -m ops.bench.recovery --runs 5`` (from the repository root) starts a private stack: a
redis-server on a free loopback port, one web process and two Celery prefork workers, each in its
own process group. Each run creates a task of ``bench_effect`` (below: a memoized ``ctx.step``
appends a line to a file, then the tool sleeps), waits until the step is stored, SIGKILLs the
whole process group of the worker that received the task (Celery main process and pool children),
and measures the time until the other, already running worker claims the task (the task hash's
``runs`` counter going to 2). Then it waits for ``completed`` and starts a replacement worker for
the next run.

It prints the knobs, each kill → resumed-start time, their median, and two counts that must be
zero: tasks lost (not completed) and double effects (extra lines written by the step). Exit
status: 0 when nothing was lost or done twice and the median is within the target (15 s).

This module is also the benchmark's tool module (``MCPQ_TOOLS=...,ops.bench.recovery``): at
import it only registers ``bench_effect``.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

from ops.bench.stack import BenchStack, McpClient, Proc
from ops.processes import wait_until
from shared.keys import Keys, task_ref
from shared.settings import DEFAULT_TOOLS
from shared.tools import ToolContext, tool

TOOL = "bench_effect"
TOOLS = f"{DEFAULT_TOOLS},ops.bench.recovery"
TARGET_MEDIAN_S = 15.0


@tool(
    name=TOOL,
    task="optional",
    description="Benchmark: a memoized step appends a line to `path`, then the tool sleeps.",
)
def bench_effect(ctx: ToolContext, path: str, seconds: float = 2.0) -> str:
    def effect() -> int:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("effect\n")
        return 1

    ctx.step("effect", effect)
    ctx.report("stepped")
    ctx.sleep(seconds)
    return f"done after {seconds:g}s"


# -- the stack -------------------------------------------------------------------------------------
class RecoveryStack(BenchStack):
    """The shared bench stack, with Celery prefork workers (concurrency 2) on the mcpq queue."""

    def __init__(self, workdir: Path, knobs: Mapping[str, str]) -> None:
        super().__init__(workdir, TOOLS, knobs)
        self._count = 0

    def add_worker(self) -> Proc:
        self._count += 1
        node = f"bench{self._count}-{secrets.token_hex(3)}"
        argv = [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
            "--pool", "prefork", "-c", "2", "-Q", "mcpq", "-E", "--loglevel", "INFO",
            "-n", f"{node}@%h", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        return self.start_worker(f"worker{self._count}", argv, lambda p: " ready." in p.log())


# -- the benchmark -------------------------------------------------------------------------------
@dataclass
class RunResult:
    resumed_s: float | None
    completed: bool
    effects: int


def _one_run(
    stack: RecoveryStack, client: McpClient, store: redis.Redis, index: int, seconds: float
) -> RunResult:
    keys = Keys()
    effect_file = stack.workdir / f"effect-{index}.txt"
    task_id = client.create(TOOL, {"path": str(effect_file), "seconds": seconds})
    ref = task_ref(task_id)
    wait_until(
        lambda: store.hexists(keys.steps(ref), "effect"), timeout=30, message="the step stored"
    )
    needle = f"Task {TOOL}[{ref}] received"
    (victim,) = wait_until(
        lambda: [w for w in stack.workers if needle in w.log()],
        timeout=10,
        message="the worker running the task",
    )
    killed_at = stack.kill(victim)

    def claimed_again() -> float | None:
        runs = store.hget(keys.task(ref), "runs")
        return time.monotonic() if runs is not None and int(str(runs)) >= 2 else None

    resumed_s: float | None
    try:
        resumed_s = wait_until(claimed_again, timeout=120, interval=0.01) - killed_at
    except TimeoutError:
        resumed_s = None
    completed = False
    with contextlib.suppress(TimeoutError):
        completed = bool(
            wait_until(
                lambda: client.get(task_id)["status"] == "completed", timeout=60, interval=0.1
            )
        )
    effects = len(effect_file.read_text(encoding="utf-8").splitlines())
    stack.add_worker()  # two workers again for the next run
    return RunResult(resumed_s, completed, effects)


def run(runs: int, knobs: dict[str, str], seconds: float, workdir: Path) -> int:
    print("knobs: " + ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())))
    print(f"stack: 1 web, 2 prefork workers (concurrency 2); tool {TOOL} sleeps {seconds:g}s")
    stack = RecoveryStack(workdir, knobs)
    results: list[RunResult] = []
    left: list[int] = []
    try:
        stack.start()
        for _ in range(2):
            stack.add_worker()
        client = McpClient(stack.mcp_url)
        store = stack.redis_client()
        try:
            for index in range(1, runs + 1):
                result = _one_run(stack, client, store, index, seconds)
                results.append(result)
                shown = "never" if result.resumed_s is None else f"{result.resumed_s:.2f}s"
                print(
                    f"run {index}: kill -> resumed start {shown}; completed={result.completed}; "
                    f"effects={result.effects}",
                    flush=True,
                )
        finally:
            store.close()
    finally:
        left = stack.close()
    times = [r.resumed_s for r in results if r.resumed_s is not None]
    lost = sum(1 for r in results if not r.completed)
    doubles = sum(max(r.effects - 1, 0) for r in results)
    median = statistics.median(times) if times else float("inf")
    print(f"median kill -> resumed start: {median:.2f}s over {len(times)}/{runs} runs")
    print(f"lost: {lost}; double effects: {doubles}; processes left: {len(left)}")
    ok = not lost and not doubles and not left and len(times) == runs
    ok = ok and median <= TARGET_MEDIAN_S
    print(
        f"target: median within {TARGET_MEDIAN_S:g}s, nothing lost or done twice: "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.recovery", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="kills to measure (at least 5)")
    parser.add_argument("--lease-s", default="5", help="MCPQ_LEASE_S (default 5)")
    parser.add_argument("--sweep-interval-s", default="1", help="MCPQ_SWEEP_INTERVAL_S (default 1)")
    parser.add_argument("--tool-seconds", type=float, default=2.0, help="how long the tool sleeps")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    knobs = {"MCPQ_LEASE_S": args.lease_s, "MCPQ_SWEEP_INTERVAL_S": args.sweep_interval_s}
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-recovery-"))
    try:
        return run(args.runs, knobs, args.tool_seconds, workdir)
    finally:
        if args.keep:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
