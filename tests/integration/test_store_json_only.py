"""Redis holds JSON and plain values only: no pickle, nothing a non-Python process cannot read.

After a whole life cycle every value of every key of the prefix is read back as raw bytes. Fields
that carry structure must parse as JSON; the rest are plain numbers or short plain strings (a
status, a ref, a tool name, a statusMessage). Nothing starts with pickle's protocol header.
"""

from __future__ import annotations

import re
import uuid

import orjson
import pytest

from mcpq.shared.store.calls import NewTask
from mcpq.shared.store.keyspace import task_ref

PICKLE_HEADER = b"\x80"
JSON_FIELDS = {"args", "caps", "pre", "result", "error"}
NUMBER = re.compile(rb"-?\d+(\.\d+)?")
PLAIN = re.compile(r"[^\x00-\x1f\x7f{\[\"][^\x00-\x1f\x7f]*")  # not JSON-looking, no controls
REF = re.compile(rb"[0-9a-f]{32}")


def life_cycle(store, owner: str, ending: str) -> tuple[str, str]:
    """create, claim, request_input, answer, save_step, report, finish: returns (taskId, ref)."""
    task_id = f"bearer-{uuid.uuid4()}"
    ref = task_ref(task_id)
    args = {"text": "héllo ✓", "nested": {"list": [1, 2.5, None, True]}}
    spec = NewTask(
        ref,
        "echo",
        "tools-q",
        owner,
        args,
        {"elicitation": {}},
        60_000,
        500,
        pre={"sampled": "yes"},
        sync=True,
    )
    assert store.create(spec, 30_000) is not None
    gen = store.claim(ref, 10_000).gen
    requests = {
        "elicit-1": {"method": "elicitation/create", "params": {"message": "Name?"}},
        "sample-2": {"method": "sampling/createMessage", "params": {"maxTokens": 5}},
    }
    store.request_input(ref, gen, requests)
    partial = store.answer(ref, owner, {"elicit-1": {"action": "accept"}}, 30_000)
    woken = store.answer(ref, owner, {"sample-2": {"content": {"text": "ok"}}}, 30_000)
    assert (partial.reply, woken.reply) == ("PARTIAL", "WOKEN")
    store.save_step(ref, gen, "fetch", {"rows": [{"id": 1, "name": "Zoë"}]})
    store.save_step(ref, gen, "count", 3)
    store.report(ref, gen, "almost there: 90%")
    payload = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
    if ending == "failed":
        payload = {"code": -32603, "message": "boom"}
    assert store.finish(ref, gen, ending, payload, "finished") == "OK"
    return task_id, ref


def values_of(raw, key: bytes) -> list[tuple[bytes, bytes]]:
    """(field or role, value) for every value of ``key``, whatever its type."""
    kind = raw.type(key)
    if kind == b"hash":
        return list(raw.hgetall(key).items())
    if kind == b"list":
        return [(b"item", item) for item in raw.lrange(key, 0, -1)]
    if kind == b"zset":
        members = raw.zrange(key, 0, -1, withscores=True)
        return [pair for m, s in members for pair in ((b"member", m), (b"score", repr(s).encode()))]
    raise AssertionError(f"unexpected {kind!r} key {key!r}")


def check_value(key: bytes, name: bytes, value: bytes) -> None:
    where = f"{key!r} {name!r} = {value[:60]!r}"
    assert not value.startswith(PICKLE_HEADER), f"pickle in Redis: {where}"
    structured = name.decode() in JSON_FIELDS or key.endswith((b":in", b":ans", b":steps"))
    if structured:
        orjson.loads(value)  # raises on anything but JSON
    elif name == b"member" and key.endswith((b":leases", b":unclaimed")):
        assert REF.fullmatch(value), where
    elif not NUMBER.fullmatch(value):
        assert PLAIN.fullmatch(value.decode("utf-8")), f"neither a number nor plain: {where}"


@pytest.mark.parametrize("ending", ["completed", "failed"])
def test_every_stored_value_is_json_or_plain(store, tasks, raw_client, ending) -> None:
    task_id, ref = life_cycle(store, tasks.owner, ending)
    found = sorted(raw_client.scan_iter(match=store.keys.pattern))
    assert store.keys.task(ref).encode() in found
    assert store.keys.steps(ref).encode() in found and store.keys.answers(ref).encode() in found
    checked = 0
    for key in found:
        assert task_id.encode() not in key, "the bearer taskId never reaches Redis"
        for name, value in values_of(raw_client, key):
            assert task_id.encode() not in value, "the bearer taskId never reaches Redis"
            check_value(key, name, value)
            checked += 1
    assert checked >= 25


def test_structured_fields_round_trip_through_json(store, tasks) -> None:
    _, ref = life_cycle(store, tasks.owner, "completed")
    task = store.redis.hgetall(store.keys.task(ref))
    assert orjson.loads(task["args"]) == {
        "text": "héllo ✓",
        "nested": {"list": [1, 2.5, None, True]},
    }
    assert orjson.loads(task["pre"]) == {"sampled": "yes"}
    assert store.step_value(ref, "fetch") == (True, {"rows": [{"id": 1, "name": "Zoë"}]})
    answers = store.redis.hgetall(store.keys.answers(ref))
    assert {k: orjson.loads(v) for k, v in answers.items()} == {
        "elicit-1": {"action": "accept"},
        "sample-2": {"content": {"text": "ok"}},
    }
