"""The 2025-era wire (``mcpq.frontend.legacy``) on fakes: sessions, the methods, the SEP-1686 tasks
wire, answers routed by id, ``notifications/cancelled``, and what a 2026-07-28 request keeps."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from mcpq.frontend.legacy import methods
from mcpq.shared.results import call_tool_result
from mcpq.shared.store import Outgoing, TaskRecord, task_ref
from tests.unit.fakes import Mcp, Reply, elicitation

V = "2025-11-25"
ELICIT_CAPS = {"elicitation": {}}


class Session:
    def __init__(self, mcp: Mcp, version: str = V, caps: dict[str, Any] | None = None) -> None:
        self.mcp = mcp
        params = {
            "protocolVersion": version,
            "capabilities": caps or {},
            "clientInfo": {"name": "old", "version": "1"},
        }
        reply = self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert reply.status == 200, reply.content
        self.result = reply.result
        self.id = reply.headers["mcp-session-id"]
        self.version = self.result["protocolVersion"]

    def send(
        self, message: dict[str, Any], accept: str = "application/json", **extra: str
    ) -> Reply:
        headers = {"Content-Type": "application/json", "Accept": accept, **extra}
        if hasattr(self, "id"):
            headers.setdefault("Mcp-Session-Id", self.id)
            headers.setdefault("MCP-Protocol-Version", self.version)
        return self.mcp.raw(orjson.dumps(message), headers)

    def request(
        self, method: str, params: dict[str, Any] | None = None, rid: int = 1, **kw: Any
    ) -> Reply:
        return self.send(
            {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}, **kw
        )

    def task(self, tool: str = "echo", arguments: dict[str, Any] | None = None) -> str:
        params = {"name": tool, "arguments": arguments or {"text": "hi"}, "task": {"ttl": 60_000}}
        reply = self.request("tools/call", params)
        return str(reply.result["task"]["taskId"])


def completes(record: TaskRecord, answers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    return "completed", call_tool_result(f"done {record.arguments}").dump()


# -- the handshake and the session ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("asked", "agreed"),
    [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        (V, V),
        ("2024-11-05", V),
        ("x", V),
    ],
)
def test_initialize_negotiates_and_opens_a_session(mcp: Mcp, asked: str, agreed: str) -> None:
    session = Session(mcp, asked)
    assert session.version == agreed
    assert session.result["serverInfo"]["name"] == "mcpq-unit"
    assert "resultType" not in session.result  # a 2026-07-28 field
    assert ("tasks" in session.result["capabilities"]) == (agreed == V)
    assert len(session.id) >= 32
    # The id is a bearer: Redis holds only its hash.
    assert not [k for k in mcp.peek.keys("*") if session.id in k]


def test_initialized_notification_is_202_and_ping_answers_empty(mcp: Mcp) -> None:
    session = Session(mcp)
    note = session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status == 202 and note.content == b""
    assert session.request("ping").result == {}


def test_unknown_session_is_404_and_missing_one_is_400(mcp: Mcp) -> None:
    session = Session(mcp)
    unknown = session.request("tools/list", **{"Mcp-Session-Id": "nope"})
    assert unknown.status == 404
    assert unknown.error["code"] == -32001
    missing = mcp.raw(
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": V,
        },
    )
    assert missing.status == 400


def test_delete_ends_the_session(mcp: Mcp) -> None:
    session = Session(mcp)
    headers = {"Mcp-Session-Id": session.id, "MCP-Protocol-Version": V}
    assert mcp.raw(b"", headers, method="DELETE").status == 204
    assert session.request("ping").status == 404
    assert mcp.raw(b"", headers, method="DELETE").status == 404


def test_another_protocol_version_header_is_400(mcp: Mcp) -> None:
    session = Session(mcp)
    assert session.request("ping", **{"MCP-Protocol-Version": "2025-03-26"}).status == 400


def test_a_2026_request_is_served_as_today_even_with_a_session_header(mcp: Mcp) -> None:
    session = Session(mcp)
    reply = mcp.post("tools/list", **{"Mcp-Session-Id": session.id})
    assert reply.result["resultType"] == "complete"
    assert "_meta" in reply.result


# -- tools ---------------------------------------------------------------------------------------
def test_tools_list_shows_task_support_from_2025_11_25(mcp: Mcp) -> None:
    tools = {t["name"]: t for t in Session(mcp).request("tools/list").result["tools"]}
    assert tools["quick"]["execution"] == {"taskSupport": "forbidden"}
    assert tools["echo"]["execution"] == {"taskSupport": "optional"}
    assert tools["forever"]["execution"] == {"taskSupport": "required"}
    older = Session(mcp, "2025-06-18").request("tools/list").result["tools"]
    assert all("execution" not in t for t in older)


def test_a_plain_call_runs_synchronously_and_answers_json(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(completes)
    reply = Session(mcp).request("tools/call", {"name": "quick", "arguments": {"x": 3}})
    assert reply.status == 200
    assert reply.result["content"][0]["text"] == "done {'x': 3}"
    assert "resultType" not in reply.result


def test_a_plain_call_streams_when_the_client_takes_sse(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(completes)
    reply = Session(mcp).request(
        "tools/call",
        {"name": "quick", "arguments": {"x": 1}},
        rid=7,
        accept="application/json, text/event-stream",
    )
    assert reply.streamed
    assert reply.body["id"] == 7
    assert reply.result["content"][0]["text"] == "done {'x': 1}"


def test_errors_of_a_session_go_out_with_http_200(mcp: Mcp) -> None:
    # 2025-era transports read a 4xx as a broken connection, not as an answer.
    reply = Session(mcp).request("tools/call", {"name": "nosuch"})
    assert reply.code() == (200, -32602)
    assert Session(mcp).request("roots/list").code() == (200, -32601)


def test_task_modes_on_the_2025_11_25_wire(mcp: Mcp) -> None:
    session = Session(mcp)
    forbidden = session.request("tools/call", {"name": "quick", "task": {}})
    assert forbidden.code() == (200, -32601)
    required = session.request("tools/call", {"name": "forever", "arguments": {}})
    assert required.code() == (200, -32601)
    assert mcp.producer.calls == []


def test_a_required_tool_runs_synchronously_for_a_client_without_tasks(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(completes)
    reply = Session(mcp, "2025-06-18").request("tools/call", {"name": "forever"})
    assert reply.result["content"][0]["text"] == "done {'n': 0}"


def test_ask_first_tools_need_the_2026_wire(mcp: Mcp) -> None:
    reply = Session(mcp).request("tools/call", {"name": "guarded", "arguments": {"target": "x"}})
    assert "2026-07-28" in reply.error["message"]
    assert mcp.producer.calls == []


# -- the tasks wire ------------------------------------------------------------------------------
def test_a_task_call_answers_the_nested_task_and_get_shows_it(mcp: Mcp) -> None:
    session = Session(mcp)
    reply = session.request(
        "tools/call", {"name": "echo", "arguments": {"text": "a"}, "task": {"ttl": 5000}}
    )
    task = reply.result["task"]
    assert set(task) == {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}
    assert task["status"] == "working" and task["ttl"] == 5000
    got = session.request("tasks/get", {"taskId": task["taskId"]}).result
    assert got["taskId"] == task["taskId"] and got["status"] == "working"
    assert "ttlMs" not in got and "resultType" not in got


def test_is_error_reads_failed_and_result_returns_the_call_result(mcp: Mcp) -> None:
    session = Session(mcp)
    mcp.producer.on_enqueue = mcp.worker.runs(
        lambda record, answers: (
            "completed",
            {"content": [{"type": "text", "text": "no"}], "isError": True},
        )
    )
    task_id = session.task()
    assert session.request("tasks/get", {"taskId": task_id}).result["status"] == "failed"
    result = session.request("tasks/result", {"taskId": task_id}).result
    assert result["isError"] is True
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}


def test_cancel_returns_the_task_and_a_terminal_one_is_32602(mcp: Mcp) -> None:
    session = Session(mcp)
    task_id = session.task()
    cancelled = session.request("tasks/cancel", {"taskId": task_id}).result
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
    assert session.request("tasks/cancel", {"taskId": task_id}).code() == (200, -32602)
    assert session.request("tasks/cancel", {"taskId": "nope"}).code() == (200, -32602)


def test_list_pages_through_the_sessions_own_tasks(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(methods, "LIST_PAGE", 2)
    session, other = Session(mcp), Session(mcp)
    mine = [session.task() for _ in range(5)]
    other.task()
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        params = {} if cursor is None else {"cursor": cursor}
        page = session.request("tasks/list", params).result
        seen += [t["taskId"] for t in page["tasks"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert seen == mine  # oldest first, each once, none of the other session's
    assert session.request("tasks/list", {"cursor": "%%bad"}).code() == (200, -32602)


def test_tasks_methods_are_not_there_before_2025_11_25(mcp: Mcp) -> None:
    session = Session(mcp, "2025-06-18")
    assert session.request("tasks/list").code() == (200, -32601)


# -- answers and cancels from the client ---------------------------------------------------------
def test_a_posted_response_answers_the_input_request_it_names(mcp: Mcp) -> None:
    session = Session(mcp, caps=ELICIT_CAPS)
    ask = elicitation("Colour?", {"type": "object", "properties": {}})
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("ask", {"k": ask}))
    task_id = session.task()
    mcp.producer.on_enqueue = None
    ref = task_ref(task_id)

    # What a stream would have sent: the server's request id, remembered for the session.
    async def remember() -> None:
        session_ref = task_ref(session.id)
        await mcp.sessions.put_outgoing(session_ref, "mcpq-x1", Outgoing(ref, "k"), 60_000)

    asyncio.run(remember())
    answer = {"jsonrpc": "2.0", "id": "mcpq-x1", "result": {"action": "accept", "content": {}}}
    assert session.send(answer).status == 202
    record = mcp.record(task_id)
    assert record is not None and record.status == "working"  # the last answer resumes it
    assert [c[0] for c in mcp.producer.calls].count("enqueue") == 2
    # The same id again (or one never sent) changes nothing and is still 202.
    assert session.send(answer).status == 202


def test_notifications_cancelled_cancels_the_named_call(mcp: Mcp) -> None:
    session = Session(mcp)
    task_id = session.task()

    async def remember() -> None:
        await mcp.sessions.put_call(task_ref(session.id), "9", task_ref(task_id), 60_000)

    asyncio.run(remember())
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    assert session.send(note).status == 202
    record = mcp.record(task_id)
    assert record is not None and record.status == "cancelled"
