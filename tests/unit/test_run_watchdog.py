"""A run that stops making progress cannot keep its lease forever.

``RunContext.busy_for`` measures how long the tool has run its own code since its last context
call; the heartbeat's ``Watchdog`` fails the task and terminates the run once that passes the
tool's ``max_run_s``. No Redis here: the store is a stand-in that answers like a healthy one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from mcpq.shared.errors import TaskCancelled
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.shared.store import Renewal, Reply, StepStart, TaskStatus
from mcpq.shared.tools import ToolContext
from mcpq.workers.context import RunContext
from mcpq.workers.heartbeat import KeptRun, LeaseKeeper, Watchdog
from mcpq.workers.interrupts import RunSuperseded
from tests.support.white_box import quiet_watch


class HealthyStore:
    """Answers the calls a context and a heartbeat make, as Redis would for a live run."""

    def __init__(self) -> None:
        self.renewals = 0

    def run_state(self, ref: str) -> tuple[TaskStatus, int]:
        return TaskStatus.WORKING, 1

    def report(self, ref: str, gen: int, message: str, **numbers: Any) -> Reply:
        return Reply.OK

    def begin_step(self, ref: str, gen: int, name: str, lease_ms: int) -> StepStart:
        return StepStart(Reply.OK)

    def save_step(self, ref: str, gen: int, name: str, value: Any) -> tuple[Reply, Any]:
        return Reply.OK, value

    def renew_many(
        self, runs: list[tuple[str, int]], lease_ms: int, min_peers: int = 0
    ) -> list[Renewal]:
        self.renewals += len(runs)
        return [Renewal(Reply.OK, TaskStatus.WORKING) for _ in runs]


def context() -> RunContext:
    store = HealthyStore()
    return RunContext(store, "ref", 1, {}, hold_s=30.0, watch=quiet_watch())  # type: ignore[arg-type]


def test_busy_for_counts_the_tools_own_code_only() -> None:
    ctx = context()
    time.sleep(0.05)
    assert ctx.busy_for() >= 0.05  # from the start of the run to its first context call

    inside: list[float] = []
    waiter = threading.Thread(target=ctx.sleep, args=(0.3,))
    waiter.start()
    time.sleep(0.15)
    inside.append(ctx.busy_for())  # sleeping in ctx is the context's business, not a stall
    waiter.join()
    assert inside == [0.0]
    assert ctx.busy_for() < 0.05  # the clock restarted when sleep returned

    time.sleep(0.05)
    ctx.report("still here")
    assert ctx.busy_for() < 0.05


def test_a_steps_function_is_the_tools_own_code() -> None:
    ctx = context()
    seen: list[float] = []

    def slow_effect() -> int:
        time.sleep(0.1)
        seen.append(ctx.busy_for())
        return 1

    assert ctx.step("effect", slow_effect) == 1
    assert seen and seen[0] >= 0.1  # a step that hangs is a hung tool


def run_heartbeat(busy_s: float, limit_s: float) -> tuple[list[str], HealthyStore]:
    events: list[str] = []
    store = HealthyStore()
    watchdog = Watchdog(lambda: busy_s, limit_s, lambda: events.append("failed"))
    keeper = LeaseKeeper(store, lease_s=0.15, grace_s=1.0)  # type: ignore[arg-type]
    run = KeptRun(
        "ref",
        1,
        on_cancel=lambda reply: events.append("cancel seen"),
        terminate=lambda: events.append("terminated"),
        watchdog=watchdog,
    )
    with keeper.keep(run):
        time.sleep(0.6)
    return events, store


def test_the_heartbeat_fails_then_terminates_a_run_past_its_limit() -> None:
    events, store = run_heartbeat(busy_s=5.0, limit_s=2.0)
    assert events == ["failed", "terminated"]  # the task's end is written before the kill
    assert store.renewals == 0  # a stalled run's lease is not renewed


def test_the_heartbeat_keeps_renewing_a_run_within_its_limit() -> None:
    events, store = run_heartbeat(busy_s=1.0, limit_s=2.0)
    assert events == []
    assert store.renewals >= 3


def test_a_limit_of_zero_means_no_limit() -> None:
    events, _ = run_heartbeat(busy_s=1e9, limit_s=0.0)
    assert events == []


def test_each_tool_may_set_its_own_limit_and_bad_ones_are_refused() -> None:
    registry = Registry()

    @registry.tool(max_run_s=2.5)
    def quick(ctx: ToolContext) -> str:
        return "ok"

    @registry.tool()
    def default(ctx: ToolContext) -> str:
        return "ok"

    settings = Settings.from_env({"MCPQ_MAX_RUN_S": "90"})
    assert settings.max_run_s == 90
    assert registry.tools["quick"].run_limit_s(settings.max_run_s) == 2.5
    assert registry.tools["default"].run_limit_s(settings.max_run_s) == 90
    assert Settings().max_run_s == 3600
    with pytest.raises(ValueError, match="max_run_s"):
        registry.tool(max_run_s=-1)(default)
    with pytest.raises(ValueError, match="MCPQ_MAX_RUN_S"):
        Settings.from_env({"MCPQ_MAX_RUN_S": "-5"})


@pytest.mark.parametrize(
    ("reply", "raised"),
    [
        (Reply.TERMINAL, TaskCancelled),
        (Reply.SUPERSEDED, RunSuperseded),
        (Reply.GONE, RunSuperseded),
    ],
)
def test_a_waiting_run_ends_as_what_the_lease_keeper_saw(
    reply: Reply, raised: type[BaseException]
) -> None:
    """A cancel ends a waiting run ``cancelled``; a run taken over (its lease lapsed, another
    worker has the task) ends ``superseded``: the task itself was not cancelled."""
    ctx = context()
    failure: list[BaseException] = []

    def wait() -> None:
        try:
            ctx.sleep(5.0)
        except BaseException as exc:  # RunSuperseded is a BaseException
            failure.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.05)
    ctx.interrupt(reply)
    waiter.join(2.0)
    assert not waiter.is_alive() and len(failure) == 1 and isinstance(failure[0], raised)
