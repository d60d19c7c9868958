"""Task lifecycle against the real stack: create, poll, outcomes, cancellation, error codes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import descendant_pids, pid_alive, wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.store import task_ref
from tests.support import stacks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

#: On both brokers (``tests/e2e/conftest.py``): Redis and RabbitMQ.
BROKERS = stacks.BROKERS
POOLS = stacks.POOLS  # and on both pool kinds: the worker's side differs

ACK_KEYS = {"resultType", "_meta"}


def _wait_running(client: McpClient, task_id: str, label: str, timeout: float = 15.0) -> None:
    """Until a worker has claimed the task and the tool reported ``computing <label>``."""
    client.wait_for_message(task_id, f"computing {label}", timeout=timeout)


def _assert_ack(result: dict[str, object]) -> None:
    assert result["resultType"] == "complete"
    assert set(result) <= ACK_KEYS, f"an ack carries no task fields: {result}"


def test_slow_compute_task_completes_with_content(client: McpClient) -> None:
    created = client.create_task("slow_compute", {"seconds": 1, "label": "happy"})
    task_id = created["taskId"]
    assert {"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
    assert not {"result", "error", "inputRequests"} & set(created)

    # Durable create: a tasks/get sent right after the CreateTaskResult resolves.
    first = client.get(task_id)
    assert first.status == 200, first
    assert first.result["taskId"] == task_id
    assert first.result["status"] == "working"
    assert not {"result", "error", "inputRequests"} & set(first.result)

    done = client.wait_for_status(task_id, "completed", timeout=15)
    assert done["createdAt"] == created["createdAt"]
    assert "error" not in done and "inputRequests" not in done
    result = done["result"]
    assert result.get("isError") in (None, False)
    assert result["content"], result
    assert text_of(result) == "happy: computed in 1s"


def test_failing_job_completes_with_is_error(client: McpClient) -> None:
    task_id = client.create_task("failing_job")["taskId"]
    done = client.wait_for_status(task_id, "completed", timeout=15)
    assert "error" not in done
    assert done["result"]["isError"] is True
    assert "failing_job failed on purpose" in text_of(done["result"])


def test_protocol_error_job_fails_with_error_and_status_message(client: McpClient) -> None:
    task_id = client.create_task("protocol_error_job")["taskId"]
    done = client.wait_for_status(task_id, "failed", timeout=15)
    assert "result" not in done and "inputRequests" not in done
    error = done["error"]
    assert isinstance(error["code"], int) and error["code"] == -32603
    assert isinstance(error["message"], str) and error["message"]
    assert done["statusMessage"], "a failed task SHOULD carry a statusMessage"
    assert "protocol error" in done["statusMessage"]


def test_cancel_running_task_stops_within_2s(client: McpClient, stack: Stack) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 60, "label": "doomed"})["taskId"]
    _wait_running(client, task_id, "doomed")

    started = time.monotonic()
    ack = client.cancel(task_id)
    _assert_ack(ack.result)
    cancelled = client.wait_for_status(task_id, "cancelled", timeout=2)
    seen_cancelled_s = time.monotonic() - started
    line = stack.worker.wait_for_run_end(task_ref(task_id), timeout=2.5)
    run_ended_s = time.monotonic() - started
    print(
        f"\ncancel of a running task: status cancelled after {seen_cancelled_s * 1000:.0f} ms, "
        f"worker run ended after {run_ended_s * 1000:.0f} ms ({line})"
    )
    assert line == "cancelled"
    assert run_ended_s <= 2.0
    assert not {"result", "error", "inputRequests"} & set(cancelled)
    assert client.task(task_id)["status"] == "cancelled"


def test_cancel_queued_task_never_runs(client: McpClient, stack: Stack, tmp_path: Path) -> None:
    # Fill both worker slots, so the next task stays queued in Redis.
    fillers = [
        client.create_task("slow_compute", {"seconds": 60, "label": f"filler{i}"})["taskId"]
        for i in range(2)
    ]
    for i, filler in enumerate(fillers):
        _wait_running(client, filler, f"filler{i}")
    marker = tmp_path / "queued-task-ran"
    queued = client.create_task("touch_then_sleep", {"path": str(marker), "seconds": 0})["taskId"]
    assert client.task(queued)["status"] == "working"
    assert stack.task_hash(task_ref(queued)).get("runs") == "0", "no worker may have claimed it yet"

    _assert_ack(client.cancel(queued).result)
    assert client.task(queued)["status"] == "cancelled"

    # Free the slots: the queued message now reaches the worker, which must not run it.
    for filler in fillers:
        _assert_ack(client.cancel(filler).result)
    ref = task_ref(queued)
    line = wait_until(
        lambda: next(
            (
                ln
                for ln in stack.worker.log().splitlines()
                if f"[{ref}]" in ln and any(w in ln for w in ("revoked", "succeeded", "ignored"))
            ),
            None,
        ),
        timeout=10,
        message="the queued task's message handled by the worker",
    )
    print(f"\nqueued task after cancel: {line.strip()}")
    assert "revoked" in line or "'terminal'" in line, line
    assert not marker.exists(), "the cancelled task ran"
    assert stack.task_hash(task_ref(queued)).get("runs") == "0"
    final = client.task(queued)
    assert final["status"] == "cancelled"
    assert not {"result", "error"} & set(final)
    for filler in fillers:
        stack.worker.wait_for_run_end(task_ref(filler), timeout=5)


@pytest.mark.parametrize(
    ("tool", "arguments", "terminal"),
    [
        ("slow_compute", {"seconds": 0, "label": "quick"}, "completed"),
        ("protocol_error_job", {}, "failed"),
    ],
)
def test_cancel_terminal_task_acks_and_changes_nothing(
    client: McpClient, tool: str, arguments: dict[str, object], terminal: str
) -> None:
    task_id = client.create_task(tool, arguments)["taskId"]
    done = client.wait_for_status(task_id, terminal, timeout=15)
    _assert_ack(client.cancel(task_id).result)
    after = client.task(task_id)
    after.pop("_meta", None)
    done.pop("_meta", None)
    assert after == done


def test_unknown_task_id_is_invalid_params(client: McpClient) -> None:
    unknown = "no-such-task-" + "x" * 30
    for reply in (
        client.get(unknown),
        client.update(unknown, {"k": {"action": "accept", "content": {}}}),
        client.cancel(unknown),
    ):
        assert reply.status == 400, reply
        assert reply.error["code"] == -32602, reply


def test_mcp_name_mismatch_is_header_mismatch(client: McpClient) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 0, "label": "named"})["taskId"]
    for reply in (
        client.get(task_id, name="a-different-task-id"),
        client.cancel(task_id, name="a-different-task-id"),
    ):
        assert reply.status == 400, reply
        assert reply.error["code"] == -32020, reply
    done = client.wait_for_status(task_id, "completed", timeout=15)
    assert text_of(done["result"]) == "named: computed in 0s", "the rejected cancel did nothing"


def test_tasks_methods_without_the_opt_in_are_rejected(client: McpClient) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 0, "label": "gate"})["taskId"]
    reply = client.get(task_id, tasks=False)
    assert reply.status == 400, reply
    assert reply.error["code"] == -32021
    assert reply.error["data"]["requiredCapabilities"] == {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }


def _stubborn_run_let_go(client: McpClient, stack: Stack, task_id: str) -> None:
    """The io pool's way (``mcpq.workers.execution``): after the grace the tool's thread gets
    ``TaskCancelled`` raised in it, and the job lets go of the run at once: the run ends
    ``abandoned``, the pool's slot serves the next job, the process and its other runs go on."""
    needle = f'"task":"{task_hash(task_ref(task_id))}"'
    started = time.monotonic()
    assert client.cancel(task_id).result["resultType"] == "complete"
    assert client.wait_for_status(task_id, "cancelled", timeout=2)
    # MCPQ_CANCEL_GRACE_S=1, then the lease keeper lets go of the run.
    wait_until(
        lambda: any(
            needle in line and '"transition":"abandoned"' in line
            for line in stack.worker.log().splitlines()
        ),
        timeout=10,
        message="the worker letting go of the stubborn run",
    )
    print(f"\nstubborn run let go of {time.monotonic() - started:.2f}s after the cancel")
    assert client.task(task_id)["status"] == "cancelled"
    assert text_of(client.call_tool("greet", {"name": "pool"}).result) == "Hello, pool!"


