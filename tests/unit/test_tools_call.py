"""``tools/list`` and ``tools/call``: the decision table of spec digest §2.3, the exact
``CreateTaskResult`` of §4.4 (persisted before it is returned), and the synchronous path."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from mcpq.frontend import task_service
from mcpq.shared.results import call_tool_result
from mcpq.shared.store import task_ref
from mcpq.shared.store.records import TaskRecord
from tests.unit.fakes import OWNER, SERVER_INFO, TASKS, Mcp, meta

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
CREATE_FIELDS = {
    "resultType",
    "taskId",
    "status",
    "createdAt",
    "lastUpdatedAt",
    "ttlMs",
    "pollIntervalMs",
    "_meta",
}


def echo_outcome(record: TaskRecord, answers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    return "completed", call_tool_result(f"{record.tool}:{record.arguments}").dump()


# -- tools/list ----------------------------------------------------------------------------------
def test_tools_list(mcp: Mcp) -> None:
    result = mcp.post("tools/list").result
    assert result["resultType"] == "complete"
    tools = {t["name"]: t for t in result["tools"]}
    assert set(tools) == {"echo", "forever", "slow", "deploy", "quick", "guarded", "survey"}
    assert tools["echo"]["description"] == "Echo text"
    assert tools["forever"]["description"] == "A task-only tool whose tasks never expire."
    schema = tools["echo"]["inputSchema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["text"]
    assert set(schema["properties"]) == {"text", "times"}
    assert tools["slow"]["inputSchema"]["properties"] == {}


# -- errors before any task ----------------------------------------------------------------------
def nothing_stored(mcp: Mcp) -> bool:
    return not mcp.peek.keys(mcp.keys.task_prefix + "*")


@pytest.mark.parametrize("name", ["nope", "Echo", "celery.backend_cleanup"])
def test_unknown_tool_is_32602(mcp: Mcp, name: str) -> None:
    assert mcp.call(name, {}).code() == (400, -32602)
    assert mcp.producer.calls == []


@pytest.mark.parametrize("name", [None, 5, ["echo"]])
def test_tool_name_must_be_a_string(mcp: Mcp, name: Any) -> None:
    params = {"name": name, "arguments": {}} if name is not None else {"arguments": {}}
    assert mcp.post("tools/call", params, Mcp_Name="echo").code() == (400, -32602)


@pytest.mark.parametrize("tool", ["forever", "slow"])
def test_required_tool_without_opt_in_is_32021(mcp: Mcp, tool: str) -> None:
    reply = mcp.call(tool, {}, opt_in=False)
    assert reply.code() == (400, -32021)
    assert reply.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert mcp.producer.calls == []
    assert nothing_stored(mcp)


def test_capability_is_checked_before_the_arguments(mcp: Mcp) -> None:
    assert mcp.call("forever", {"n": "x", "z": 1}, opt_in=False).code() == (400, -32021)


# -- CreateTaskResult ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "ttl", "poll", "queue"),
    [
        ("echo", 3_600_000, 1000, "mcpq"),
        ("forever", None, 250, "mcpq"),
        ("slow", 60_000, 1000, "slow"),
    ],
)
def test_create_task_result_is_exactly_the_flat_task(
    mcp: Mcp, tool: str, ttl: int | None, poll: int, queue: str
) -> None:
    reply = mcp.call(tool, {"text": "hi"} if tool == "echo" else {})
    result = reply.result
    assert set(result) == CREATE_FIELDS
    assert result["resultType"] == "task"
    assert result["status"] == "working"
    assert (result["ttlMs"], result["pollIntervalMs"]) == (ttl, poll)
    if ttl is None:
        assert b'"ttlMs":null' in reply.content
    assert ISO.match(result["createdAt"])
    assert datetime.fromisoformat(result["createdAt"]).tzinfo is not None
    assert result["lastUpdatedAt"] == result["createdAt"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43,}", result["taskId"])
    assert set(result["_meta"]) == {SERVER_INFO}
    task_id = result["taskId"]
    assert mcp.producer.enqueues == [("enqueue", tool, task_ref(task_id), queue, True)]
    got = mcp.get(task_id).result
    assert got["status"] == "working"
    assert {k: got[k] for k in CREATE_FIELDS - {"resultType", "_meta"}} == {
        k: result[k] for k in CREATE_FIELDS - {"resultType", "_meta"}
    }


def test_a_task_id_never_starts_with_a_dash(mcp: Mcp, monkeypatch: pytest.MonkeyPatch) -> None:
    # A command line reads a leading '-' as an option (`mcpq task get -x...`): such a draw is
    # drawn again, never altered (every id that can come out stays equally likely).
    draws = iter(["-" + "A" * 42, "B" * 43])
    monkeypatch.setattr(task_service.secrets, "token_urlsafe", lambda _: next(draws))
    assert mcp.call("echo", {"text": "hi"}).result["taskId"] == "B" * 43
    monkeypatch.undo()
    ids = {task_service.new_task_id() for _ in range(2000)}  # a dash first in 1 of 64 before
    assert len(ids) == 2000 and not any(i.startswith("-") for i in ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{43}", i) for i in ids)


def test_the_task_is_persisted_with_validated_arguments_and_caps(mcp: Mcp) -> None:
    caps: dict[str, Any] = {"elicitation": {}}
    task_id = mcp.call("echo", {"text": "hi"}, caps=caps).result["taskId"]
    record = mcp.record(task_id)
    assert record is not None
    assert (record.tool, record.owner, record.sync) == ("echo", OWNER, False)
    assert record.arguments == {"text": "hi", "times": 1}
    assert record.caps == {"elicitation": {}, "extensions": {TASKS: {}}}
    assert record.pre == {}
    ref = task_ref(task_id)
    # published: the run now has MCPQ_REQUEUE_UNSTARTED_S to start before the sweeper resends it
    deadline = mcp.peek.zscore(mcp.keys.unclaimed, ref)
    assert deadline is not None
    assert deadline >= record.created_ms + mcp.settings.requeue_unstarted_s * 1000
    assert task_id not in str(mcp.peek.hgetall(mcp.keys.task(ref)))


def test_settings_give_the_default_ttl_and_poll_interval(make_mcp: Callable[..., Mcp]) -> None:
    result = make_mcp(default_ttl_ms=5000, poll_interval_ms=700).call("echo", {"text": "x"}).result
    assert (result["ttlMs"], result["pollIntervalMs"]) == (5000, 700)
    unlimited = make_mcp(default_ttl_ms=None).call("echo", {"text": "x"})
    assert unlimited.result["ttlMs"] is None
    assert b'"ttlMs":null' in unlimited.content
    assert make_mcp(default_ttl_ms=None).call("slow", {}).result["ttlMs"] == 60_000


def test_every_task_gets_a_fresh_id(mcp: Mcp) -> None:
    ids = {mcp.new_task() for _ in range(5)}
    assert len(ids) == 5


def test_broker_down_still_returns_the_task_for_the_sweeper(mcp: Mcp) -> None:
    mcp.producer.fail = True
    task_id = mcp.call("echo", {"text": "x"}).result["taskId"]
    assert mcp.get(task_id).result["status"] == "working"
    unclaimed = mcp.peek.zscore(mcp.keys.unclaimed, task_ref(task_id))
    assert unclaimed is not None


# -- the legacy `task` param ---------------------------------------------------------------------
def test_legacy_task_param_is_ignored_with_opt_in(mcp: Mcp) -> None:
    result = mcp.call("echo", {"text": "x"}, extra={"task": {"ttl": 5}}).result
    assert result["resultType"] == "task"
    assert result["ttlMs"] == 3_600_000
    assert "task" not in result


def test_legacy_task_param_is_no_opt_in(mcp: Mcp) -> None:
    reply = mcp.call("forever", {}, opt_in=False, extra={"task": {"ttl": 60000}})
    assert reply.code() == (400, -32021)


def test_legacy_task_param_does_not_make_a_task_of_a_sync_call(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(echo_outcome)
    reply = mcp.call("echo", {"text": "x"}, opt_in=False, extra={"task": {"ttl": 5}})
    assert reply.result["resultType"] == "complete"
    assert "taskId" not in reply.result


# -- arguments -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "text"),
        ({"text": 1}, "text"),
        ({"text": "x", "times": "many"}, "times"),
        ({"text": "x", "colour": "red"}, "colour"),
    ],
)
def test_invalid_arguments_are_a_tool_error_result(
    mcp: Mcp, arguments: dict[str, Any], problem: str
) -> None:
    reply = mcp.call("echo", arguments)
    assert reply.status == 200
    result = reply.result
    assert set(result) == {"resultType", "content", "isError", "_meta"}
    assert (result["resultType"], result["isError"]) == ("complete", True)
    [block] = result["content"]
    assert block["type"] == "text"
    assert "echo" in block["text"]
    assert problem in block["text"]
    assert mcp.producer.calls == []
    assert nothing_stored(mcp)


@pytest.mark.parametrize("arguments", ["text", 5, True])
def test_arguments_must_be_an_object(mcp: Mcp, arguments: Any) -> None:
    assert mcp.call("echo", arguments).code() == (400, -32602)


@pytest.mark.parametrize("arguments", [[], ""])
def test_falsy_non_object_arguments_are_32602(mcp: Mcp, arguments: Any) -> None:
    assert mcp.call("slow", arguments).code() == (400, -32602)


def test_null_or_absent_arguments_mean_none(mcp: Mcp) -> None:
    assert mcp.call("slow", None).result["resultType"] == "task"
    assert mcp.call("slow", extra={"arguments": None}).result["resultType"] == "task"


# -- the synchronous path ------------------------------------------------------------------------
@pytest.mark.parametrize(("tool", "opt_in"), [("echo", False), ("quick", True), ("quick", False)])
def test_sync_call_returns_the_call_tool_result(mcp: Mcp, tool: str, opt_in: bool) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(echo_outcome)
    arguments = {"text": "hi"} if tool == "echo" else {"x": 3}
    result = mcp.call(tool, arguments, opt_in=opt_in).result
    expected = call_tool_result(
        f"{tool}:{ {'text': 'hi', 'times': 1} if tool == 'echo' else {'x': 3} }"
    ).dump()
    assert result == {**expected, "_meta": result["_meta"]}
    [(_, name, ref, _, persisted)] = mcp.producer.enqueues
    assert (name, persisted) == (tool, True)
    hidden = mcp.record_by_ref(ref)
    assert hidden is not None
    assert (hidden.sync, hidden.status, hidden.ttl_ms) == (True, "completed", 600_000)


def test_sync_call_failure_is_the_json_rpc_error(mcp: Mcp) -> None:
    error = {"code": -32602, "message": "bad input", "data": {"field": "x"}}
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("failed", error))
    reply = mcp.call("echo", {"text": "x"}, opt_in=False, Accept="application/json")
    assert reply.code() == (400, -32602)
    # On a stream the HTTP status went out with the first byte: the error is its last message.
    streamed = mcp.call("echo", {"text": "x"}, opt_in=False)
    assert streamed.streamed and streamed.code() == (200, -32602)
    assert reply.error == error


def test_sync_call_internal_failure_is_32603_with_200(mcp: Mcp) -> None:
    error = {"code": -32603, "message": "boom"}
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("failed", error))
    assert mcp.call("quick", {}).code() == (200, -32603)


def test_sync_call_timeout_cancels_and_revokes(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(sync_timeout_s=0.3)
    started = time.monotonic()
    reply = mcp.call("echo", {"text": "x"}, opt_in=False, Accept="application/json")
    assert time.monotonic() - started < 3
    assert reply.code() == (200, -32603)
    assert "did not finish" in reply.error["message"]
    [(_, _, ref, _, _)] = mcp.producer.enqueues
    assert mcp.producer.revokes == [ref]
    hidden = mcp.record_by_ref(ref)
    assert hidden is not None
    assert hidden.status == "cancelled"


def test_sync_call_envelope_has_no_task_fields(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(echo_outcome)
    result = mcp.call("quick", {}, caps=meta()["io.modelcontextprotocol/clientCapabilities"]).result
    assert not {"taskId", "status", "ttlMs", "requestState", "inputRequests"} & set(result)


def test_sync_call_timeout_reports_the_timeout_even_if_revoke_fails(
    make_mcp: Callable[..., Mcp], monkeypatch: pytest.MonkeyPatch
) -> None:
    mcp = make_mcp(sync_timeout_s=0.2)

    async def broken(ref: str) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(mcp.producer, "revoke", broken)
    reply = mcp.call("echo", {"text": "x"}, opt_in=False, Accept="application/json")
    assert reply.code() == (200, -32603)
    assert "did not finish" in reply.error["message"]
