"""Fewer Redis commands per task, without changing what clients see:

- status reports are written late (``workers.reports``): a run that ends within
  ``MCPQ_REPORT_DELAY_MS`` spends no write on them, a run that goes on shows the latest one,
  counted as every report it stands for, and a run's other writes never overtake its report;
- the scripts stamp Redis's time without a ``TIME`` each (``shared.store.clock``)."""

from __future__ import annotations

import time

import pytest

from shared.errors import TaskCancelled
from shared.store import Reply, TaskStatus
from tests.integration.conftest import TaskFactory
from tests.support.white_box import WhiteBoxStore, field, quiet_watch
from workers.context import RunContext
from workers.reports import ReportFlusher

RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
DELAY_S = 0.2


def context(store: WhiteBoxStore, ref: str, gen: int, flusher: ReportFlusher) -> RunContext:
    return RunContext(store, ref, gen, {}, 0.05, watch=quiet_watch(), reports=flusher)


def wait_for(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_run_that_ends_within_the_delay_writes_no_report(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    ctx = context(store, ref, gen, ReportFlusher(DELAY_S))
    ctx.report("computing")
    ctx.discard_report()  # what the runner does when the tool returns
    assert store.finish(ref, gen, TaskStatus.COMPLETED, RESULT) is Reply.OK
    time.sleep(DELAY_S * 2)  # past the flush: nothing was left to write
    assert field(store, ref, "reports") in {None, "0"}
    assert field(store, ref, "status") == "completed"


def test_the_latest_report_is_written_once_counted_as_all(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    ctx = context(store, ref, gen, ReportFlusher(DELAY_S))
    for step in range(1, 4):
        ctx.report(f"step {step}/3")
    made_ms = store.now_ms()
    assert field(store, ref, "reports") in {None, "0"}  # not yet: within the delay
    wait_for(lambda: field(store, ref, "reports") == "3")
    record = store.record(ref)
    assert record is not None and record.message == "step 3/3"
    # Written DELAY_S later, but lastUpdatedAt says when the tool reported
    assert made_ms - 100 <= record.updated_ms <= made_ms
    ctx.report("step 4")  # a later report: scheduled again
    wait_for(lambda: field(store, ref, "reports") == "4")


def test_a_report_is_written_before_the_run_asks_for_input(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    ctx = context(store, ref, gen, ReportFlusher(60.0))  # the flusher alone would never write
    ctx.report("about to ask")
    ctx._poll({"name": {}})  # the ask's first write
    # The report went first (then the new state cleared the text, as any state change does).
    assert field(store, ref, "reports") == "1"
    record = store.record(ref)
    assert record is not None and (record.status, record.message) == ("input_required", "")


def test_a_cancel_reaches_the_run_through_a_late_report(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    ctx = context(store, ref, gen, ReportFlusher(DELAY_S))
    ctx.report("working on it")
    assert store.cancel(ref, tasks.owner, "stop").reply == "CANCELLED"
    # The late write is refused (the task ended): the run is interrupted, and its next call
    # raises, as it would once the lease keeper had seen the cancel.
    wait_for(ctx.cancel_seen.is_set)
    with pytest.raises(TaskCancelled):
        ctx.report("still working")
    assert field(store, ref, "reports") in {None, "0"}


def time_calls(store: WhiteBoxStore) -> int:
    stats = store.redis.info("commandstats")
    return int(stats.get("cmdstat_time", {}).get("calls", 0))


def test_scripts_stamp_redis_time_without_a_time_command_each(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    tasks.running()  # the store has read Redis's clock once
    before = time_calls(store)
    refs = [tasks.running()[0] for _ in range(5)]  # creates and claims: scripts that use `now`
    assert time_calls(store) == before  # no TIME: `now` came with the arguments
    seconds, micros = store.redis.time()
    redis_ms = int(seconds) * 1000 + int(micros) // 1000
    for ref in refs:
        record = store.record(ref)
        assert record is not None
        assert redis_ms - 1000 < record.created_ms <= redis_ms + 5  # on Redis's clock
