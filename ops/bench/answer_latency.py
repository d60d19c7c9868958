"""Answer latency: how long from ``tasks/update`` until the waiting tool has its answer?

``python -m mcpq.ops.bench.answer_latency --tasks 50`` (from the repository root) starts a private
stack (``ops.harness.stack.Stack``: redis-server on a free port, one ``mcpq web``, one Celery
prefork worker) and, one task at a time, calls ``bench_answer`` (``mcpq.ops.bench.bench_tools``: it
elicits once and returns the wall-clock time at which its ``ctx.elicit`` returned). When the task
shows ``input_required`` the benchmark sends ``tasks/update`` and reads, from the completed result,
when the tool got the answer. It prints p50 / p95 / max of update-sent → tool-resumed and of the
``tasks/update`` round trip itself.
The worker is still holding its slot (the answer arrives well inside ``MCPQ_INPUT_HOLD_S``), so
this is the hot path: the task's wake channel, on the process's shared pub/sub connection.

Exit status 0 when the p95 is within the target (100 ms).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mcpq.ops.bench.bench_tools import ANSWER, MODULE
from mcpq.ops.harness.mcp_client import McpClient, UnexpectedReply
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS

TOOL = ANSWER
TOOLS = f"{DEFAULT_TOOLS},{MODULE}"
TARGET_P95_MS = 100.0


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _one(client: McpClient) -> tuple[float, float]:
    task_id = client.create_task(TOOL)["taskId"]
    waiting = wait_until(
        lambda: (t := client.task(task_id))["status"] == "input_required" and t,
        timeout=30,
        interval=0.005,
        message="input_required",
    )
    (key,) = waiting["inputRequests"]
    answer = {key: {"action": "accept", "content": {"ok": True}}}
    sent = time.time()
    ack = client.update(task_id, answer).result  # UnexpectedReply unless acknowledged
    acked = time.time()
    if ack.get("resultType") != "complete":
        raise UnexpectedReply(f"tasks/update: {ack}")
    done = wait_until(
        lambda: (t := client.task(task_id))["status"] == "completed" and t,
        timeout=30,
        interval=0.01,
        message="completed",
    )
    answered_at = float(done["result"]["structuredContent"]["answered_at"])
    return (answered_at - sent) * 1000, (acked - sent) * 1000


def run(tasks: int, workdir: Path) -> int:
    stack = Stack("answer", workdir, tools=TOOLS, env={"MCPQ_INPUT_HOLD_S": "30"})
    try:
        server = stack.start_redis()
        print(f"started {server.binary.describe()}", file=sys.stderr, flush=True)
        stack.start_web()
        stack.start_worker(
            concurrency=1, loglevel="WARNING", events=False, ready=lambda: stack.stats().workers
        )
        with McpClient(stack.url(), client_name="mcpq-bench") as client:
            _one(client)  # warm-up: imports, connections
            resumed, acks = zip(*(_one(client) for _ in range(tasks)), strict=True)
    finally:
        left = sum(len(pids) for pids in stack.close().values())
    print(f"{tasks} tasks, one at a time; the worker waits in its slot (hold 30 s)")
    for label, values in (
        ("update sent -> tool resumed", resumed),
        ("tasks/update round trip", acks),
    ):
        print(
            f"  {label:<28} p50 {statistics.median(values):6.1f} ms   "
            f"p95 {_percentile(list(values), 0.95):6.1f} ms   max {max(values):6.1f} ms"
        )
    p95 = _percentile(list(resumed), 0.95)
    ok = p95 <= TARGET_P95_MS and not left
    verdict = "met" if ok else "MISSED"
    print(f"target: p95 within {TARGET_P95_MS:g} ms: {verdict}; processes left: {left}")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.answer_latency", description=__doc__
    )
    parser.add_argument("--tasks", type=int, default=50, help="tasks to measure (default 50)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-answer-"))
    try:
        return run(args.tasks, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
