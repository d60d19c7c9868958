"""A worker whose ``MCPQ_DATA_KEYS`` cannot open a task's payloads never ends the task.

In a rolling deploy of a new data key, a worker not yet given the key may take a run of a task
sealed with it. That worker must not fail the task (nor run it): its claim is left to expire,
the sweeper sends the run again, and a worker that holds the key completes it. A key nobody
holds ends the task ``failed`` after ``MCPQ_MAX_RUNS`` such claims, never ``working`` forever.
"""

from __future__ import annotations

import time

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.sealing import new_data_key
from mcpq.shared.store import task_ref
from tests.faults.support import MakeStack

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

KNOBS = {"MCPQ_LEASE_S": "2", "MCPQ_SWEEP_INTERVAL_S": "1", "MCPQ_MAX_RUNS": "3"}


def test_a_worker_without_the_key_leaves_the_task_to_one_with_it(make_stack: MakeStack) -> None:
    stack = make_stack(workers=0, env=KNOBS)
    stranger = stack.start_worker(MCPQ_DATA_KEYS=new_data_key())  # not the web's key
    with McpClient(stack.url()) as client:
        task_id = client.create_task("slow_compute", {"seconds": 0, "label": "sealed"})["taskId"]
        ref = task_ref(task_id)
        wait_until(
            lambda: "could not be decrypted" in stranger.log(),
            timeout=20,
            message="the keyless worker took the run",
        )
        assert f"Task slow_compute[{ref}] succeeded: 'completed'" not in stranger.log()
        time.sleep(0.5)
        assert client.task(task_id)["status"] == "working", "the keyless worker ended the task"
        stack.stop_child(stranger)
        stack.start_worker()  # the deployment's own key
        done = wait_until(
            lambda: (t := client.task(task_id))["status"] != "working" and t,
            timeout=30,
            interval=0.1,
            message="the task ended",
        )
        assert done["status"] == "completed", done
        assert text_of(done["result"]) == "sealed: computed in 0s"


def test_a_key_nobody_holds_fails_the_task_after_max_runs(make_stack: MakeStack) -> None:
    # The task is sealed with `dropped`, a key the workers no longer hold (the web still does,
    # so it can create the task; both hold `current`, which seals the failure).
    dropped, current = new_data_key(), new_data_key()
    stack = make_stack(workers=0, env={**KNOBS, "MCPQ_DATA_KEYS": f"{dropped},{current}"})
    stack.start_worker(MCPQ_DATA_KEYS=current)
    with McpClient(stack.url()) as client:
        task_id = client.create_task("slow_compute", {"seconds": 0})["taskId"]
        done = wait_until(
            lambda: (t := client.task(task_id))["status"] != "working" and t,
            timeout=60,
            interval=0.2,
            message="the task ended",
        )
    assert done["status"] == "failed", done
    assert "MCPQ_MAX_RUNS" in done.get("statusMessage", ""), done
