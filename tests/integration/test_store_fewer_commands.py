"""Fewer Redis commands per task, without changing what clients see:

- status reports are written late (``mcpq.workers.reports``): a run that ends within
  ``MCPQ_REPORT_DELAY_MS`` spends no write on them, a run that goes on shows the latest one,
  counted as every report it stands for, and a run's other writes never overtake its report;
- the scripts stamp Redis's time without a ``TIME`` each (``mcpq.shared.store.clock``);
- a claim moves the task's deadline in the due index instead of between two indexes;
- the due index holds a task until its expiry at the latest (no expiry index of its own);
- a change is published only once a client watches the task."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis

from mcpq.shared.errors import TaskCancelled
from mcpq.shared.store import Reply, TaskStatus, TaskStore, task_ref
from mcpq.shared.store.calls import NewTask
from mcpq.shared.store.records import POLL_FIELDS
from mcpq.shared.store.tally import StatsTally
from mcpq.workers.context import RunContext
from mcpq.workers.reports import ReportFlusher
from tests.integration.conftest import RedisClock, TaskFactory
from tests.support.white_box import WhiteBoxStore, field, heard, in_index, quiet_watch

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


def spent_on(store: WhiteBoxStore, work: Any) -> dict[str, int]:
    """The Redis commands ``work()`` costs (scripts' own commands included), by name."""
    store.now_ms()  # the clock is read (TIME) before, not during
    before = commandstats(store)
    work()
    after = commandstats(store)
    spent = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name)}
    spent.pop("info", None)
    return spent


