"""Concurrent and late writers: the task store keeps one truth however the calls interleave.

Each race runs many rounds against the real server. In every round two threads, each with its own
client (like two processes), are released together by a barrier, so their scripts reach Redis in
either order. Then the terminal states are checked against every script arriving late.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import orjson
import pytest
import redis

from mcpq.shared.store import Cancelled, Claim, InputPoll, Renewal, Reply, TaskStatus
from tests.integration.conftest import stats_hash
from tests.support.white_box import WhiteBoxStore

ROUNDS = 1000
RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}


class Race:
    """Two long-lived threads; ``run`` releases one call on each at the same moment.

    NOTE: the last thread to reach a barrier runs on at once while the other is still being
    woken, so the call submitted second tends to win; the submission order alternates per round
    so that each side gets its head start half of the time.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="racer")
        self._barrier = threading.Barrier(2, timeout=5)
        self._rounds = 0

    def run(self, left: Callable[[], Any], right: Callable[[], Any]) -> tuple[Any, Any]:
        self._rounds += 1
        first, second = (left, right) if self._rounds % 2 else (right, left)
        a, b = self._pool.submit(self._at_start, first), self._pool.submit(self._at_start, second)
        results = a.result(timeout=10), b.result(timeout=10)
        return results if self._rounds % 2 else (results[1], results[0])

    def _at_start(self, call: Callable[[], Any]) -> Any:
        self._barrier.wait()
        return call()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@pytest.fixture
def race() -> Iterator[Race]:
    racing = Race()
    yield racing
    racing.close()


@pytest.fixture
def racers(redis_process, keys) -> Iterator[tuple[WhiteBoxStore, WhiteBoxStore]]:
    """Two stores on two clients of their own, as two processes would have."""
    clients = [redis.Redis.from_url(redis_process.url, decode_responses=True) for _ in range(2)]
    yield WhiteBoxStore(clients[0], keys), WhiteBoxStore(clients[1], keys)
    for client in clients:
        client.close()


def snapshot(store: WhiteBoxStore, ref: str) -> dict[str, Any]:
    """Everything a round checks, read in one round trip."""
    k = store.keys
    with store.redis.pipeline(transaction=True) as pipe:
        pipe.hgetall(k.task(ref)).exists(k.inputs(ref)).hgetall(k.answers(ref))
        pipe.zscore(k.at(ref).leases, ref).zscore(k.at(ref).unclaimed, ref)
        task, inputs, answers, lease, unclaimed = pipe.execute()
    return {"task": task, "inputs": inputs, "answers": answers, "indexed": (lease, unclaimed)}


def test_cancel_racing_finish_has_exactly_one_winner(store, tasks, race, racers) -> None:
    web, worker = racers
    wins: Counter[str] = Counter()
    for _ in range(ROUNDS):
        ref, gen = tasks.running()
        cancelled, finished = race.run(
            partial(web.cancel, ref, tasks.owner, "stop"),
            partial(worker.finish, ref, gen, "completed", RESULT),
        )
        task = snapshot(store, ref)["task"]
        if cancelled.reply == "CANCELLED":
            assert (finished, task["status"], task.get("result")) == ("TERMINAL", "cancelled", None)
            assert cancelled == Cancelled(Reply.CANCELLED, True)
        else:
            terminal = Cancelled(Reply.TERMINAL, False)
            assert (cancelled, finished, task["status"]) == (terminal, "OK", "completed")
            assert orjson.loads(task["result"]) == RESULT
        wins[task["status"]] += 1
    assert wins["cancelled"] and wins["completed"], f"both orders must have happened: {wins}"
    stats = stats_hash(store.redis, store.keys)
    ended = {"cancelled": int(stats["cancelled:echo"]), "completed": int(stats["completed:echo"])}
    assert ended == wins, "the counters agree with the replies"
    assert int(stats.get("state:working", 0)) == 0


def test_two_claims_racing_give_one_run(store, tasks, race, racers) -> None:
    one, other = racers
    for _ in range(ROUNDS):
        ref = tasks.new()
        replies = race.run(partial(one.claim, ref, 10_000), partial(other.claim, ref, 10_000))
        assert sorted(reply.reply for reply in replies) == ["BUSY", "OK"], replies
        winner = next(reply for reply in replies if reply.reply == "OK")
        state = snapshot(store, ref)
        assert winner.gen == 1 and (state["task"]["gen"], state["task"]["runs"]) == ("1", "1")
        # One deadline per task in the due index (named unclaimed): the lease, once claimed
        assert state["indexed"] == (None, float(state["task"]["lease"]))


