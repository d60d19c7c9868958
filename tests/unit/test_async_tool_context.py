"""An ``async def`` tool awaits its context's calls (``mcpq.workers.async_context``): they wait
off the tool's event loop, in the order they were made, and a cancel or a takeover still ends
the run as it would a sync one. No Redis: a stand-in store that answers like a live run's."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from mcpq.shared.errors import TaskCancelled
from mcpq.shared.registry import Registry
from mcpq.shared.store import InputPoll, Reply, StepStart, TaskStatus
from mcpq.shared.tools import Answer, ToolContext
from mcpq.workers.async_context import ROUND_TRIP_THREADS, AsyncRunContext
from mcpq.workers.context import RunContext
from mcpq.workers.execution import ToolCall
from mcpq.workers.interrupts import RunSuperseded
from tests.support.white_box import quiet_watch

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


class SlowStore:
    """Answers every question after ``delay`` seconds, as a user would; records the calls."""

    def __init__(self, delay: float = 0.3) -> None:
        self.delay = delay
        self.asked: list[list[str]] = []
        self.steps: dict[str, Any] = {}
        self.reports: list[str] = []

    def run_state(self, ref: str) -> tuple[TaskStatus, int]:
        return TaskStatus.WORKING, 1

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def report(self, ref: str, gen: int, message: str, *rest: Any, **numbers: Any) -> Reply:
        self.reports.append(message)
        return Reply.OK

    def request_input(self, ref: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        self.asked.append(list(requests))
        time.sleep(self.delay)  # blocks the calling thread, like a round trip and a wait
        answers = {key: {"action": "accept", "content": {"ok": True}} for key in requests}
        return InputPoll(Reply.OK, 0, answers)

    def begin_step(self, ref: str, gen: int, name: str, lease_ms: int) -> StepStart:
        if name in self.steps:
            return StepStart(Reply.OK, found=True, value=self.steps[name])
        return StepStart(Reply.OK)

    def save_step(self, ref: str, gen: int, name: str, value: Any) -> tuple[Reply, Any]:
        self.steps[name] = value
        return Reply.OK, value


def run_context(store: SlowStore) -> RunContext:
    return RunContext(store, "ref", 1, {}, hold_s=30.0, watch=quiet_watch())  # type: ignore[arg-type]


registry = Registry()


@registry.tool
async def survey(ctx: ToolContext, question: str) -> dict[str, Any]:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    answer = await ctx.elicit(question, SCHEMA)  # 0.3 s in the store: the loop ticks meanwhile
    during = ticks
    both = await asyncio.gather(ctx.elicit("first?", SCHEMA), ctx.elicit("second?", SCHEMA))
    await ctx.sleep(0.02)
    await ctx.sleep(0)

    async def fetch() -> str:
        await asyncio.sleep(0)
        return "fetched"

    fetched = await ctx.step("fetch", fetch)
    counted = ctx.step("count", lambda: 3)  # a plain fn: the step's value, no await
    ctx.report("halfway")  # no await needed
    await ctx.report("done")  # nor harmful
    ticker.cancel()
    return {"answer": answer, "ticks": during, "both": both, "step": fetched, "count": counted}


def test_an_async_tool_awaits_its_context_calls_off_its_event_loop() -> None:
    store = SlowStore()
    tool = registry.tools["survey"]
    assert tool.is_async
    view = AsyncRunContext(run_context(store))
    try:
        result = ToolCall(lambda: tool.call(view, {"question": "Go on?"})).here()
    finally:
        view.close()
    accepted = {"action": "accept", "content": {"ok": True}}
    assert result["answer"] == accepted and isinstance(result["answer"], Answer)
    # The loop ran the ticker while the answer was awaited: ~30 ticks in 0.3 s, none if blocked.
    assert result["ticks"] >= 10, result["ticks"]
    # Questions asked at once are numbered in the order they were made (the replay contract).
    assert store.asked == [["elicit-1"], ["elicit-2"], ["elicit-3"]]
    assert result["both"] == [accepted, accepted]
    assert (result["step"], result["count"]) == ("fetched", 3)
    assert store.steps == {"fetch": "fetched", "count": 3}
    assert store.reports == ["halfway", "done"]


SEEN: list[str] = []  # what `waits` caught (its arguments are validated copies)


@registry.tool
async def waits(ctx: ToolContext) -> str:
    seen = SEEN
    try:
        await ctx.sleep(30)
    except BaseException as exc:  # whichever comes first: the context's wait or the task's
        seen.append(type(exc).__name__)
        raise
    return "woke"


@pytest.mark.parametrize(
    ("reply", "raised"),
    [(Reply.TERMINAL, TaskCancelled), (Reply.SUPERSEDED, RunSuperseded)],
)
def test_a_cancel_or_a_takeover_ends_an_awaiting_async_tool_at_once(
    reply: Reply, raised: type[BaseException]
) -> None:
    """What the runner's lease keeper does (``on_cancel``): interrupt the context, cancel the
    tool's asyncio task; the run ends as a sync one would (cancelled, or superseded)."""
    ctx = run_context(SlowStore())
    view = AsyncRunContext(ctx)
    SEEN.clear()
    call = ToolCall(lambda: registry.tools["waits"].call(view, {}))

    def stop() -> None:
        time.sleep(0.1)
        ctx.interrupt(reply)
        call.interrupt(TaskCancelled if reply is Reply.TERMINAL else RunSuperseded)

    threading.Thread(target=stop).start()
    started = time.monotonic()
    with pytest.raises(raised):
        call.here()
    view.close()
    assert time.monotonic() - started < 2.0
    # The interrupted wait raises what a sync tool's would, or the cancelled task's await does.
    assert len(SEEN) == 1 and SEEN[0] in {raised.__name__, "CancelledError"}, SEEN


