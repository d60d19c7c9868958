"""Redis faults: the task store goes away and comes back (AOF on, same port and directory).

- While Redis is down the web tier answers at once, HTTP 503 with JSON-RPC -32603 "task store
  unavailable", and serves again by itself when Redis is back; workers run new tasks without a
  restart.
- 200 tasks spread over every state survive a Redis restart: nothing acknowledged is lost, and
  every task still reaches a terminal state (web and workers are not restarted).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.mcp_client import McpClient, Reply, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.faults.support import (
    ACCEPT,
    KEYS,
    MakeStack,
    TaskWatch,
    open_gauges,
    percentile,
)
from tests.faults.tools_faults import HELD_QUEUE
from tests.support.worker_stack import main_thread_stack

pytestmark = [pytest.mark.faults]


def _unavailable(reply: Reply) -> None:
    assert reply.status == 503, reply
    assert reply.error["code"] == -32603, reply
    assert reply.error["message"] == "task store unavailable", reply


@pytest.mark.timeout(60)
def test_redis_down_answers_503_fast_and_recovers(make_stack: MakeStack) -> None:
    stack = make_stack(workers=1, aof=True)
    web, worker = stack.webs[0], stack.worker
    pids = (web.popen.pid, worker.popen.pid)
    with McpClient(stack.url(0)) as client:
        task_id = client.create_task("slow_compute", {"seconds": 0, "label": "before"})["taskId"]
        client.wait_for_status(task_id, "completed", timeout=15)

        stack.stop_redis()
        latencies = []
        for _ in range(50):
            reply = client.get(task_id)
            latencies.append(reply.elapsed_s)
            _unavailable(reply)
        _unavailable(client.call_tool("slow_compute", {"seconds": 0}))
        _unavailable(client.update(task_id, {"elicit-1": {"action": "accept", "content": {}}}))
        _unavailable(client.cancel(task_id))
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        print(
            f"\n[Redis down] 50 x tasks/get: all 503/-32603; p50 {p50 * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
        )
        assert max(latencies) < 3.0, "no request hangs while Redis is down"

        stack.start_redis_again()
        back_at = time.monotonic()

        def served() -> Reply | None:
            reply = client.get(task_id)
            return reply if reply.status == 200 else None

        reply = wait_until(
            served, timeout=20, interval=0.1, message="the same web process serves again"
        )
        print(f"[Redis back] web answered 200 after {time.monotonic() - back_at:.2f}s")
        assert reply.result["status"] == "completed", "the task survived (AOF)"
        assert text_of(reply.result["result"]) == "before: computed in 0s"

        new_id = client.create_task("slow_compute", {"seconds": 0.2, "label": "after"})["taskId"]
        done = client.wait_for_status(new_id, "completed", timeout=30, interval=0.1)
        print(f"[Redis back] a new task completed {time.monotonic() - back_at:.2f}s after restart")
        assert text_of(done["result"]) == "after: computed in 0.2s"
    assert (web.popen.pid, worker.popen.pid) == pids and web.alive and worker.alive


# -- 200 tasks across a Redis restart ------------------------------------------------------------
#  completed  50 x slow_compute 0, before the restart
#  failed     20 x protocol_error_job
#  tool error 10 x failing_job (completed, isError)
#  cancelled  20 x ask_once, cancelled
#  parked     60 x ask_once (input hold 0.3 s, then parked)
#  held        4 x ask_held (its worker holds the slot: hold 300 s)
#  working     4 x slow_compute 6 (the default queue's slots are busy with them)
#  queued     32 x slow_compute 0 behind them
RUNNING = ("working", "held")
MIX = 50 + 20 + 10 + 20 + 60 + 4 + 4 + 32


@pytest.mark.timeout(150)
def test_200_tasks_survive_a_redis_restart(make_stack: MakeStack, tmp_path: Path) -> None:
    knobs = {"MCPQ_INPUT_HOLD_S": "0.3", "MCPQ_POLL_INTERVAL_MS": "500"}
    stack = make_stack(workers=0, env=knobs, aof=True)
    # Each worker's prefetch is its concurrency (multiplier 1): kept for a failure's report.
    slots = {
        stack.start_worker(concurrency=2).name: 2,
        stack.start_worker(concurrency=2).name: 2,
        stack.start_worker(queues=HELD_QUEUE, concurrency=4, MCPQ_INPUT_HOLD_S="300").name: 4,
    }
    processes = [(c, c.popen.pid) for c in stack.workers + stack.webs]
    calls = tmp_path / "calls.txt"
    started = time.monotonic()
    with McpClient(stack.url(0)) as client:
        watch = TaskWatch(client)
        groups: dict[str, list[str]] = {}

        def create(group: str, n: int, tool: str, args: Callable[[int], dict[str, Any]]) -> None:
            ids = [client.create_task(tool, args(i))["taskId"] for i in range(n)]
            groups.setdefault(group, []).extend(ids)
            watch.add(ids)

        def ask(prefix: str) -> Callable[[int], dict[str, Any]]:
            return lambda i: {"calls": str(calls), "label": f"{prefix}{i}"}

        create("done", 50, "slow_compute", lambda i: {"seconds": 0, "label": f"d{i}"})
        create("failed", 20, "protocol_error_job", lambda i: {})
        create("tool_error", 10, "failing_job", lambda i: {})
        create("parked", 60, "ask_once", ask("p"))
        create("cancelled", 20, "ask_once", ask("c"))
        for task_id in groups["cancelled"]:
            assert client.cancel(task_id).status == 200
        create("held", 4, "ask_held", ask("h"))
        ended = groups["done"] + groups["failed"] + groups["tool_error"]
        watch.wait_all("completed", "failed", timeout=40, task_ids=ended)
        watch.wait_all("input_required", timeout=40, task_ids=groups["parked"] + groups["held"])
        with stack.redis_client() as r:
            parked_refs = [KEYS.task(task_ref(t)) for t in groups["parked"]]
            wait_until(
                lambda: all(r.hget(key, "parked") == "1" for key in parked_refs),
                timeout=40,
                message="60 tasks parked",
            )
        # Long enough that the 32 queued behind them are still queued when counted, however
        # slowly a loaded machine creates and polls the 200.
        create("working", 4, "slow_compute", lambda i: {"seconds": 15, "label": f"w{i}"})
        wait_until(
            lambda: all(stack.task_hash(task_ref(t))["runs"] == "1" for t in groups["working"]),
            timeout=20,
            message="the 4 slow tasks hold the default queue's 4 slots",
        )
        create("queued", 32, "slow_compute", lambda i: {"seconds": 0, "label": f"q{i}"})
        acknowledged = [t for ids in groups.values() for t in ids]
        assert len(acknowledged) == MIX == 200

        watch.poll()
        before = watch.statuses()
        held_parked = [stack.task_hash(task_ref(t))["parked"] for t in groups["held"]]
        queued_runs = [stack.task_hash(task_ref(t))["runs"] for t in groups["queued"]]
        summary = {s: sum(1 for v in before.values() if v == s) for s in set(before.values())}
        print(
            f"\n[200 tasks] before the restart ({time.monotonic() - started:.1f}s in): {summary}; "
            f"held parked={held_parked}; queued never claimed: {queued_runs.count('0')}/32"
        )
        assert set(held_parked) == {"0"}, "the held runs wait in their worker slot"
        assert queued_runs.count("0") >= 25, "most of the queued tasks wait behind busy workers"

        restart_at = time.monotonic()
        stack.stop_redis()
        # Down until every client gave up: the web tier answers 503, every worker's consumer
        # failed to reconnect, and the 8 runs in progress died of it (their Redis retries ran out).
        _unavailable(client.get(acknowledged[0]))
        _wait_until_everyone_noticed(stack, slots, groups)
        stack.start_redis_again()
        downtime = time.monotonic() - restart_at

        # Nothing acknowledged is lost: every taskId still reads.
        wait_until(lambda: client.get(acknowledged[0]).status == 200, timeout=20, interval=0.1)
        lost = [t for t in acknowledged if "result" not in client.get(t).body]
        watch.poll()
        print(f"[200 tasks] Redis down for {downtime:.2f}s; lost after restart: {len(lost)}/200")
        assert not lost, f"{len(lost)} acknowledged tasks are gone"
        for task_id, status in before.items():
            if status in {"completed", "failed", "cancelled"}:
                assert watch.last[task_id]["status"] == status, "terminal states are kept"

        # Answer everything that waits (parked and held), then everything ends.
        to_answer = groups["parked"] + groups["held"]
        watch.wait_all("input_required", timeout=30, task_ids=to_answer)
        for task_id in to_answer:
            (key,) = watch.keys[task_id]
            assert client.update(task_id, {key: ACCEPT}).status == 200
        watch.wait_all("completed", "failed", "cancelled", timeout=60)
        finished = time.monotonic() - restart_at
        final = watch.statuses()
        summary = {s: sum(1 for v in final.values() if v == s) for s in set(final.values())}
        print(f"[200 tasks] all terminal {finished:.1f}s after the restart: {summary}")
        runs = {g: [stack.task_hash(task_ref(t))["runs"] for t in groups[g]] for g in RUNNING}
        print(f"[200 tasks] runs of the tasks that were running at the restart: {runs}")

    expected = {"done": "completed", "failed": "failed", "tool_error": "completed"}
    expected |= {"parked": "completed", "cancelled": "cancelled", "held": "completed"}
    expected |= {"working": "completed", "queued": "completed"}
    for group, status in expected.items():
        wrong = {t[:8]: final[t] for t in groups[group] if final[t] != status}
        assert not wrong, f"{group}: expected {status}, got {wrong}"
    for task_id in groups["parked"] + groups["held"]:
        assert len(watch.keys[task_id]) == 1, "asked once"
        assert text_of(watch.last[task_id]["result"]).endswith(": yes")
    for task_id in groups["working"]:
        assert text_of(watch.last[task_id]["result"]).endswith("computed in 15s")
    for task_id in groups["tool_error"]:
        assert watch.last[task_id]["result"].get("isError") is True
    assert all(child.alive and child.popen.pid == pid for child, pid in processes), "no restarts"
    assert set(open_gauges(stack).values()) == {0}, open_gauges(stack)


def _wait_until_everyone_noticed(
    stack: Stack, slots: dict[str, int], groups: dict[str, list[str]]
) -> None:
    """Every worker's runs in progress died of the outage, and every worker noticed it."""
    tools = {"working": "slow_compute", "held": "ask_held"}
    running = {task_ref(t): tools[g] for g in RUNNING for t in groups[g]}

    def everyone_noticed() -> bool:
        logs = [w.log() for w in stack.workers]
        died = all(any(f"[{ref}] raised unexpected" in log for log in logs) for ref in running)
        # The consumer's reconnect is mcpq's own (mcpq.workers.broker_watch), bounded in time.
        return died and all("cannot reach the broker at" in log for log in logs)

    try:
        wait_until(everyone_noticed, timeout=20, interval=0.1, message="the outage noticed")
    except TimeoutError:
        pytest.fail(_outage_not_noticed(stack, slots, running))