@pytest.mark.parametrize("parked", [False, True], ids=["worker-waiting", "parked"])
def test_answer_racing_cancel_never_revives_the_task(store, tasks, race, racers, parked) -> None:
    web_a, web_b = racers
    woke = "RESUME" if parked else "WOKEN"
    orders: Counter[str] = Counter()
    for _ in range(ROUNDS):
        ref, gen = tasks.waiting("name", parked=parked)
        answered, cancelled = race.run(
            partial(web_a.answer, ref, tasks.owner, {"name": "Ada"}, 30_000),
            partial(web_b.cancel, ref, tasks.owner, "stop"),
        )
        state = snapshot(store, ref)
        assert cancelled == Cancelled(Reply.CANCELLED, not parked)
        assert (state["task"]["status"], state["task"]["parked"]) == ("cancelled", "0")
        assert not state["inputs"] and state["indexed"] == (None, None), state
        if answered.reply == "IGNORED":  # cancel first: the answer is not even stored
            assert state["answers"] == {}
        else:  # answer first, then cancel
            assert answered.reply == woke and state["answers"] == {"name": '"Ada"'}
        # Whoever the answer woke or resumed finds the task cancelled
        if parked:
            assert store.claim(ref, 1_000) == Claim(Reply.TERMINAL)
        else:
            assert store.request_input(ref, gen, {"name": {}}) == InputPoll(Reply.TERMINAL)
        orders[answered.reply] += 1
    assert orders["IGNORED"] and orders[woke], f"both orders must have happened: {orders}"
    assert store.sweep(30_000) == [], "nothing to re-enqueue"


# -- terminal is forever ------------------------------------------------------------------------
LATE_WRITES: dict[str, tuple[Callable[[WhiteBoxStore, str, int, str], Any], Any]] = {
    "finish": (lambda s, ref, gen, who: s.finish(ref, gen, "failed", {"code": 1}), "TERMINAL"),
    "cancel": (lambda s, ref, gen, who: s.cancel(ref, who), Cancelled(Reply.TERMINAL, False)),
    "answer": (lambda s, ref, gen, who: s.answer(ref, who, {"age": 1}, 10).reply, "IGNORED"),
    "request_input": (
        lambda s, ref, gen, who: s.request_input(ref, gen, {"x": {}}),
        InputPoll(Reply.TERMINAL),
    ),
    "report": (lambda s, ref, gen, who: s.report(ref, gen, "late"), "TERMINAL"),
    "renew": (lambda s, ref, gen, who: s.renew(ref, gen, 60_000), "the terminal status"),
    "park": (lambda s, ref, gen, who: s.park(ref, gen), "TERMINAL"),
    "claim": (lambda s, ref, gen, who: s.claim(ref, 60_000), Claim(Reply.TERMINAL)),
    "save_step": (lambda s, ref, gen, who: s.save_step(ref, gen, "new", 1), ("TERMINAL", None)),
    "release": (lambda s, ref, gen, who: s.release(ref, gen), "TERMINAL"),
}
ENDINGS: dict[str, Callable[[WhiteBoxStore, str, int, str], Any]] = {
    "completed": lambda s, ref, gen, who: s.finish(ref, gen, "completed", RESULT, "done"),
    "failed": lambda s, ref, gen, who: s.finish(ref, gen, "failed", {"code": -1}, "broke"),
    "cancelled": lambda s, ref, gen, who: s.cancel(ref, who, "stop"),
}


def task_keys_raw(raw: redis.Redis, store: WhiteBoxStore, ref: str) -> list[dict[bytes, bytes]]:
    k = store.keys
    return [raw.hgetall(key) for key in (k.task(ref), k.inputs(ref), k.answers(ref), k.steps(ref))]


@pytest.mark.parametrize("script", LATE_WRITES)
@pytest.mark.parametrize("ending", ENDINGS)
def test_a_late_script_leaves_an_ended_task_unchanged(
    store, tasks, raw_client, clock, ending, script
) -> None:
    # Given a run that asked for two inputs, got one answer and memoized a step, then ended
    ref, gen = tasks.waiting("name", "age")
    store.answer(ref, tasks.owner, {"name": "Ada"}, 10)
    store.save_step(ref, gen, "fetch", [1])
    ENDINGS[ending](store, ref, gen, tasks.owner)
    before = task_keys_raw(raw_client, store, ref)
    clock.tick()  # a write of updated_ms would differ now

    # When the script arrives late, with the very generation that ended the task
    late, expected = LATE_WRITES[script]
    reply = late(store, ref, gen, tasks.owner)

    # Then it is told so, and the task's hashes are byte-for-byte what they were
    renewal = Renewal(Reply.TERMINAL, TaskStatus(ending))
    assert reply == (renewal if script == "renew" else expected)
    assert task_keys_raw(raw_client, store, ref) == before
    assert snapshot(store, ref)["indexed"] == (None, None), "nothing re-arms an ended task"
