"""Typed elicitation run the way a worker runs it (``run_task`` on a real Redis): the stored
question's ``requestedSchema`` is the model's form, the answer comes back as a validated
instance, in a sync tool (a dataclass, ``schema=``) and an async one (a pydantic model,
FastMCP's ``response_type=``); a declined question has no data."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pydantic
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
from tests.support.procs import wait_until
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.timeout(60)

app = App("typed")


@dataclass
class Refund:
    cents: int


class Approval(pydantic.BaseModel):
    ok: bool
    note: str | None = None


@app.tool(task="required")
def refund(ctx: Context, order: str) -> dict[str, Any]:
    answer = ctx.elicit(f"Refund {order}: how much?", schema=Refund)
    data = answer.data
    return {"action": answer.action, "cents": None if data is None else data.cents}


@app.tool(task="required")
async def approve(change: str, ctx: Context) -> dict[str, Any]:
    answer = await ctx.elicit(f"Apply {change}?", response_type=Approval)
    data = answer.data
    return {"action": answer.action, "ok": None if data is None else data.ok}


@pytest.fixture
def deps(redis_process: RedisProcess, store: Any, keys: Keys) -> Iterator[RunDeps]:
    settings = Settings(redis_url=redis_process.url, lease_s=2.0)
    wakeups = Wakeups(sync_client(settings), keys)
    yield RunDeps(settings, store, app.registry, LeaseKeeper(store, 2.0, 1.0), wakeups)


def run_until_asked(deps: RunDeps, store: Any, tasks: Any, tool: str, arguments: dict[str, Any]):  # type: ignore[no-untyped-def]
    tasks.tool = tool
    ref = tasks.new(arguments=arguments)
    outcomes: list[RunOutcome] = []
    control = RunControl(terminate=None, on_state=lambda state: None)
    run = Run(tool=tool, ref=ref, queue="tools-q")
    thread = threading.Thread(target=lambda: outcomes.append(run_task(deps, run, control)))
    thread.start()
    wait_until(lambda: store.status(ref) == TaskStatus.INPUT_REQUIRED, 10, 0.01, "a question")
    _, stored = store.read(ref, tasks.owner)  # the outstanding questions, as stored (JSON)
    inputs = {key: json.loads(value) for key, value in stored.items()}
    return ref, thread, outcomes, inputs


@pytest.mark.parametrize(
    ("tool", "arguments", "content", "expected"),
    [
        ("refund", {"order": "o-1"}, {"cents": 250}, {"action": "accept", "cents": 250}),
        ("approve", {"change": "v2"}, {"ok": True}, {"action": "accept", "ok": True}),
    ],
    ids=["sync-dataclass", "async-pydantic"],
)
def test_the_answer_is_a_validated_instance(  # type: ignore[no-untyped-def]
    deps, store, tasks, tool, arguments, content, expected
) -> None:
    ref, thread, outcomes, inputs = run_until_asked(deps, store, tasks, tool, arguments)
    [(key, request)] = inputs.items()
    schema = request["params"]["requestedSchema"]
    assert schema["type"] == "object" and set(schema["properties"]) == set(
        {"refund": ["cents"], "approve": ["ok", "note"]}[tool]
    )
    store.answer(ref, tasks.owner, {key: {"action": "accept", "content": content}}, 30_000)
    thread.join(20)
    assert outcomes == [RunOutcome.COMPLETED]
    assert store.record(ref).result["structuredContent"] == expected


def test_a_declined_question_has_no_data(deps, store, tasks) -> None:  # type: ignore[no-untyped-def]
    ref, thread, outcomes, inputs = run_until_asked(deps, store, tasks, "approve", {"change": "x"})
    [key] = inputs
    store.answer(ref, tasks.owner, {key: {"action": "decline"}}, 30_000)
    thread.join(20)
    assert outcomes == [RunOutcome.COMPLETED]
    assert store.record(ref).result["structuredContent"] == {"action": "decline", "ok": None}