def _outage_not_noticed(stack: Stack, slots: dict[str, int], running: dict[str, str]) -> str:
    """Why not every worker noticed the outage: for each worker that did not log it, the runs it
    held (its prefetch in use: kombu's Redis channel sends BRPOP only while it has credit, so with
    every slot held none was in flight and only the remote-control subscription could see the
    loss), which of them died of it, and where its event loop was."""
    logs = {worker.name: worker.log() for worker in stack.workers}
    died = {ref for ref in running if any(f"[{ref}] raised unexpected" in v for v in logs.values())}
    alive = [ref[:12] for ref in running if ref not in died]
    lines = [f"not every worker noticed the outage (runs that did not die of it: {alive}):"]
    for worker in stack.workers:
        log = logs[worker.name]
        if "cannot reach the broker at" in log:
            continue
        held = [
            ref for ref, tool in running.items() if worker in stack.worker_that_received(tool, ref)
        ]
        ended = sum(ref in died for ref in held)
        full = len(held) >= slots[worker.name]
        lines.append(
            f"- {worker.name}: Celery's 'Connection to broker lost' "
            f"{'logged' if 'Connection to broker lost' in log else 'not logged'}; prefetch in use "
            f"{len(held)}/{slots[worker.name]} ({ended} of those runs died of the outage); "
            f"BRPOP in flight at the loss: {'no (no credit)' if full else 'likely (credit left)'}; "
            f"its event loop (main thread):\n{main_thread_stack(worker)}"
        )
    return "\n".join(lines)


