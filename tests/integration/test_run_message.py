"""The run's message built on the web tier for the create script to push: exactly what Celery
would send on the Redis broker, consumed by kombu like any other, and pushed by ``create.lua``
in the same step as the task."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

import redis
from kombu import Connection, Consumer, Queue

from mcpq.frontend.producer import CeleryProducer
from mcpq.ops.runtime.redis_binary import RedisProcess
from mcpq.shared.jobs import REQUEST_ID_HEADER, Message, Run, read_run
from mcpq.shared.settings import Settings
from mcpq.shared.store import task_ref
from mcpq.shared.store.calls import Admission, NewTask, Refused
from mcpq.workers.redis_transport import TRANSPORT
from tests.support.white_box import field, in_index


def test_the_message_is_celerys_own_and_is_not_sent(redis_process: RedisProcess) -> None:
    producer = CeleryProducer(Settings(redis_url=redis_process.url, default_queue="msg-q"))
    client = redis.Redis.from_url(redis_process.url)
    run = Run("slow_compute", "ab" * 16, "msg-q", "req-1")
    message = asyncio.run(producer.message(run))
    assert message is not None and message.key == "msg-q"
    # Nothing was pushed: the store pushes it, with the create.
    assert client.llen("msg-q") == 0
    raw = json.loads(message.body)
    headers = raw["headers"]
    assert (headers["task"], headers["id"], headers[REQUEST_ID_HEADER]) == (
        "slow_compute",
        run.ref,
        "req-1",
    )
    assert raw["content-type"] == "application/json"  # never pickle
    args, kwargs, _ = json.loads(base64.b64decode(raw["body"]))
    assert read_run(headers["task"], args, headers, "msg-q") == run and kwargs == {}


def test_later_messages_are_celerys_own_too(redis_process: RedisProcess) -> None:
    # Later runs of a tool are built from a template Celery's first message made: the same
    # message Celery would build for that run (the same JSON values: the body is encoded by
    # orjson, Celery's by kombu), but for the (random) delivery tag.
    producer = CeleryProducer(Settings(redis_url=redis_process.url, default_queue="msg-t"))
    # With and without a trace (the traceparent header travels the same way in both builds).
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    runs = [
        Run("slow_compute", f"{i:02x}" * 16, "msg-t", f"req-{i}", trace=trace if i else "")
        for i in range(3)
    ]
    built = [asyncio.run(producer.message(run)) for run in runs]
    messages = producer._messages  # white box: Celery's own build of the same run
    assert messages is not None
    # ...built from the template (Celery builds each message only when it is not usable).
    assert messages._templates[("slow_compute", "msg-t")] is not None
    for run, message in zip(runs, built, strict=True):
        assert message is not None
        ours, celerys = json.loads(message.body), json.loads(messages._celery(run).body)
        assert ours["properties"].pop("delivery_tag") != celerys["properties"].pop("delivery_tag")
        for message in (ours, celerys):
            message["body"] = json.loads(base64.b64decode(message["body"]))
        assert ours == celerys
        assert read_run("slow_compute", [run.ref], ours["headers"]).trace == run.trace


def test_a_pushed_message_is_consumed_by_the_workers_transport(
    redis_process: RedisProcess,
) -> None:
    producer = CeleryProducer(Settings(redis_url=redis_process.url, default_queue="msg-q2"))
    run = Run("echo", "cd" * 16, "msg-q2")
    message = asyncio.run(producer.message(run))
    assert message is not None
    client = redis.Redis.from_url(redis_process.url)
    client.lpush(message.key, message.body)  # what create.lua does
    got: list[object] = []
    with Connection(redis_process.url, transport=TRANSPORT) as conn:
        queue = Queue("msg-q2")
        with Consumer(conn, [queue], accept=["json"], callbacks=[lambda b, m: got.append(m)]):
            conn.drain_events(timeout=5)
        assert len(got) == 1
        received: Any = got[0]
        assert received.headers["id"] == run.ref
        # Taken and not acked: kombu's own transport would hold it in its `unacked` hash now;
        # the workers' transport keeps no such bookkeeping in Redis (the store recovers runs).
        assert not client.exists("unacked", "unacked_index")
        # Rejected with requeue (a prefork child died): back at the head of its queue.
        received.reject(requeue=True)
        assert client.llen("msg-q2") == 1
        got.clear()
        with Consumer(conn, [queue], accept=["json"], callbacks=[lambda b, m: got.append(m)]):
            conn.drain_events(timeout=5)
        again: Any = got[0]
        assert again.headers["id"] == run.ref and again.delivery_info["redelivered"]
        again.ack()
    assert client.llen("msg-q2") == 0


def test_the_transport_pushes_unstarted_messages_back_when_it_closes(
    redis_process: RedisProcess,
) -> None:
    client = redis.Redis.from_url(redis_process.url)
    producer = CeleryProducer(Settings(redis_url=redis_process.url, default_queue="msg-q3"))
    message = asyncio.run(producer.message(Run("echo", "ef" * 16, "msg-q3")))
    assert message is not None
    client.lpush(message.key, message.body)
    got: list[object] = []
    with Connection(redis_process.url, transport=TRANSPORT) as conn:
        queue = Queue("msg-q3")
        with Consumer(conn, [queue], accept=["json"], callbacks=[lambda b, m: got.append(m)]):
            conn.drain_events(timeout=5)
        assert len(got) == 1 and client.llen("msg-q3") == 0
    # Closed with the message taken and never acked (a worker's warm shutdown): it went back.
    assert client.llen("msg-q3") == 1


def test_with_task_events_runs_are_published_by_celery(redis_process: RedisProcess) -> None:
    # MCPQ_TASK_EVENTS: Celery publishes the run itself, so its task-sent event goes out too.
    settings = Settings(redis_url=redis_process.url, task_events=True)
    assert asyncio.run(CeleryProducer(settings).message(Run("echo", "01" * 16, "q"))) is None


# -- the store pushes it: create.lua ----------------------------------------------------------
def test_create_with_a_message_pushes_it_and_watches_the_run_as_sent(
    store, tasks, clock, raw_client
) -> None:
    # Given the run's broker message (the Redis broker: the store pushes it)
    ref = task_ref("task-with-message")
    queue = "mcpq-test-queue"
    # (a TTL longer than the start-by deadline: the due index holds the earlier of the two)
    spec = NewTask(ref, "echo", queue, tasks.owner, {"text": "hi"}, {}, 600_000, 500)
    before = clock.now_ms()
    # When the create runs with it
    try:
        assert store.create(spec, 2_000, None, Message(queue, '{"m": 1}'), 300_000) is not None
        # Then the message is on the queue's list, in the same step as the task
        assert raw_client.lrange(queue, 0, -1) == [b'{"m": 1}']
        # and the run is watched as sent once: it must start within 300 s (not 2 s)
        assert field(store, ref, "sends") == "1"
        deadline = in_index(store, store.keys.at(ref).unclaimed, ref)
        assert deadline is not None and before + 300_000 <= deadline <= clock.now_ms() + 300_000
    finally:
        raw_client.delete(queue)


def test_a_refused_create_pushes_no_message(store, tasks, raw_client) -> None:
    # Given a principal at its open-task quota of 1
    admit = Admission("p-quota", max_open=1)
    queue = "mcpq-test-queue"
    first = NewTask(task_ref("q-1"), "echo", queue, tasks.owner, {}, {}, 60_000, 500)
    second = NewTask(task_ref("q-2"), "echo", queue, tasks.owner, {}, {}, 60_000, 500)
    try:
        assert store.create(first, 2_000, admit, Message(queue, "one"), 300_000) is not None
        # When a second create is refused, then its message never reaches the queue
        with contextlib.suppress(Refused):
            store.create(second, 2_000, admit, Message(queue, "two"), 300_000)
        assert raw_client.lrange(queue, 0, -1) == [b"one"]
        assert store.record(task_ref("q-2")) is None
    finally:
        raw_client.delete(queue, store.keys.quota("p-quota", "tasks"))
