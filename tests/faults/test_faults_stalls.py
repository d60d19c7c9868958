"""Runs that would otherwise never end: a hung tool, and a message that no worker ever starts.

- A tool blocked forever outside its context (here ``hang_forever``, ``max_run_s=2``) keeps its
  lease alive through the heartbeat thread, so lease expiry never recovers it. The watchdog fails
  the task with a clear message after ``max_run_s`` and has Celery kill the pool process; the
  pool replaces it, so the worker's single slot runs the next task.
- A worker killed after it took a message from the queue and before its run claimed the task
  leaves that message in kombu's ``unacked`` set until the visibility timeout (a week). The
  sweeper sends the run again after ``MCPQ_REQUEUE_UNSTARTED_S``. The "worker" here is a plain
  kombu consumer that takes the message without acking and is then SIGKILLed: the same state a
  worker killed in that window leaves behind, made on purpose.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.runtime.processes import descendant_pids, pid_alive, wait_until
from mcpq.shared.store import task_ref
from tests.faults.support import MakeStack, lines

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]


def test_a_hung_tool_fails_after_max_run_s_and_its_slot_is_reused(
    make_stack: MakeStack, tmp_path: Path
) -> None:
    # Given a worker with a single pool slot
    stack = make_stack(workers=0)
    worker = stack.start_worker(concurrency=1)
    pool_before = descendant_pids(worker.popen.pid)
    calls = tmp_path / "calls"
    with McpClient(stack.url(0)) as client:
        # when a tool hangs outside its context, with another task queued behind it,
        hung = client.create_task("hang_forever", {"calls": str(calls)})["taskId"]
        queued = client.create_task("slow_compute", {"seconds": 0, "label": "next"})["taskId"]
        hanging = client.wait_for_message(hung, "about to hang", timeout=15)  # its last ctx call

        # then the task fails with a message that says why, max_run_s (2 s) after the tool's
        # last context call (both instants as the store recorded them, on Redis's clock),
        failed = client.wait_for_status(hung, "failed", timeout=15, interval=0.1)
        took = _seconds(failed["lastUpdatedAt"]) - _seconds(hanging["lastUpdatedAt"])
        print(f"\n[hung tool] last ctx call -> failed: {took:.2f}s (max_run_s=2)")
        assert 2 <= took < 4
        assert "max_run_s" in failed["statusMessage"]
        assert failed["error"]["code"] == -32603
        assert "hang_forever" in failed["error"]["message"]

        # its pool process is killed and replaced, and the one slot runs the queued task.
        killed = wait_until(
            lambda: [pid for pid in pool_before if not pid_alive(pid)],
            timeout=10,
            message="the hung pool process to die",
        )
        assert len(killed) == 1
        done = client.wait_for_status(queued, "completed", timeout=15, interval=0.1)
        assert text_of(done["result"]) == "next: computed in 0s"
        assert client.task(hung)["status"] == "failed"  # the kill changed nothing after
        assert lines(calls) == ["call"]  # failed is terminal: the hung tool never ran again


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


THIEF = """
import sys, time
from kombu import Connection, Exchange, Queue

url, name = sys.argv[1], sys.argv[2]
with Connection(url) as conn:
    queue = Queue(name, Exchange(name), routing_key=name)

    def take(body, message):  # never acked: the message moves to kombu's unacked set
        print("taken", flush=True)
        time.sleep(3600)

    with conn.Consumer(queue, callbacks=[take], accept=["json"], prefetch_count=1):
        conn.drain_events(timeout=30)
"""


def test_a_message_taken_by_a_worker_that_died_before_starting_it_is_sent_again(
    make_stack: MakeStack,
) -> None:
    # Given no worker yet, runs re-sent when not started within 3 s of being sent
    stack = make_stack(workers=0, env={"MCPQ_REQUEUE_UNSTARTED_S": "3"})
    with McpClient(stack.url(0)) as client, stack.redis_client() as r:
        task_id = client.create_task("slow_compute", {"seconds": 0, "label": "lost"})["taskId"]
        assert r.llen("mcpq") == 1

        # when a consumer takes its message and is killed before it starts the run,
        with subprocess.Popen(
            [sys.executable, "-c", THIEF, stack.redis_url, "mcpq"],
            stdout=subprocess.PIPE,
            text=True,
        ) as thief:
            try:
                assert thief.stdout is not None and thief.stdout.readline().strip() == "taken"
            finally:
                thief.send_signal(signal.SIGKILL)
        assert r.llen("mcpq") == 0
        assert r.hlen("unacked") == 1  # kombu keeps it there until the visibility timeout

        # then a worker started afterwards still runs the task, from the sweeper's re-send.
        stack.start_worker()
        done = client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)
        assert text_of(done["result"]) == "lost: computed in 0s"
        assert stack.task_hash(task_ref(task_id))["runs"] == "1"
        assert r.hlen("unacked") == 1  # kombu never gave the stolen copy back
