"""Recovery: a task survives the crash of the worker that was running it.

The run's lease (``MCPQ_LEASE_S=3``) stops being renewed when the worker dies; the sweeper of the
replacement worker finds the expired lease and enqueues the run again, and the task completes.
"""

from __future__ import annotations

import time

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.shared.store import task_ref
from tests.support import stacks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: On both brokers (``tests/e2e/conftest.py``): Redis and RabbitMQ.
BROKERS = stacks.BROKERS
POOLS = stacks.POOLS  # and on both pool kinds: the worker's side differs


def test_task_survives_a_worker_crash(client: McpClient, stack: Stack) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 2, "label": "survivor"})["taskId"]
    client.wait_for_message(task_id, "computing survivor", timeout=15)  # the run started
    assert stack.task_hash(task_ref(task_id)).get("runs") == "1"

    crashed_at = time.monotonic()
    stack.kill_child(stack.worker)
    assert client.task(task_id)["status"] == "working"
    stack.start_worker()

    done = client.wait_for_status(task_id, "completed", timeout=45, interval=0.1)
    print(f"\ntask completed {time.monotonic() - crashed_at:.1f}s after its worker was SIGKILLed")
    assert text_of(done["result"]) == "survivor: computed in 2s"
    assert stack.task_hash(task_ref(task_id)).get("runs") == "2", "exactly one recovered run"
