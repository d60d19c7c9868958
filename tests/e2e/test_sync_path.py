"""``tools/call`` answered synchronously: no opt-in, ``never`` tools, and MRTR rounds."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.protocol import TASKS_EXTENSION

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"}


def test_slow_compute_without_opt_in_is_a_plain_call_tool_result(client: McpClient) -> None:
    reply = client.call_tool("slow_compute", {"seconds": 0.5, "label": "sync"}, tasks=False)
    result = reply.result
    assert result["resultType"] == "complete"
    assert not TASK_FIELDS & set(result)
    assert result.get("isError") in (None, False)
    assert text_of(result) == "sync: computed in 0.5s"


def test_greet_with_opt_in_is_a_plain_result(client: McpClient) -> None:
    result = client.call_tool("greet", {"name": "Ada"}, tasks=True).result
    assert result["resultType"] == "complete"
    assert not TASK_FIELDS & set(result)
    assert text_of(result) == "Hello, Ada!"


def test_legacy_task_param_is_ignored(client: McpClient) -> None:
    params = {"name": "greet", "arguments": {"name": "Bob"}, "task": {"ttl": 60000}}
    result = client.request("tools/call", params, tasks=True).result
    assert result["resultType"] == "complete"
    assert text_of(result) == "Hello, Bob!"


def test_required_task_tool_without_opt_in_is_missing_capability(client: McpClient) -> None:
    reply = client.call_tool("failing_job", {}, tasks=False)
    assert reply.status == 400, reply
    assert reply.error["code"] == -32021
    assert reply.error["data"]["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}


def test_confirm_delete_without_opt_in_goes_through_mrtr(client: McpClient) -> None:
    first = client.call_tool("confirm_delete", {"filename": "a.txt"}, tasks=False).result
    assert first["resultType"] == "input_required"
    assert isinstance(first["requestState"], str) and first["requestState"]
    ((key, request),) = first["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert "a.txt" in request["params"]["message"]

    final = client.call_tool(
        "confirm_delete",
        {"filename": "a.txt"},
        tasks=False,
        input_responses={key: {"action": "accept", "content": {"confirm": True}}},
        request_state=first["requestState"],
    ).result
    assert final["resultType"] == "complete"
    assert "requestState" not in final and "inputRequests" not in final
    assert text_of(final) == "Deleted a.txt"


def test_mrtr_request_state_is_bound_to_the_arguments(client: McpClient) -> None:
    first = client.call_tool("confirm_delete", {"filename": "b.txt"}, tasks=False).result
    ((key, _request),) = first["inputRequests"].items()
    reply = client.call_tool(
        "confirm_delete",
        {"filename": "other.txt"},
        tasks=False,
        input_responses={key: {"action": "accept", "content": {"confirm": True}}},
        request_state=first["requestState"],
    )
    assert reply.status == 400, reply
    assert reply.error["code"] == -32602


def test_mrtr_without_elicitation_capability_is_refused(client: McpClient) -> None:
    reply = client.call_tool(
        "confirm_delete", {"filename": "c.txt"}, tasks=False, elicitation=False
    )
    # The call streams (the client accepts SSE): the status went out with the first byte, the
    # error is the stream's last message.
    assert reply.status == 200, reply
    assert reply.error["code"] == -32021
    assert "elicitation" in reply.error["data"]["requiredCapabilities"]


def test_abandoned_sync_call_stops_its_run(stack: Stack) -> None:
    before = set(stack.worker.log().splitlines())
    with McpClient(stack.url(0)) as impatient:
        impatient.http.timeout = httpx.Timeout(1.0, connect=5.0)
        with pytest.raises(httpx.ReadTimeout):
            impatient.call_tool("slow_compute", {"seconds": 6, "label": "abandoned"}, tasks=False)
    received = wait_until(
        lambda: next(
            (
                ln
                for ln in stack.worker.log().splitlines()
                if ln not in before and "slow_compute[" in ln and "received" in ln
            ),
            None,
        ),
        timeout=5,
        message="the hidden run",
    )
    ref = received.split("slow_compute[", 1)[1].split("]", 1)[0]
    try:
        assert stack.worker.wait_for_run_end(ref, timeout=3) == "cancelled"
    finally:  # leave the worker slot free for the next tests
        stack.worker.wait_for_run_end(ref, timeout=15)


def test_a_waiting_sync_call_does_not_block_other_requests(stack: Stack) -> None:
    # Given one web process (one event loop) and a synchronous call that waits 3 s for its worker
    url = stack.url(0)
    with McpClient(url) as waiting, McpClient(url) as other, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            waiting.call_tool, "slow_compute", {"seconds": 3, "label": "held"}, tasks=False
        )
        wait_until(lambda: pending.running(), timeout=5, message="the sync call to start")
        # When other clients call meanwhile, then each is answered at once
        task_id = other.create_task("slow_compute", {"seconds": 0, "label": "meanwhile"})["taskId"]
        latencies = [other.get(task_id).elapsed_s for _ in range(20)]
        assert not pending.done(), "the sync call should still be waiting"
        assert max(latencies) < 1.0, latencies
        # And the waiting call still gets its result
        assert text_of(pending.result(timeout=30).result) == "held: computed in 3s"
