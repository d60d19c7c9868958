"""Recovery benchmark: how fast does a task resume after the worker running it is SIGKILLed?

``python -m mcpq.ops.bench.recovery --runs 5`` (from the repository root) starts a private stack
(``ops.harness.stack.Stack``): a redis-server on a free loopback port, one web process and two
Celery prefork workers, each in its own process group. Each run creates a task of ``bench_effect``
(``mcpq.ops.bench.bench_tools``: a memoized ``ctx.step`` appends a line to a file, then the tool
sleeps), waits until the step is stored, SIGKILLs the whole process group of the worker that
received the task (Celery main process and pool children), and measures the time until the
other, already running worker claims the task (the task hash's ``runs`` counter going to 2).
Then it waits for ``completed`` and starts a replacement worker for the next run.

It prints the knobs, each kill → resumed-start time, their median, and two counts that must be
zero: tasks lost (not completed) and double effects (extra lines written by the step). Exit
status: 0 when nothing was lost or done twice and the median is within the target (15 s).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcpq.ops.bench.bench_tools import EFFECT, MODULE
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref

TOOL = EFFECT
TOOLS = f"{DEFAULT_TOOLS},{MODULE}"
TARGET_MEDIAN_S = 15.0


@dataclass
class RunResult:
    resumed_s: float | None
    completed: bool
    effects: int


def _one_run(stack: Stack, client: McpClient, index: int, seconds: float) -> RunResult:
    effect_file = stack.workdir / f"effect-{index}.txt"
    task_id = client.create_task(TOOL, {"path": str(effect_file), "seconds": seconds})["taskId"]
    ref = task_ref(task_id)
    wait_until(
        lambda: stack.store().step_value(ref, "effect")[0], timeout=30, message="the step stored"
    )
    (victim,) = wait_until(
        lambda: stack.worker_that_received(TOOL, ref),
        timeout=10,
        message="the worker running the task",
    )
    killed_at = stack.kill_child(victim)
    resumed_s: float | None
    try:
        resumed_s = stack.wait_runs(ref, 2, timeout=120) - killed_at
    except TimeoutError:
        resumed_s = None
    completed = False
    with contextlib.suppress(TimeoutError):
        completed = bool(
            wait_until(
                lambda: client.task(task_id)["status"] == "completed", timeout=60, interval=0.1
            )
        )
    effects = len(effect_file.read_text(encoding="utf-8").splitlines())
    stack.start_worker()  # two workers again for the next run
    return RunResult(resumed_s, completed, effects)


def run(runs: int, knobs: dict[str, str], seconds: float, workdir: Path) -> int:
    print("knobs: " + ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())))
    print(f"stack: 1 web, 2 prefork workers (concurrency 2); tool {TOOL} sleeps {seconds:g}s")
    stack = Stack("recovery", workdir, tools=TOOLS, env=knobs)
    results: list[RunResult] = []
    try:
        server = stack.start_redis()
        print(f"started {server.binary.describe()}", file=sys.stderr, flush=True)
        stack.start_web()
        for _ in range(2):
            stack.start_worker()  # Celery prefork, concurrency 2, on the mcpq queue
        with McpClient(stack.url(), elicitation=False, client_name="mcpq-bench") as client:
            for index in range(1, runs + 1):
                result = _one_run(stack, client, index, seconds)
                results.append(result)
                shown = "never" if result.resumed_s is None else f"{result.resumed_s:.2f}s"
                print(
                    f"run {index}: kill -> resumed start {shown}; completed={result.completed}; "
                    f"effects={result.effects}",
                    flush=True,
                )
    finally:
        left = sum(len(pids) for pids in stack.close().values())
    times = [r.resumed_s for r in results if r.resumed_s is not None]
    lost = sum(1 for r in results if not r.completed)
    doubles = sum(max(r.effects - 1, 0) for r in results)
    median = statistics.median(times) if times else float("inf")
    print(f"median kill -> resumed start: {median:.2f}s over {len(times)}/{runs} runs")
    print(f"lost: {lost}; double effects: {doubles}; processes left: {left}")
    ok = not lost and not doubles and not left and len(times) == runs
    ok = ok and median <= TARGET_MEDIAN_S
    print(
        f"target: median within {TARGET_MEDIAN_S:g}s, nothing lost or done twice: "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpq.ops.bench.recovery", description=__doc__)
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
