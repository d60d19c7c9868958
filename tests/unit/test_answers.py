"""Answers are checked against their input request before they are stored (``mcpq.shared.answers``),
whichever way they arrive: ``tasks/update``, an MRTR retry, a 2025-era POSTed response."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from mcpq.shared.answers import problem
from mcpq.shared.store import Outgoing, task_ref
from mcpq.shared.tools import elicitation, sampling
from tests.unit.fakes import CONFIRM_SCHEMA, Mcp

ASK = elicitation("Approve?", CONFIRM_SCHEMA)
SAMPLE = sampling([{"role": "user", "content": {"type": "text", "text": "hi"}}], 10)
MODEL = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}


@pytest.mark.parametrize(
    ("request_", "answer", "fits"),
    [
        (ASK, {"action": "accept", "content": {"ok": True}}, True),
        (ASK, {"action": "decline"}, True),
        (ASK, {"action": "cancel"}, True),
        (ASK, {"action": "accept", "content": {"ok": "no"}}, False),
        (ASK, {"action": "accept", "content": {}}, False),
        (ASK, {"action": "accept"}, False),
        (ASK, {"action": "maybe"}, False),
        (ASK, ["accept"], False),
        (SAMPLE, MODEL, True),
        (SAMPLE, {**MODEL, "content": [{"type": "text", "text": "a"}]}, True),
        (SAMPLE, {**MODEL, "role": "system"}, False),
        (SAMPLE, {**MODEL, "content": "ok"}, False),
        (SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "x"}}, False),
    ],
)
def test_problem(request_: dict[str, Any], answer: Any, fits: bool) -> None:
    assert (problem(request_, answer) is None) == fits


def test_the_reason_names_the_place_and_the_rule() -> None:
    why = problem(ASK, {"action": "accept", "content": {"ok": "no"}})
    assert why is not None and "ok" in why and "boolean" in why


def waiting_task(mcp: Mcp) -> str:
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("ask", {"k": ASK}))
    task_id = mcp.new_task()
    mcp.producer.on_enqueue = None
    return task_id


def test_tasks_update_refuses_an_unfitting_answer_and_the_task_keeps_waiting(mcp: Mcp) -> None:
    task_id = waiting_task(mcp)
    params = {"taskId": task_id, "inputResponses": {"k": {"action": "accept", "content": {}}}}
    reply = mcp.post("tasks/update", params)
    assert reply.code() == (400, -32602)
    assert "inputResponses['k']" in reply.error["message"]
    record = mcp.record(task_id)
    assert record is not None and record.status == "input_required"
    assert mcp.peek.hkeys(mcp.keys.inputs(task_ref(task_id))) == ["k"]
    assert mcp.peek.exists(mcp.keys.answers(task_ref(task_id))) == 0
    params["inputResponses"] = {"k": {"action": "accept", "content": {"ok": True}}}
    assert mcp.post("tasks/update", params).status == 200
    record = mcp.record(task_id)
    assert record is not None and record.status == "working"


def test_an_mrtr_retry_with_an_unfitting_answer_creates_nothing(mcp: Mcp) -> None:
    first = mcp.call("guarded", {"target": "x"}, caps={"elicitation": {}})
    state = first.result["requestState"]
    [key] = first.result["inputRequests"]
    extra = {"requestState": state, "inputResponses": {key: {"action": "accept", "content": {}}}}
    retry = mcp.call("guarded", {"target": "x"}, caps={"elicitation": {}}, extra=extra)
    assert retry.code() == (400, -32602)
    assert mcp.producer.calls == []


def test_a_posted_response_that_does_not_fit_is_400_and_may_be_sent_again(mcp: Mcp) -> None:
    task_id = waiting_task(mcp)
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}},
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    session_id = mcp.raw(orjson.dumps(init), headers).headers["mcp-session-id"]
    asyncio.run(
        mcp.sessions.put_outgoing(
            task_ref(session_id), "mcpq-1", Outgoing(task_ref(task_id), "k"), 60_000
        )
    )
    headers = {**headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}

    def respond(content: dict[str, Any]) -> int:
        body = {
            "jsonrpc": "2.0",
            "id": "mcpq-1",
            "result": {"action": "accept", "content": content},
        }
        return mcp.raw(orjson.dumps(body), headers).status

    assert respond({"ok": 1}) == 400
    record = mcp.record(task_id)
    assert record is not None and record.status == "input_required"
    assert respond({"ok": True}) == 202
    record = mcp.record(task_id)
    assert record is not None and record.status == "working"
