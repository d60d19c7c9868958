"""A create's admission (the principal's open tasks, its token bucket, a single-use
``requestState``) on a store of one shard (checked in ``create.lua``) and of three (checked in
``admit.lua`` on the principal's home shard, then created on the task's): the same answers."""

from __future__ import annotations

import pytest

from mcpq.shared.store import Admission, NewTask, Refused, TaskStatus, task_ref
from mcpq.shared.store.calls import ADMIT_GRACE_MS

OWNER = "principal-quota"


def spec(name: str) -> NewTask:
    return NewTask(task_ref(name), "echo", "q", OWNER, {}, {}, 60_000, 500)


def quota_key(store, admit: Admission) -> str:
    return store.keys.quota(admit.principal_key, admit.kind)


def test_the_open_task_quota_refuses_then_admits_once_a_task_ended(store) -> None:
    admit = Admission("pk-open", max_open=2)
    first, second = spec("a-1"), spec("a-2")
    assert store.create(first, 30_000, admit) is not None
    assert store.create(second, 30_000, admit) is not None
    with pytest.raises(Refused) as refused:
        store.create(spec("a-3"), 30_000, admit)
    assert refused.value.limit == "tasks" and refused.value.retry_ms > 0
    assert store.record(task_ref("a-3")) is None, "a refused create writes nothing"
    # When one task ends, its slot is free again (ended members leave lazily)
    claim = store.claim(first.ref, 10_000)
    assert store.finish(first.ref, claim.gen, TaskStatus.COMPLETED, {"content": []}) == "OK"
    assert store.create(spec("a-3"), 30_000, admit) is not None
    assert set(store.redis.zrange(quota_key(store, admit), 0, -1)) == {
        second.ref,
        task_ref("a-3"),
    }
    with pytest.raises(Refused):
        store.create(spec("a-4"), 30_000, admit)


def test_a_member_without_a_task_is_dropped_only_after_the_grace(store, clock) -> None:
    admit = Admission("pk-grace", max_open=1)
    key = quota_key(store, admit)
    # A create admitted whose task was never written (its web process died in between)
    store.redis.zadd(key, {task_ref("never-written"): clock.now_ms()})
    store.redis.pexpire(key, 60_000)
    if store.keys.shards > 1:
        # Within the grace it still counts: it may be a create between its two steps.
        with pytest.raises(Refused):
            store.create(spec("g-1"), 30_000, admit)
    store.redis.zadd(key, {task_ref("never-written"): clock.now_ms() - ADMIT_GRACE_MS - 1})
    assert store.create(spec("g-1"), 30_000, admit) is not None
    assert store.redis.zrange(key, 0, -1) == [task_ref("g-1")]


def test_a_single_use_state_creates_one_task(store) -> None:
    admit = Admission("pk-once", once="jti-1", once_ttl_ms=60_000)
    assert store.create(spec("o-1"), 30_000, admit) is not None
    with pytest.raises(Refused) as refused:
        store.create(spec("o-2"), 30_000, admit)
    assert refused.value.limit == "replayed"
    assert store.record(task_ref("o-2")) is None
    assert store.create(spec("o-3"), 30_000, Admission("pk-once", once="jti-2", once_ttl_ms=60_000))


def test_the_rate_limit_refuses_and_a_refusal_spends_nothing(store) -> None:
    admit = Admission("pk-rate", max_open=5, rate_per_s=0.01, burst=1)
    assert store.create(spec("r-1"), 30_000, admit) is not None
    with pytest.raises(Refused) as refused:
        store.create(spec("r-2"), 30_000, admit)
    assert refused.value.limit == "rate" and refused.value.retry_ms > 90_000
    # The refused create took no quota slot
    assert store.redis.zrange(quota_key(store, admit), 0, -1) == [task_ref("r-1")]


def test_admission_keys_share_the_principal_home_slot(store) -> None:
    admit = Admission("pk-home", max_open=1, rate_per_s=1.0, burst=1, once="j", once_ttl_ms=1)
    home = store.keys.home(admit.principal_key)
    keys = [home.quota("pk-home", "tasks"), home.bucket("pk-home"), home.used_state("j")]
    assert all(key.startswith(home.root + ":") for key in keys)
    assert store.keys.quota("pk-home", "tasks") == keys[0]