def test_cancel_of_a_tool_that_ignores_cancellation_terminates_it(
    client: McpClient, stack: Stack
) -> None:
    task_id = client.create_task("stubborn_sleep", {"seconds": 60})["taskId"]
    ref = task_ref(task_id)
    stack.worker.wait_for_log(f"stubborn_sleep[{ref}] received", timeout=10)
    wait_until(lambda: stack.task_hash(ref).get("runs") == "1", timeout=10, message="claimed")
    if "custom" in stack.worker.popen.args:  # mcpq's io pool (threads): no process to kill
        _stubborn_run_let_go(client, stack, task_id)
        return
    pool_before = descendant_pids(stack.worker.popen.pid)
    stack.worker.remember_descendants()

    started = time.monotonic()
    assert client.cancel(task_id).result["resultType"] == "complete"
    assert client.wait_for_status(task_id, "cancelled", timeout=2)
    # MCPQ_CANCEL_GRACE_S=1: the heartbeat then has Celery SIGKILL the pool process.
    line = wait_until(
        lambda: next(
            (ln for ln in stack.worker.log().splitlines() if ref in ln and "erminat" in ln), None
        ),
        timeout=10,
        message="the worker terminating the stubborn run",
    )
    killed = wait_until(
        lambda: [pid for pid in pool_before if not pid_alive(pid)],
        timeout=5,
        message="the pool process running the stubborn tool to die",
    )
    print(
        f"\nstubborn run: pool process {killed} killed {time.monotonic() - started:.2f}s after "
        f"the cancel ({line.strip()[:200]})"
    )
    assert len(killed) == 1
    assert client.task(task_id)["status"] == "cancelled"
    # The pool replaces the killed process (before the test ends: a process forked later would
    # look like a leftover of the next test), and the worker still runs tools.
    wait_until(
        lambda: (
            len([pid for pid in descendant_pids(stack.worker.popen.pid) if pid_alive(pid)])
            >= len(pool_before)
        ),
        timeout=15,
        message="the pool back to full strength",
    )
    assert text_of(client.call_tool("greet", {"name": "pool"}).result) == "Hello, pool!"
