"""``report_progress``, the log calls and ``elicit_url`` run the way a worker runs them
(``run_task`` on a real Redis): what a synchronous call's stream then reads (numbers, log
messages in order, none twice after a replay), what a task keeps (no messages: the worker's log
only), and the URL question as stored."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpq import App, Context
from mcpq.shared.jobs import Run
from mcpq.shared.settings import Settings
from mcpq.shared.store import TaskStatus
from mcpq.shared.store.clients import sync_client
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.wakeups import Wakeups
from mcpq.workers.heartbeat import LeaseKeeper
from mcpq.workers.outcomes import RunOutcome
from mcpq.workers.runner import RunControl, RunDeps, run_task
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.timeout(60)

app = App("progress")


@app.tool
async def charge(ctx: Context, order: str) -> str:
    await ctx.report_progress(1, 3, "charging")
    await ctx.info(f"charging {order}")

    async def fetch() -> int:
        await asyncio.sleep(0.01)
        return 2

    memo, slept = await asyncio.gather(ctx.step("fetch", fetch), asyncio.sleep(0.02, "slept"))
    await ctx.report_progress(2.5, 3)
    await ctx.debug({"memo": memo}, logger_name="shop.charge")
    await ctx.warning(slept)
    return "charged"


@app.tool
def ask_between_logs(ctx: Context) -> str:
    ctx.info("before")
    answer = ctx.elicit("Name?", schema=str)
    ctx.error(f"after {answer.data}")
    return str(answer.data)


@app.resource("shop://policy")
def policy() -> str:
    return "refunds within 30 days"


@app.resource("shop://orders/{number}")
def order(number: int) -> dict[str, int]:
    return {"order": number}


@app.tool
async def quote_policy(ctx: Context, uri: str) -> str:
    contents = await ctx.read_resource(uri)
    return str(contents[0]["text"])


@app.tool
def go_there(ctx: Context) -> str:
    return ctx.elicit_url("Sign in at the bank", "https://bank.example/login").action


def settings(redis_url: str, **more: Any) -> Settings:
    return Settings(redis_url=redis_url, lease_s=2.0, **more)


@pytest.fixture
def deps(redis_process: RedisProcess, store: Any, keys: Keys) -> Iterator[RunDeps]:
    s = settings(redis_process.url, input_hold_s=0.2)  # a question parks the run at once
    wakeups = Wakeups(sync_client(s), keys)
    yield RunDeps(s, store, app.registry, LeaseKeeper(store, 2.0, 1.0), wakeups)


def run(deps: RunDeps, ref: str, tool: str) -> RunOutcome:
    control = RunControl(terminate=None, on_state=lambda state: None)
    return run_task(deps, Run(tool=tool, ref=ref, queue="tools-q"), control)


def test_a_synchronous_calls_progress_and_messages_are_stored_for_its_stream(  # type: ignore[no-untyped-def]
    deps, store, tasks, caplog
) -> None:
    tasks.tool = "charge"
    ref = tasks.new(sync=True, arguments={"order": "o-7"})
    with caplog.at_level(logging.DEBUG, logger="mcpq.tool"):
        assert run(deps, ref, "charge") is RunOutcome.COMPLETED
    record = store.record(ref)
    assert record.status is TaskStatus.COMPLETED and record.logs == 3
    assert store.logs(ref, 0, record.logs) == [
        {"level": "info", "data": "charging o-7"},
        {"level": "debug", "data": {"memo": 2}, "logger": "shop.charge"},
        {"level": "warning", "data": "slept"},
    ]
    # The worker's log has them too, each at its level, under the tool's (or logger's) name.
    shown = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "mcpq.tool"]
    assert shown == [
        ("INFO", "charge: charging o-7"),
        ("DEBUG", 'shop.charge: {"memo":2}'),
        ("WARNING", "charge: slept"),
    ]


def test_progress_numbers_reach_the_store_while_the_tool_runs(  # type: ignore[no-untyped-def]
    deps, store, tasks
) -> None:
    # These deps have no report flusher: each report is written at once (the stream would see
    # each number; with the delay, the latest of those made close together).
    seen: list[tuple[float | None, float | None, str]] = []
    tasks.tool = "charge"
    ref = tasks.new(sync=True, arguments={"order": "o-8"})
    thread = threading.Thread(target=run, args=(deps, ref, "charge"))
    real = store.report

    def spy(*args: Any, **kwargs: Any) -> Any:
        reply = real(*args, **kwargs)
        record = store.record(ref)
        seen.append((record.progress, record.total, record.message))
        return reply

    store.report = spy
    try:
        thread.start()
        thread.join(20)
    finally:
        del store.report
    assert (1.0, 3.0, "charging") in seen
    assert (2.5, 3.0, "2.5/3") in seen, "no message: the numbers are the status"


def test_a_replay_sends_no_message_twice(deps, store, tasks) -> None:  # type: ignore[no-untyped-def]
    tasks.tool = "ask_between_logs"
    ref = tasks.new(sync=True, arguments={})
    assert run(deps, ref, "ask_between_logs") is RunOutcome.PARKED
    _, stored = store.read(ref, tasks.owner)
    [key] = stored
    store.answer(ref, tasks.owner, {key: {"action": "accept", "content": {"value": "Ada"}}}, 30_000)
    assert run(deps, ref, "ask_between_logs") is RunOutcome.COMPLETED  # made again from the top
    record = store.record(ref)
    assert store.logs(ref, 0, record.logs) == [
        {"level": "info", "data": "before"},
        {"level": "error", "data": "after Ada"},
    ]


def test_a_tasks_messages_go_to_the_workers_log_only(  # type: ignore[no-untyped-def]
    deps, store, tasks, caplog
) -> None:
    tasks.tool = "charge"
    ref = tasks.new(arguments={"order": "o-9"})
    with caplog.at_level(logging.INFO, logger="mcpq.tool"):
        assert run(deps, ref, "charge") is RunOutcome.COMPLETED
    assert store.record(ref).logs == 0
    assert "charge: charging o-9" in [r.getMessage() for r in caplog.records]


def test_a_url_question_is_stored_with_an_id_the_same_in_every_run(  # type: ignore[no-untyped-def]
    deps, store, tasks
) -> None:
    tasks.tool = "go_there"
    forms_only = tasks.new(arguments={})  # the client declared elicitation without "url"
    assert run(deps, forms_only, "go_there") is RunOutcome.COMPLETED
    refused = store.record(forms_only).result
    assert refused["isError"] and "'elicitation.url' capability" in refused["content"][0]["text"]
    ref = tasks.new(arguments={}, caps={"elicitation": {"form": {}, "url": {}}})
    assert run(deps, ref, "go_there") is RunOutcome.PARKED
    _, stored = store.read(ref, tasks.owner)
    [(key, raw)] = stored.items()
    params = json.loads(raw)["params"]
    assert params["mode"] == "url" and params["url"] == "https://bank.example/login"
    assert len(params["elicitationId"]) == 32
    store.answer(ref, tasks.owner, {key: {"action": "accept"}}, 30_000)
    asked: list[dict[str, Any]] = []
    real = store.request_input

    def spy(ref: str, gen: int, requests: dict[str, Any]) -> Any:
        asked.append(requests)
        return real(ref, gen, requests)

    store.request_input = spy
    try:  # the replay asks the same question (its answer is stored), with the same id
        assert run(deps, ref, "go_there") is RunOutcome.COMPLETED
    finally:
        del store.request_input
    assert [r[key]["params"]["elicitationId"] for r in asked] == [params["elicitationId"]]
    assert store.record(ref).result["content"][0]["text"] == "accept"


@pytest.mark.parametrize(
    ("uri", "text", "error"),
    [
        ("shop://policy", "refunds within 30 days", False),
        ("shop://orders/7", '{"order":7}', False),
        ("shop://orders/seven", "Invalid resource URI shop://orders/seven", True),
        ("shop://nothing", "No resource at shop://nothing", True),
    ],
)
def test_a_tool_reads_a_resource_of_its_server(  # type: ignore[no-untyped-def]
    deps, store, tasks, uri, text, error
) -> None:
    tasks.tool = "quote_policy"
    ref = tasks.new(arguments={"uri": uri})
    assert run(deps, ref, "quote_policy") is RunOutcome.COMPLETED
    result = store.record(ref).result
    assert bool(result.get("isError")) is error
    assert result["content"][0]["text"].startswith(text)
