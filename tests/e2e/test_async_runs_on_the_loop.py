"""``async def`` tools on an io worker's run loop (``MCPQ_ASYNC_RUNS``, ``mcpq.workers.run_loop``):
a waiting run holds no thread.

One io worker process with 8 pool threads (``MCPQ_IO_CONCURRENCY=8``) and room for 1,000 runs on
its loop:
- 200 runs of an async tool awaiting ``ctx.sleep`` all run at once, on far fewer threads than
  runs, and a short tool created beside them completes;
- a cancel reaches a waiting run on the loop, and the run ends ``cancelled``;
- a FastMCP tool's step, question and answer work on the loop (the step runs once);
- the worker SIGKILLed with 40 runs on its loop: another worker runs every one of them again;
- the worker stopped (SIGTERM, as Heroku stops it) hands its loop's runs back: another worker
  takes them at once, well before their leases would lapse;
- a FastMCP tool that blocks the loop (a blocking call in an ``async def``) stalls no other run:
  they move to a new loop (``MCPQ_LOOP_STALL_S``, 0.5 s here), a short tool and a cancel go
  through while it blocks, a moved run's step is not run again, and the tool's next run gets a
  thread.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpq.ops.bench.bench_tools import ASYNC_SLEEP, MODULE
from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.faults.support import TaskWatch
from tests.support.procs import wait_until
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

THREADS = 8
LOOP = {"MCPQ_ASYNC_RUNS": "1000", "MCPQ_IO_CONCURRENCY": str(THREADS)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    tools = f"{DEFAULT_TOOLS},{MODULE},tests.brought.fastmcp_steps:mcp"
    tools += ",tests.brought.fastmcp_blocking:mcp"
    env = {**FAST_KNOBS, **LOOP, "MCPQ_LEASE_S": "20"}  # a lapse would take 20 s: see below
    env["MCPQ_LOOP_STALL_S"] = "0.5"
    running = LiveStack("runloop", tmp_path_factory.mktemp("runloop"), tools=tools, env=env)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def threads_of(pid: int) -> int:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        total += 1
        children = (task / "children").read_text().split()
        total += sum(threads_of(int(child)) for child in children)
    return total


def running(stack: LiveStack, ids: list[str], runs: int = 1) -> int:
    """How many of ``ids`` are held by a run (a live lease), at their ``runs``-th run or later."""
    now_ms = time.time() * 1000
    held = 0
    for task_id in ids:
        stored = stack.task_hash(task_ref(task_id))
        if int(stored.get("lease") or 0) > now_ms and int(stored.get("runs") or 0) >= runs:
            held += 1
    return held


def create(client: McpClient, count: int, seconds: float) -> list[str]:
    return [client.create_task(ASYNC_SLEEP, {"seconds": seconds})["taskId"] for _ in range(count)]


def test_waiting_async_runs_hold_no_thread_and_a_cancel_reaches_them(stack: LiveStack) -> None:
    with McpClient(stack.url(0)) as client:
        ids = create(client, 200, 120)
        wait_until(lambda: running(stack, ids) == len(ids), timeout=60, message="200 running")
        threads = threads_of(stack.worker.popen.pid)
        # 200 runs wait at once on 8 pool threads: the loop's, the keeper's, the listener's...
        # but no thread per run.
        assert threads < 60, threads
        started = time.monotonic()
        (short,) = create(client, 1, 0.3)
        client.wait_for_status(short, "completed", timeout=30, interval=0.05)
        assert time.monotonic() - started < 10
        victim = ids[0]
        sent = time.monotonic()
        client.cancel(victim)
        ref = task_ref(victim)
        wait_until(
            lambda: any(
                '"transition":"cancelled"' in line and ref[:12] in line
                for line in stack.worker.log().splitlines()
            ),
            timeout=10,
            message="the cancelled run's end",
        )
        assert time.monotonic() - sent < 5
        for task_id in ids[1:]:
            client.cancel(task_id)
        wait_until(lambda: running(stack, ids) == 0, timeout=60, message="all cancelled")


def test_a_fastmcp_tool_asks_and_its_step_runs_once_on_the_loop(
    stack: LiveStack, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    with McpClient(stack.url(0)) as client:
        created = client.create_task("charge_and_ship", {"order_id": "L-1", "ledger": str(ledger)})
        task_id = created["taskId"]
        watch = TaskWatch(client)
        watch.add([task_id])
        watch.wait_all("input_required", timeout=30)
        ((key, _),) = watch.last[task_id]["inputRequests"].items()
        answer = {"action": "accept", "content": {"ship": True}}
        client.update(task_id, {key: answer})
        watch.wait_all("completed", timeout=30)
    assert text_of(watch.last[task_id]["result"]) == "ch-L-1-53 shipped"
    assert ledger.read_text() == "charged L-1\n"


def cancelled_in_log(stack: LiveStack, task_id: str) -> bool:
    ref = task_ref(task_id)
    return any(
        '"transition":"cancelled"' in line and ref[:12] in line
        for line in stack.worker.log().splitlines()
    )


def test_a_tool_that_blocks_the_loop_stalls_no_other_run(stack: LiveStack, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    with McpClient(stack.url(0)) as client:
        waiting = create(client, 30, 120)
        order = {"order_id": "B-1", "ledger": str(ledger)}
        charge = client.create_task("charge_and_ship", order)["taskId"]
        watch = TaskWatch(client)
        watch.add([charge])
        watch.wait_all("input_required", timeout=30)  # charged once, asking
        wait_until(lambda: running(stack, waiting) == 30, timeout=60, message="30 running")
        warned = stack.worker.log().count("held the run loop")
        blocker = client.create_task("slow_report", {"seconds": 8})["taskId"]
        wait_until(
            lambda: stack.worker.log().count("held the run loop") > warned,
            timeout=10,
            message="the stall seen",
        )
        # While it blocks: a short tool completes, a cancel reaches its run, an answer is taken.
        (short,) = create(client, 1, 0.3)
        client.wait_for_status(short, "completed", timeout=5, interval=0.05)
        client.cancel(waiting[0])
        wait_until(lambda: cancelled_in_log(stack, waiting[0]), timeout=5, message="cancelled")
        ((key, _),) = client.task(charge)["inputRequests"].items()
        client.update(charge, {key: {"action": "accept", "content": {"ship": True}}})
        client.wait_for_status(charge, "completed", timeout=5, interval=0.05)
        assert client.task(blocker)["status"] == "working"  # all that, while it blocked
        assert running(stack, waiting[1:]) == 29  # the moved runs are held, in their first run
        done = client.wait_for_status(blocker, "completed", timeout=30, interval=0.1)
        assert text_of(done["result"]) == "report ready"
        # The tool and the line that blocked, named once; the moved run's step ran once.
        warning = next(
            line for line in stack.worker.log().splitlines() if "held the run loop" in line
        )
        assert "slow_report" in warning and "fastmcp_blocking.py" in warning
        assert "in fetch_with_a_blocking_client" in warning
        assert ledger.read_text() == "charged B-1\n"
        # Its next run gets a thread: it blocks nobody, and nothing more is moved.
        again = client.create_task("slow_report", {"seconds": 3})["taskId"]
        wait_until(lambda: client.task(again)["status"] == "working", timeout=10)
        (short,) = create(client, 1, 0.3)
        client.wait_for_status(short, "completed", timeout=2.5, interval=0.05)
        client.wait_for_status(again, "completed", timeout=30, interval=0.1)
        assert stack.worker.log().count("held the run loop") == warned + 1
        for task_id in waiting[1:]:
            client.cancel(task_id)
        wait_until(lambda: running(stack, waiting) == 0, timeout=60, message="all cancelled")


def test_a_sigkilled_worker_s_loop_runs_all_run_again_elsewhere(stack: LiveStack) -> None:
    with McpClient(stack.url(0)) as client:
        ids = create(client, 40, 3)
        wait_until(lambda: running(stack, ids) == len(ids), timeout=60, message="40 running")
        victim = stack.worker
        stack.kill_group(victim, signal.SIGKILL)
        stack.start_worker(pool="io", **LOOP)
        stack.reap(victim)
        # Each task's second run, on the new worker, once its lease (20 s) lapsed.
        watch = TaskWatch(client)
        watch.add(ids)
        watch.wait_all("completed", timeout=120)
    assert all(int(stack.task_hash(task_ref(i))["runs"]) == 2 for i in ids)


def test_a_stopping_worker_hands_its_loop_s_runs_back_at_once(stack: LiveStack) -> None:
    with McpClient(stack.url(0)) as client:
        ids = create(client, 40, 60)
        wait_until(lambda: running(stack, ids) == len(ids), timeout=60, message="40 running")
        leaving = stack.worker
        stack.start_worker(pool="io", **LOOP)
        stopped = time.monotonic()
        leaving.popen.send_signal(signal.SIGTERM)
        # Handed back: each held again by the other worker (its second run) long before its
        # lease (20 s) would have lapsed.
        wait_until(lambda: running(stack, ids, runs=2) == len(ids), timeout=15, message="resumed")
        assert time.monotonic() - stopped < 15
        stack.reap(leaving)
        assert "handed 40 runs back" in leaving.log()
        for task_id in ids:
            client.cancel(task_id)
        watch = TaskWatch(client)
        watch.add(ids)
        watch.wait_all("cancelled", timeout=60)
