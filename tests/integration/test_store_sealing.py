"""The store with MCPQ_DATA_KEYS on a real Redis: every script's payloads sealed on the way in
and opened on the way out, and ``rotate_data``'s compare-and-set (``reseal.lua``)."""

from __future__ import annotations

import uuid

import redis

from mcpq.shared.sealing import new_data_key, sealed_kid
from mcpq.shared.store import Keys, NewTask, Reply, TaskStatus, TaskStore, calls, rotation, task_ref
from mcpq.shared.store.payloads import Payloads

MARK = f"zq{uuid.uuid4().hex[:12]}"
KEY1, KEY2 = new_data_key(), new_data_key()
KID1, KID2 = KEY1.split(":")[0], KEY2.split(":")[0]


def sealed_store(client: redis.Redis, keys: Keys, setting: str) -> TaskStore:
    return TaskStore(client, keys, Payloads.from_setting(setting, keys))


def create(store: TaskStore, keys: Keys, payloads: Payloads) -> str:
    ref = task_ref(f"task-{uuid.uuid4()}")
    spec = NewTask(
        ref=ref,
        tool="echo",
        queue="q",
        owner="o",
        arguments={"text": f"args {MARK}"},
        caps={"elicitation": {}},
        ttl_ms=60_000,
        poll_ms=500,
        pre={"asked": {"content": {"name": f"pre {MARK}"}}},
    )
    assert store.run(calls.create(keys, spec, 30_000, payloads=payloads)) is not None
    return ref


def everything(client: redis.Redis, keys: Keys) -> str:
    found = []
    for key in client.scan_iter(match=keys.pattern):
        found.append(str(key))
        if client.type(key) == "hash":
            found += [f"{f}={v}" for f, v in client.hgetall(key).items()]
    return "\n".join(found)


def test_a_run_sees_plaintext_and_redis_only_sealed_values(
    redis_client: redis.Redis, keys: Keys
) -> None:
    store = sealed_store(redis_client, keys, KEY1)
    payloads = Payloads.from_setting(KEY1, keys)
    ref = create(store, keys, payloads)
    claim = store.claim(ref, 10_000)
    assert claim.record is not None and not claim.unreadable
    assert claim.record.arguments == {"text": f"args {MARK}"}
    assert claim.record.pre == {"asked": {"content": {"name": f"pre {MARK}"}}}
    assert store.report(ref, claim.gen, f"report {MARK}") is Reply.OK
    assert store.record(ref).message == f"report {MARK}"  # type: ignore[union-attr]
    ask = {"elicit-1": {"method": "elicitation/create", "params": {"message": f"ask {MARK}"}}}
    assert store.request_input(ref, claim.gen, ask).missing == 1
    answer = {"action": "accept", "content": {"v": f"answer {MARK}"}}
    store.run(calls.answer(keys, ref, "o", {"elicit-1": answer}, 30_000, payloads))
    assert store.request_input(ref, claim.gen, ask).answers == {"elicit-1": answer}
    assert store.save_step(ref, claim.gen, "s", [f"step {MARK}"]) == (Reply.OK, [f"step {MARK}"])
    assert store.step_value(ref, "s") == (True, [f"step {MARK}"])
    result = {"content": [{"type": "text", "text": f"result {MARK}"}]}
    assert store.finish(ref, claim.gen, TaskStatus.COMPLETED, result) is Reply.OK
    assert store.record(ref).result == result  # type: ignore[union-attr]

    dump = everything(redis_client, keys)
    assert MARK not in dump
    assert f"v1.{KID1}." in dump


def test_a_task_whose_payloads_do_not_open_is_claimed_as_unreadable(
    redis_client: redis.Redis, keys: Keys
) -> None:
    ref = create(sealed_store(redis_client, keys, KEY1), keys, Payloads.from_setting(KEY1, keys))
    claim = sealed_store(redis_client, keys, KEY2).claim(ref, 10_000)
    assert claim.reply is Reply.OK and claim.unreadable and claim.record is None
    assert claim.gen == 1  # the claim holds: the runner ends the task with this generation


def test_rotation_reseals_old_values_and_never_overwrites_a_newer_one(
    redis_client: redis.Redis, keys: Keys
) -> None:
    old = sealed_store(redis_client, keys, KEY1)
    refs = [create(old, keys, Payloads.from_setting(KEY1, keys)) for _ in range(3)]
    # A value written before encryption was turned on is sealed by the walk too.
    redis_client.hset(keys.task(refs[0]), "result", '{"plain":true}')
    both = f"{KEY2},{KEY1}"
    new = sealed_store(redis_client, keys, both)
    payloads = Payloads.from_setting(both, keys)

    # A concurrent write lands between the walk's read and its write: the write is skipped.
    task_key = keys.task(refs[1])
    read = {task_key: redis_client.hgetall(task_key)}
    report = rotation.Rotation()
    (call,) = rotation.plan(payloads, keys, read, report)
    newer = payloads.dump({"text": "newer"}, task_key, "args")
    redis_client.hset(task_key, "args", newer)
    (written,) = new.run_many([call])
    assert written == len(call.args) // 3 - 1  # all but the field that changed
    assert redis_client.hget(task_key, "args") == newer

    done = new.rotate_data(batch=2)
    assert done.tasks == 3 and done.changed == 0 and done.unreadable == 0
    # args, caps, pre of each task and the plain result, less the newer value and those written
    assert done.resealed == 3 * 3 + 1 - 1 - written
    for ref in refs:
        for name, value in redis_client.hgetall(keys.task(ref)).items():
            if name in ("args", "caps", "pre", "result"):
                assert sealed_kid(value) == KID2, (name, value)
    again = new.rotate_data()
    assert (again.tasks, again.resealed, again.changed) == (3, 0, 0)
    only_new = sealed_store(redis_client, keys, KEY2)
    assert only_new.record(refs[0]).result == {"plain": True}  # type: ignore[union-attr]
    assert only_new.record(refs[1]).arguments == {"text": "newer"}  # type: ignore[union-attr]
    assert only_new.record(refs[2]).arguments == {"text": f"args {MARK}"}  # type: ignore[union-attr]


def test_a_value_no_key_opens_is_counted_and_left_alone(
    redis_client: redis.Redis, keys: Keys
) -> None:
    ref = create(sealed_store(redis_client, keys, KEY1), keys, Payloads.from_setting(KEY1, keys))
    before = redis_client.hgetall(keys.task(ref))
    done = sealed_store(redis_client, keys, KEY2).rotate_data()
    assert (done.tasks, done.resealed, done.unreadable) == (1, 0, 3)
    assert "MCPQ_DATA_KEYS does not hold" in done.summary()
    assert redis_client.hgetall(keys.task(ref)) == before
