"""A stream whose store fails after the reply has begun: its status line (200, SSE) is sent,
so the failure can only be the stream's last message, and the call's run is stopped, since its
client was told the call failed. Never an exception out of a started stream. An outage shorter
than ``STORE_GRACE_S`` (a Redis restart, a failover) is outlasted: the call goes on."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis.exceptions as rexc

from mcpq.frontend import streams
from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.results import call_tool_result
from mcpq.shared.store import TaskStatus
from tests.unit.fakes import Mcp


def fail_reads_after_the_create(mcp: Mcp, failures: int = -1) -> list[str]:
    """Task reads fail from now on (``failures`` of them; -1: all), as if Redis went away: the
    refs of the runs enqueued so far are returned as they come (the hidden task of a
    synchronous call)."""
    enqueued: list[str] = []
    get = mcp.store.get
    left = [failures]

    async def enqueued_then_down(tool: str, ref: str, queue: str) -> None:
        enqueued.append(ref)

        async def down(*args: Any, **kwargs: Any) -> Any:
            if left[0] == 0:
                return await get(*args, **kwargs)
            left[0] -= 1
            raise StoreUnavailable()

        mcp.store.get = down  # type: ignore[method-assign]

    mcp.producer.on_enqueue = enqueued_then_down
    return enqueued


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "STORE_GRACE_S", 0.5)
    monkeypatch.setattr(streams, "OUTAGE_POLL_S", 0.05)


def test_a_streamed_call_whose_store_fails_ends_with_the_error_and_stops_its_run(
    mcp: Mcp, short_grace: None
) -> None:
    enqueued = fail_reads_after_the_create(mcp)
    reply = mcp.call("quick", {}, opt_in=False)  # a synchronous call, on SSE
    assert reply.status == 200 and reply.streamed
    assert reply.code() == (200, -32603)
    assert reply.error["message"] == "task store unavailable"
    [ref] = enqueued
    assert mcp.peek.hget(mcp.keys.task(ref), "status") == TaskStatus.CANCELLED.value
    assert ("revoke", ref) in mcp.producer.calls


def test_a_streamed_call_outlasts_a_short_store_outage(mcp: Mcp, short_grace: None) -> None:
    """Three reads fail (a Redis restart), then the store is back: the stream goes on and the
    call ends with its result, its run untouched."""
    done = mcp.worker.runs(lambda record, answers: ("completed", call_tool_result("done").dump()))
    enqueued = fail_reads_after_the_create(mcp, failures=3)
    fail_reads = mcp.producer.on_enqueue
    assert fail_reads is not None

    async def run_then_fail_reads(tool: str, ref: str, queue: str) -> None:
        await done(tool, ref, queue)
        await fail_reads(tool, ref, queue)

    mcp.producer.on_enqueue = run_then_fail_reads
    reply = mcp.call("quick", {}, opt_in=False)
    assert reply.status == 200 and reply.streamed
    assert reply.result["content"][0]["text"] == "done", reply.body
    [ref] = enqueued
    assert ("revoke", ref) not in mcp.producer.calls


def test_a_json_call_whose_store_fails_answers_503(mcp: Mcp) -> None:
    fail_reads_after_the_create(mcp)
    reply = mcp.call("quick", {}, opt_in=False, Accept="application/json")
    assert reply.code() == (503, -32603)
    assert reply.headers["retry-after"] == "2"


def lose_the_task_after_the_create(mcp: Mcp) -> None:
    """The store loses the call's task once its run is sent, as a failover to a replica that
    had not received the create would."""

    async def enqueued_then_lost(tool: str, ref: str, queue: str) -> None:
        assert mcp.peek.delete(mcp.keys.task(ref)) == 1

    mcp.producer.on_enqueue = enqueued_then_lost


def test_a_streamed_call_whose_task_the_store_lost_ends_with_a_retryable_error(
    mcp: Mcp,
) -> None:
    # Not the params' -32602 "Task not found" of tasks/get: the client never named this task.
    lose_the_task_after_the_create(mcp)
    reply = mcp.call("quick", {}, opt_in=False)
    assert reply.status == 200 and reply.streamed
    assert reply.code() == (200, -32603)
    assert reply.error["message"] == "the task store lost this call's task: call the tool again"


def test_a_json_call_whose_task_the_store_lost_answers_503(mcp: Mcp) -> None:
    lose_the_task_after_the_create(mcp)
    reply = mcp.call("quick", {}, opt_in=False, Accept="application/json")
    assert reply.code() == (503, -32603)
    assert reply.headers["retry-after"] == "2"


def test_a_503_says_why_in_the_log(mcp: Mcp, caplog: pytest.LogCaptureFixture) -> None:
    """The client hears only "try again"; the operator reads which failure it was."""
    enqueued: list[str] = []

    async def enqueued_then_slow(tool: str, ref: str, queue: str) -> None:
        enqueued.append(ref)

        async def slow(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailable() from rexc.TimeoutError("Timeout connecting to server")

        mcp.store.get = slow  # type: ignore[method-assign]

    mcp.producer.on_enqueue = enqueued_then_slow
    with caplog.at_level(logging.WARNING, logger="mcpq.web"):
        reply = mcp.call("quick", {}, opt_in=False, Accept="application/json")
    assert reply.code() == (503, -32603)
    [line] = [r for r in caplog.records if r.getMessage() == "call refused for now"]
    assert line.__dict__["error"] == "StoreUnavailable"
    assert line.__dict__["cause"] == "TimeoutError: Timeout connecting to server"
    assert enqueued[0] not in caplog.text  # never the task's ref


def test_a_notification_stream_whose_store_fails_ends_without_an_error_logged(
    mcp: Mcp, caplog: pytest.LogCaptureFixture
) -> None:
    task_id = mcp.new_task()
    real_get = mcp.store.get
    reads = 0

    async def first_read_only(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        if reads > 1:  # the listen request's own check passes; the stream's reads fail
            raise StoreUnavailable()
        return await real_get(*args, **kwargs)

    mcp.store.get = first_read_only  # type: ignore[method-assign]
    params = {"notifications": {"taskIds": [task_id]}}
    with caplog.at_level(logging.WARNING):
        reply = mcp.post("subscriptions/listen", params)
    assert reply.status == 200 and reply.streamed
    [ack] = reply.messages  # the acknowledgement; then the stream ended
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"]["taskIds"] == [task_id]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("notification stream ended" in r.getMessage() for r in caplog.records)