def test_a_run_s_claim_and_finish_cost_ten_redis_commands(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref = tasks.new()

    def run() -> None:
        claim = store.claim(ref, 5_000)
        assert store.finish(ref, claim.gen, TaskStatus.COMPLETED, RESULT) is Reply.OK

    assert spent_on(store, run) == {
        "evalsha": 2,
        # claim: one read of the hash, one write, its lease in the due index
        "hgetall": 1,
        "hset": 2,
        "zadd": 1,
        # finish: the fence's read, the outcome's counter, and the task leaves the due and
        # active indexes (no PUBLISH: nobody watches it; no expiry index to leave)
        "hmget": 1,
        "hincrby": 1,
        "zrem": 2,
    }


def test_a_create_writes_no_expiry_index(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    spent = spent_on(store, lambda: tasks.new(ttl_ms=600_000))
    # the duplicate check, the hash and its TTL, the due and active indexes, the counter
    assert spent == {"evalsha": 1, "exists": 1, "hset": 1, "pexpireat": 1, "zadd": 2, "hincrby": 1}


def test_the_due_index_holds_a_task_until_its_expiry_at_the_latest(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    # A task whose TTL ends before its start-by deadline is due at its expiry
    short = tasks.new(ttl_ms=200, unclaimed_ms=60_000)
    long = tasks.new(ttl_ms=600_000, unclaimed_ms=60_000)
    expire_at = float(field(store, short, "expire_at") or 0)
    assert in_index(store, store.keys.at(short).unclaimed, short) == expire_at
    created = float(field(store, long, "created_ms") or 0)
    assert in_index(store, store.keys.at(long).unclaimed, long) == created + 60_000
    # Claimed with a lease past its expiry: still due at its expiry
    claim = store.claim(short, 60_000)
    assert claim.reply is Reply.OK
    assert in_index(store, store.keys.at(short).unclaimed, short) == expire_at
    # Once it expired unfinished, the sweep finds it due and drops it from the active index
    clock.wait_past(int(expire_at))
    wait_for(lambda: store.record(short) is None)
    assert store.sweep(60_000) == []
    assert in_index(store, store.keys.at(short).active, short) is None
    assert in_index(store, store.keys.at(short).unclaimed, short) is None
    assert in_index(store, store.keys.at(long).active, long) is not None


def test_a_parked_task_stays_due_at_its_expiry_only(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, _ = tasks.waiting(parked=True)
    expire_at = float(field(store, ref, "expire_at") or 0)
    assert in_index(store, store.keys.at(ref).unclaimed, ref) == expire_at
    # (the last answer re-arms its start-by deadline: see test_store_scripts)


def test_the_legacy_expiry_index_is_still_drained(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    # As the release before wrote it: an unfinished task with a TTL, in `expiry` too
    ref = tasks.new(ttl_ms=100)
    shard = store.keys.at(ref)
    at = int(field(store, ref, "expire_at") or 0)
    store.redis.zrem(shard.unclaimed, ref)
    store.redis.zadd(shard.expiry, {ref: at})
    clock.wait_past(at)
    wait_for(lambda: store.record(ref) is None)
    store.sweep(60_000)
    assert in_index(store, shard.expiry, ref) is None
    assert in_index(store, shard.active, ref) is None


def test_changes_are_pushed_only_once_the_task_is_watched(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    with heard(store, ref, mark=False) as unwatched:
        assert store.report(ref, gen, "halfway") is Reply.OK
    assert unwatched == []  # nobody marked it: no PUBLISH (clients that poll cost none)
    # A watcher's read marks it, in the read's own script (another principal's read does not)
    assert store.read(ref, "someone-else", watching=True) is None
    assert field(store, ref, "watch") is None
    assert store.read(ref, tasks.owner, watching=True) is not None
    assert field(store, ref, "watch") == "1"
    with heard(store, ref, mark=False) as watched:
        assert store.finish(ref, gen, TaskStatus.COMPLETED, RESULT) is Reply.OK
    assert watched == [store.keys.task(ref)]


def test_a_poll_reads_the_task_without_the_call_that_made_it(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref = tasks.new(arguments={"text": "x" * 4000})
    found = store.read(ref, tasks.owner)
    assert found is not None
    polled, _ = found
    # The state a tasks/get shows is there; the call's own (largest) fields stay in Redis.
    assert polled["status"] == "working" and polled["owner"] == tasks.owner
    assert {"args", "caps", "pre"}.isdisjoint(polled)
    found = store.read(ref, tasks.owner, call=True)  # a synchronous call's retry compares them
    assert found is not None
    full, _ = found
    assert {"args", "caps", "pre"} <= set(full)
    # A poll reads the fields it needs (POLL_FIELDS), each as the whole read has it.
    assert {k: v for k, v in full.items() if k in POLL_FIELDS} == polled
    assert set(polled) == set(POLL_FIELDS) & set(full)


def test_marking_skips_gone_and_ended_tasks(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    live = tasks.new()
    ended, gen = tasks.running()
    assert store.finish(ended, gen, TaskStatus.COMPLETED, RESULT) is Reply.OK
    gone = task_ref("never-created")
    assert store.mark_watched(live, ended, gone) == 1
    assert store.redis.exists(store.keys.task(gone)) == 0  # not brought back as a stub hash
    assert field(store, ended, "watch") is None
    assert store.mark_watched(live) == 0  # marked already


def test_a_synchronous_call_s_task_is_watched_from_its_create(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref = task_ref("a-hidden-sync-task")
    spec = NewTask(ref, "echo", "tools-q", tasks.owner, {}, {}, 60_000, 500, sync=True)
    assert store.create(spec, 30_000) is not None
    claim = store.claim(ref, 5_000)
    with heard(store, ref, mark=False) as ended:
        assert store.finish(ref, claim.gen, TaskStatus.COMPLETED, RESULT) is Reply.OK
    assert ended == [store.keys.task(ref)]


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
    ref, _ = tasks.running(lease_ms=60_000, ttl_ms=600_000)
    shard = store.keys.at(ref)
    lease = int(field(store, ref, "lease") or 0)
    store.redis.zadd(shard.unclaimed, {ref: clock.now_ms() - 1})
    assert store.sweep(5_000) == []  # the run is alive: nothing to send again
    # and the task is not left without a deadline: it is back at its lease's
    assert store.redis.zscore(shard.unclaimed, ref) == lease


def test_a_tallied_store_counts_creates_and_outcomes_in_one_write_later(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    # The web's and the workers' stores (MCPQ_STATS_FLUSH_MS): the scripts do not count
    tally = StatsTally(lambda: store.redis, every_s=3600)  # flushed by hand here
    counted = TaskStore(store.redis, store.keys, tally=tally)
    refs = [task_ref(f"tallied-{i}") for i in range(3)]
    for ref in refs:
        spec = NewTask(ref, "echo", "tools-q", tasks.owner, {}, {}, 60_000, 500)
        spent = spent_on(store, lambda spec=spec: counted.create(spec, 30_000))
        assert "hincrby" not in spent, spent
    claims = [counted.claim(ref, 5_000) for ref in refs]
    for ref, claim in zip(refs[:2], claims[:2], strict=True):
        spent = spent_on(
            store, lambda r=ref, g=claim.gen: counted.finish(r, g, TaskStatus.COMPLETED, RESULT)
        )
        assert "hincrby" not in spent, spent
    # A finish the fence refuses counts nothing
    assert counted.finish(refs[2], claims[2].gen + 1, TaskStatus.COMPLETED, RESULT) is (
        Reply.SUPERSEDED
    )
    pending = tally.pending()
    assert sum(pending.values()) == 5  # 3 created and 2 completed, by counter and shard
    assert not any(store.redis.hget(k.stats, "created:echo") for k in store.keys.all_shards)
    # One write of everything that accumulated: one HINCRBY per counter and shard
    spent = spent_on(store, tally.flush)
    assert spent["hincrby"] == len(pending), spent
    created = sum(
        int(store.redis.hget(k.stats, "created:echo") or 0) for k in store.keys.all_shards
    )
    done = sum(int(store.redis.hget(k.stats, "completed:echo") or 0) for k in store.keys.all_shards)
    assert (created, done) == (3, 2)
    assert tally.pending() == {} and tally.flush()  # nothing left: nothing written twice


def test_counts_wait_for_a_redis_that_failed_their_write(
    tasks: TaskFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # A client that cannot connect: the counts are kept for the next round
    dead = redis.Redis(port=1, socket_connect_timeout=0.2)
    tally = StatsTally(lambda: dead, every_s=3600)
    tally.add("stats", "created:echo", 2)
    assert tally.flush() is False
    assert tally.pending() == {("stats", "created:echo"): 2}
    # The last write (at exit, or when its store closes) cannot keep them: it says they are lost
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mcpq.store"):
        tally.close()
    assert tally.pending() == {}
    assert [r.getMessage() for r in caplog.records] == [
        "2 stats counts lost: Redis failed their last write (ConnectionError)"
    ]