def test_a_plain_tool_keeps_values_and_refuses_an_async_step_fn() -> None:
    store = SlowStore(delay=0)
    ctx = run_context(store)
    assert ctx.elicit("ok?", SCHEMA) == {"action": "accept", "content": {"ok": True}}

    async def fetch() -> str:
        return "never"

    with pytest.raises(TypeError, match="fn is async: await the step in an async def tool"):
        ctx.step("fetch", fetch)
    assert store.steps == {}  # nothing ran, nothing stored


class WaitingStore(SlowStore):
    """Nobody answers until ``answered`` is set: every question waits (no park: a long hold)."""

    def __init__(self) -> None:
        super().__init__(delay=0)
        self.answered = False
        self.lock = threading.Lock()
        self.polls = 0

    def request_input(self, ref: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        with self.lock:
            self.polls += 1
        if not self.answered:
            return InputPoll(Reply.OK, len(requests), {})
        return super().request_input(ref, gen, requests)


def test_waiting_async_runs_hold_no_thread_each() -> None:
    # What one shared event loop per worker process needs: 500 runs await their answers on one
    # loop, and the process has no more threads than the shared pool of round trips.
    store = WaitingStore()
    runs = [
        RunContext(store, f"ref-{n}", 1, {}, hold_s=60.0, watch=quiet_watch())  # type: ignore[arg-type]
        for n in range(500)
    ]
    views = [AsyncRunContext(run) for run in runs]
    before = threading.active_count()

    async def everyone() -> tuple[int, list[Any]]:
        asking = [asyncio.ensure_future(view.elicit("ok?", SCHEMA)) for view in views]
        while store.polls < len(runs):  # every run asked, and waits
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        waiting = threading.active_count()
        assert not any(task.done() for task in asking)
        store.answered = True
        for run in runs:
            run.watch.notify()  # what the pub/sub listener does when an answer is stored
        return waiting, await asyncio.wait_for(asyncio.gather(*asking), 30)

    waiting, answers = asyncio.run(everyone())
    assert waiting - before <= ROUND_TRIP_THREADS, (before, waiting)
    assert answers == [{"action": "accept", "content": {"ok": True}}] * len(runs)
    for view in views:
        view.close()