# -- a cancel the store lost after Celery's revoke went out ---------------------------------------
@pytest.mark.timeout(90)
def test_a_cancel_lost_with_the_store_leaves_no_task_stuck_as_revoked(
    make_stack: MakeStack, tmp_path: Path
) -> None:
    """``tasks/cancel`` writes ``cancelled``, then broadcasts Celery's revoke of the task's ref,
    which every worker remembers for hours. Here the store then loses the cancel, as a failover
    to a replica that had not received it would (Redis killed, started again from a snapshot
    taken just before the cancel): the task is ``working`` again, and the runs the sweeper sends
    for it must run, not be dropped as revoked with the task left ``working`` for good; the
    step done before the cancel is not done again."""
    stack = make_stack(workers=1)
    effects = tmp_path / "effects.txt"
    with McpClient(stack.url(0)) as client:
        args = {"path": str(effects), "seconds": 4}
        task_id = client.create_task("step_then_sleep", args)["taskId"]
        ref = task_ref(task_id)
        wait_until(
            lambda: client.task(task_id).get("statusMessage") == "stepped",
            timeout=20,
            message="the step done and the tool asleep",
        )
        with stack.redis_client() as r:
            r.save()  # what the replica holds: the task working, its step saved
        assert client.cancel(task_id).status == 200
        stack.worker.wait_for_log(f"Tasks flagged as revoked: {ref}", timeout=10)
        assert stack.worker.wait_for_run_end(ref, timeout=10) == "cancelled"

        assert stack.redis_server is not None
        stack.redis_server.kill()  # no save on the way down: the cancel is lost
        stack.start_redis_again()
        wait_until(lambda: client.get(task_id).status == 200, timeout=20, interval=0.1)
        assert client.task(task_id)["status"] == "working", "the store lost the cancel"

        done = client.wait_for_status(task_id, "completed", timeout=45, interval=0.2)
    assert text_of(done["result"]) == "effect written (line 1), slept 4s"
    assert effects.read_text(encoding="utf-8").splitlines() == ["effect"]
    log = stack.worker.log()
    print(f"\n[lost cancel] runs of the task: {stack.worker.run_endings(ref)}")
    # The sweeper's send carried a Celery id of its own (shared.jobs.job_id), not the revoked ref.
    assert f"Task step_then_sleep[{ref}-" in log
    assert f"Discarding revoked task: step_then_sleep[{ref}-" not in log
