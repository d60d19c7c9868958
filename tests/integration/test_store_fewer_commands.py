"""Fewer Redis commands per task, without changing what clients see:

- status reports are written late (``workers.reports``): a run that ends within
  ``MCPQ_REPORT_DELAY_MS`` spends no write on them, a run that goes on shows the latest one,
  counted as every report it stands for, and a run's other writes never overtake its report;
- the scripts stamp Redis's time without a ``TIME`` each (``shared.store.clock``);
- a claim moves the task's deadline in the due index instead of between two indexes."""

from __future__ import annotations

import time

import pytest

from shared.errors import TaskCancelled
from shared.store import Reply, TaskStatus
from tests.integration.conftest import RedisClock, TaskFactory
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


def commandstats(store: WhiteBoxStore) -> dict[str, int]:
    stats = store.redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def test_a_run_s_claim_and_finish_cost_twelve_redis_commands(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref = tasks.new()
    store.now_ms()  # the clock is read (TIME) before, not during
    before = commandstats(store)
    claim = store.claim(ref, 5_000)
    assert store.finish(ref, claim.gen, TaskStatus.COMPLETED, RESULT) is Reply.OK
    after = commandstats(store)
    spent = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name)}
    spent.pop("info", None)
    assert spent == {
        "evalsha": 2,
        # claim: one read of the hash, one write, its lease in the due index
        "hgetall": 1,
        "hset": 2,
        "zadd": 1,
        # finish: the fence's read, the outcome's counter, the change's push, and the task
        # leaves the due, active and expiry indexes
        "hmget": 1,
        "hincrby": 1,
        "publish": 1,
        "zrem": 3,
    }, spent


def test_a_lease_left_in_the_legacy_index_is_still_swept(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    # As a worker of the release before the due index left it: its lease in `leases` only
    ref, _ = tasks.running(lease_ms=50)
    shard = store.keys.at(ref)
    lease = int(field(store, ref, "lease") or 0)
    store.redis.zrem(shard.unclaimed, ref)
    store.redis.zadd(shard.leases, {ref: lease})
    clock.wait_past(lease)
    assert [due.ref for due in store.sweep(5_000)] == [ref]
    assert store.redis.zscore(shard.leases, ref) is None
    assert store.redis.zscore(shard.unclaimed, ref) is not None  # re-armed in the due index


def test_a_live_lease_with_a_stale_deadline_keeps_one_at_its_lease(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    # A writer of the previous release (its mark_enqueued) moved a running task's deadline
    ref, _ = tasks.running(lease_ms=60_000)
    shard = store.keys.at(ref)
    lease = int(field(store, ref, "lease") or 0)
    store.redis.zadd(shard.unclaimed, {ref: clock.now_ms() - 1})
    assert store.sweep(5_000) == []  # the run is alive: nothing to send again
    # and the task is not left without a deadline: it is back at its lease's
    assert store.redis.zscore(shard.unclaimed, ref) == lease
