"""In-task input: ``input_required`` on ``tasks/get``, answers through ``tasks/update``.

The stack runs with ``MCPQ_INPUT_HOLD_S=3``: a worker keeps the run waiting in its slot for three
seconds (the hot path: an answer wakes it at once), then parks the task and frees the slot (an
answer then re-enqueues the run, which replays the tool up to the answered question).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import TERMINAL, task_ref
from tests.support import stacks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

#: On both brokers (``tests/e2e/conftest.py``): Redis and RabbitMQ.
BROKERS = stacks.BROKERS
POOLS = stacks.POOLS  # and on both pool kinds: the worker's side differs

ACCEPT_DELETE = {"action": "accept", "content": {"confirm": True}}


def _key_for(requests: dict[str, Any], word: str) -> str:
    (key,) = [k for k, r in requests.items() if word in r["params"]["message"]]
    return key


def _answer_and_time(client: McpClient, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    """Send ``tasks/update``, then poll tightly until ``completed``; print the latencies."""
    sent = time.monotonic()
    ack = client.update(task_id, responses)
    acked = time.monotonic()
    assert ack.result["resultType"] == "complete"
    assert set(ack.result) <= {"resultType", "_meta"}
    done = client.wait_for_status(task_id, "completed", timeout=15, interval=0.005)
    finished = time.monotonic()
    timing = {
        "ack_ms": (acked - sent) * 1000,
        "ack_to_completed_ms": (finished - acked) * 1000,
        "send_to_completed_ms": (finished - sent) * 1000,
    }
    done["_timing"] = timing
    return done


def test_multi_input_partial_answers(client: McpClient) -> None:
    task_id = client.create_task("multi_input")["taskId"]
    task = client.wait_for_status(task_id, "input_required", timeout=15)
    requests = task["inputRequests"]
    assert len(requests) == 2, requests
    assert {r["method"] for r in requests.values()} == {"elicitation/create"}
    color, size = _key_for(requests, "color"), _key_for(requests, "size")
    assert "result" not in task and "error" not in task

    ack = client.update(task_id, {color: {"action": "accept", "content": {"color": "teal"}}})
    assert ack.result["resultType"] == "complete"
    after_first = client.task(task_id)
    assert after_first["status"] == "input_required"
    assert set(after_first["inputRequests"]) == {size}, "only the unanswered key is outstanding"
    assert after_first["inputRequests"][size] == requests[size]

    # An unknown key is ignored and acknowledged; nothing changes.
    stray = client.update(task_id, {"never-issued": {"action": "accept", "content": {}}})
    assert stray.result["resultType"] == "complete"
    assert set(client.task(task_id)["inputRequests"]) == {size}

    done = _answer_and_time(
        client, task_id, {size: {"action": "accept", "content": {"size": "XL"}}}
    )
    text = text_of(done["result"])
    assert "color=teal" in text and "size=XL" in text, text
    assert "inputRequests" not in done


def test_confirm_delete_accept_hot_path_latency(client: McpClient, stack: Stack) -> None:
    task_id = client.create_task("confirm_delete", {"filename": "report.txt"})["taskId"]
    task = client.wait_for_status(task_id, "input_required", timeout=15)
    ((key, request),) = task["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert "report.txt" in request["params"]["message"]
    assert request["params"]["requestedSchema"]["required"] == ["confirm"]

    done = _answer_and_time(client, task_id, {key: ACCEPT_DELETE})
    timing = done["_timing"]
    print(
        "\nupdate->completed latency (worker still holding the run): "
        f"ack {timing['ack_ms']:.1f} ms, ack->completed {timing['ack_to_completed_ms']:.1f} ms, "
        f"update sent->completed {timing['send_to_completed_ms']:.1f} ms"
    )
    assert text_of(done["result"]) == "Deleted report.txt"
    runs = stack.task_hash(task_ref(task_id)).get("runs")
    assert runs == "1", "one run: the answer woke the holding run"
    assert timing["ack_to_completed_ms"] < 2000


def test_confirm_delete_accept_after_the_run_parked(client: McpClient, stack: Stack) -> None:
    task_id = client.create_task("confirm_delete", {"filename": "late.txt"})["taskId"]
    task = client.wait_for_status(task_id, "input_required", timeout=15)
    ((key, _request),) = task["inputRequests"].items()
    # The hold expires: the run ends ('parked'), the slot is free, the task stays input_required.
    ref = task_ref(task_id)
    assert stack.worker.wait_for_run_end(ref, timeout=10) == "parked"
    wait_until(lambda: stack.task_hash(ref).get("parked") == "1", timeout=5, message="parked")
    assert client.task(task_id)["status"] == "input_required"

    done = _answer_and_time(client, task_id, {key: ACCEPT_DELETE})
    timing = done["_timing"]
    print(
        "\nupdate->completed latency (parked run re-enqueued and replayed): "
        f"ack {timing['ack_ms']:.1f} ms, ack->completed {timing['ack_to_completed_ms']:.1f} ms, "
        f"update sent->completed {timing['send_to_completed_ms']:.1f} ms"
    )
    assert text_of(done["result"]) == "Deleted late.txt"
    assert stack.task_hash(ref).get("runs") == "2", "a second run replayed the tool"


def test_cancel_input_required_task_clears_its_requests(client: McpClient) -> None:
    task_id = client.create_task("confirm_delete", {"filename": "keep.txt"})["taskId"]
    task = client.wait_for_status(task_id, "input_required", timeout=15)
    ((key, _request),) = task["inputRequests"].items()
    assert client.cancel(task_id).result["resultType"] == "complete"
    cancelled = client.wait_for_status(task_id, "cancelled", timeout=2)
    assert "inputRequests" not in cancelled
    # A late answer is acknowledged and ignored: the task stays cancelled.
    assert client.update(task_id, {key: ACCEPT_DELETE}).result["resultType"] == "complete"
    assert client.task(task_id)["status"] == "cancelled"


@pytest.mark.parametrize(
    ("tool", "arguments", "elicitation", "sampling"),
    [
        ("summarize", {"text": "a long text"}, True, False),
        ("approve_deployment", {"service": "api", "version": "2"}, False, False),
    ],
    ids=["sampling-not-declared", "elicitation-not-declared"],
)
def test_in_task_input_respects_the_declared_capabilities(
    stack: Stack, tool: str, arguments: dict[str, Any], elicitation: bool, sampling: bool
) -> None:
    with McpClient(stack.url(0), elicitation=elicitation, sampling=sampling) as undeclared:
        task_id = undeclared.create_task(tool, arguments)["taskId"]
        task = undeclared.wait_for_status(
            task_id, "input_required", "completed", "failed", timeout=15
        )
        try:
            asked = {r["method"] for r in task.get("inputRequests", {}).values()}
            assert not asked, f"asked a client that cannot answer: {asked}"
            # What the spec digest recommends (12, Q13): end the task gracefully.
            assert task["status"] == "completed" and task["result"]["isError"] is True, task
        finally:
            if task["status"] not in TERMINAL:
                undeclared.cancel(task_id)


def test_an_answer_that_does_not_fit_the_schema_is_refused_and_the_task_waits(
    client: McpClient,
) -> None:
    task_id = client.create_task("approve_deployment", {"service": "api", "version": "9"})["taskId"]
    task = client.wait_for_status(task_id, "input_required", timeout=15)
    [key] = task["inputRequests"]
    refused = client.update(task_id, {key: {"action": "accept", "content": {"approve": "no"}}})
    assert refused.status == 400 and refused.error["code"] == -32602, refused
    assert "approve" in refused.error["message"] and "boolean" in refused.error["message"]
    after = client.task(task_id)
    assert after["status"] == "input_required" and set(after["inputRequests"]) == {key}
    # A fitting answer is taken: "no" as the schema says it, a boolean.
    client.update(task_id, {key: {"action": "accept", "content": {"approve": False}}})
    done = client.wait_for_status(task_id, "completed", timeout=15)
    assert "was not approved" in text_of(done["result"])
