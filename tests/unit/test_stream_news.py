"""What a synchronous call's stream sends while its tool runs (``mcpq.frontend.streams``):
``notifications/progress`` with ``report_progress``'s numbers (only with a ``progressToken``;
only growing), and the tool's log messages as ``notifications/message`` before the result: on
2026-07-28 only at or above the level the request set in ``_meta`` (none without one); on a
2025-era session every level until ``logging/setLevel`` chooses one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mcpq.shared.protocol import META_LOG_LEVEL
from mcpq.shared.results import call_tool_result
from mcpq.shared.store import run_calls
from mcpq.shared.store.states import Reply as StoreReply
from tests.unit.fakes import Mcp, meta
from tests.unit.test_legacy import Session

MESSAGES = [
    {"level": "debug", "data": {"step": 1}, "logger": "shop"},
    {"level": "info", "data": "charging"},
    {"level": "warning", "data": "slow bank"},
    {"level": "error", "data": "retrying"},
]


def reporting(mcp: Mcp) -> Callable[[str, str, str], Awaitable[None]]:
    """An ``on_enqueue`` hook: the run reports progress (1/3, then 1.5/3, then 1.5 again, which
    must not go out) and logs ``MESSAGES``, then completes, a moment apart each."""
    worker = mcp.worker

    async def run(tool: str, ref: str, queue: str) -> None:
        claim = await worker.claim(ref)
        assert claim.reply is StoreReply.OK

        async def go_on() -> None:
            keys, gen = worker.keys, claim.gen
            for progress, text in ((1, "charging"), (1.5, None), (1.5, "same number")):
                await asyncio.sleep(0.05)
                message = text or f"{progress:g}/3"
                call = run_calls.report(keys, ref, gen, message, progress=progress, total=3)
                assert await worker.run(call) is StoreReply.OK
            logs = run_calls.report(keys, ref, gen, None, count=0, logs=MESSAGES, first_log=1)
            assert await worker.run(logs) is StoreReply.OK
            await worker.finish(ref, gen, "completed", call_tool_result("done").dump())

        asyncio.get_running_loop().create_task(go_on())

    return run


def notices(reply: Any, method: str) -> list[dict[str, Any]]:
    return [m["params"] for m in reply.messages if m.get("method") == method]


def call_2026(mcp: Mcp, level: str | None) -> Any:
    params_meta = {**meta(opt_in=False), "progressToken": "p1"}
    if level is not None:
        params_meta[META_LOG_LEVEL] = level
    return mcp.call("quick", {"x": 1}, opt_in=False, extra={"_meta": params_meta})


def test_progress_numbers_go_out_growing_with_their_total(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = reporting(mcp)
    reply = call_2026(mcp, None)
    assert reply.streamed, reply.content
    progress = notices(reply, "notifications/progress")
    assert progress == [
        {"progressToken": "p1", "progress": 1, "total": 3, "message": "charging"},
        {"progressToken": "p1", "progress": 1.5, "total": 3, "message": "1.5/3"},
    ], "the same number again is not sent: progress must increase"
    assert reply.result["content"][0]["text"] == "done"


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (None, []),
        ("warning", ["warning", "error"]),
        ("debug", ["debug", "info", "warning", "error"]),
    ],
)
def test_a_2026_call_streams_messages_at_the_level_it_set(
    mcp: Mcp, level: str | None, expected: list[str]
) -> None:
    mcp.producer.on_enqueue = reporting(mcp)
    reply = call_2026(mcp, level)
    sent = notices(reply, "notifications/message")
    assert [m["level"] for m in sent] == expected
    if level == "debug":
        assert sent[0] == MESSAGES[0], "level, logger and data as the tool gave them"
    methods = [m.get("method") for m in reply.messages]
    if expected:
        assert methods.index("notifications/message") < len(methods) - 1, "before the result"


def test_a_2025_session_declares_logging_and_streams_every_level_until_it_sets_one(
    mcp: Mcp,
) -> None:
    session = Session(mcp)
    assert session.result["capabilities"]["logging"] == {}
    mcp.producer.on_enqueue = reporting(mcp)
    stream = "application/json, text/event-stream"
    reply = session.request("tools/call", {"name": "quick", "arguments": {}}, accept=stream)
    assert [m["level"] for m in notices(reply, "notifications/message")] == [
        "debug",
        "info",
        "warning",
        "error",
    ]
    assert session.request("logging/setLevel", {"level": "error"}, rid=2).result == {}
    reply = session.request("tools/call", {"name": "quick", "arguments": {}}, rid=3, accept=stream)
    assert [m["level"] for m in notices(reply, "notifications/message")] == ["error"]


def test_set_level_refuses_an_unknown_level(mcp: Mcp) -> None:
    reply = Session(mcp).request("logging/setLevel", {"level": "loud"})
    assert reply.code() == (200, -32602)
    assert "debug, info" in reply.error["message"]


@pytest.mark.parametrize("level", ["loud", "", 3, None])
def test_a_2026_request_with_an_unknown_log_level_is_32602(mcp: Mcp, level: object) -> None:
    params_meta = {**meta(opt_in=False), META_LOG_LEVEL: level}
    reply = mcp.call("quick", {"x": 1}, opt_in=False, extra={"_meta": params_meta})
    assert reply.code() == (400, -32602)
    assert "debug, info, notice" in reply.error["message"]
    assert mcp.producer.calls == [], "refused before anything runs"


def test_set_level_is_not_a_2026_method(mcp: Mcp) -> None:
    reply = mcp.post("logging/setLevel", {"level": "info"}, opt_in=False)
    assert reply.code()[1] == -32601


def test_a_first_progress_of_zero_goes_out(mcp: Mcp) -> None:
    worker = mcp.worker

    async def run(tool: str, ref: str, queue: str) -> None:
        claim = await worker.claim(ref)

        async def go_on() -> None:
            for progress in (0, 0, 5):  # 0 is news the first time, not the second
                await asyncio.sleep(0.05)
                call = run_calls.report(
                    worker.keys, ref, claim.gen, f"at {progress}", progress=progress
                )
                assert await worker.run(call) is StoreReply.OK
            await asyncio.sleep(0.05)
            await worker.finish(ref, claim.gen, "completed", call_tool_result("done").dump())

        asyncio.get_running_loop().create_task(go_on())

    mcp.producer.on_enqueue = run
    reply = call_2026(mcp, None)
    sent = [(p["progress"], p["message"]) for p in notices(reply, "notifications/progress")]
    assert sent == [(0, "at 0"), (5, "at 5")]


def test_no_progress_goes_out_before_the_tool_reports_any(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(
        lambda record, answers: ("completed", call_tool_result("done").dump())
    )
    assert notices(call_2026(mcp, None), "notifications/progress") == []
