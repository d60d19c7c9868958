"""Two web replicas on one Redis: any replica serves any task (no sticky routing needed)."""

from __future__ import annotations

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


def test_create_on_a_poll_and_cancel_on_b(client: McpClient, client_b: McpClient) -> None:
    assert client.url != client_b.url
    created = client.create_task("slow_compute", {"seconds": 60, "label": "replicated"})
    task_id = created["taskId"]

    seen_on_b = client_b.get(task_id)  # durable create is visible from the other replica at once
    assert seen_on_b.status == 200, seen_on_b
    assert seen_on_b.result["status"] == "working"
    assert seen_on_b.result["createdAt"] == created["createdAt"]
    # The run reported progress, read through replica B.
    client_b.wait_for_message(task_id, "computing replicated", timeout=15)

    ack = client_b.cancel(task_id)
    assert ack.result["resultType"] == "complete"
    on_a = client.wait_for_status(task_id, "cancelled", timeout=2)
    assert on_a == {**client_b.task(task_id), "_meta": on_a["_meta"]}


def test_mrtr_rounds_on_different_replicas(client: McpClient, client_b: McpClient) -> None:
    first = client.call_tool("confirm_delete", {"filename": "x.txt"}, tasks=False).result
    assert first["resultType"] == "input_required"
    ((key, _request),) = first["inputRequests"].items()
    final = client_b.call_tool(
        "confirm_delete",
        {"filename": "x.txt"},
        tasks=False,
        input_responses={key: {"action": "accept", "content": {"confirm": True}}},
        request_state=first["requestState"],
    ).result
    assert text_of(final) == "Deleted x.txt"


def test_in_task_input_answered_through_the_other_replica(
    client: McpClient, client_b: McpClient
) -> None:
    task_id = client.create_task("confirm_delete", {"filename": "y.txt"})["taskId"]
    task = client_b.wait_for_status(task_id, "input_required", timeout=15)
    ((key, _request),) = task["inputRequests"].items()
    ack = client_b.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
    assert ack.result["resultType"] == "complete"
    done = client.wait_for_status(task_id, "completed", timeout=15)
    assert text_of(done["result"]) == "Deleted y.txt"
