"""Every Lua script of the task store, run on a real Redis through the ``TaskStore`` methods.

Each test tells one edge of the task state diagram: given a task in some state, when a script
runs, then its reply and the stored state are as the script's header promises.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import redis

from mcpq.shared.store import Answered, Cancelled, Renewal, Reply, TaskStatus, task_ref
from mcpq.shared.store.calls import Claim, InputPoll, NewTask
from tests.support.white_box import field, heard, in_index

RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done ✓"}]}
ERROR = {"code": -32603, "message": "tool blew up"}


# -- create, mark_enqueued ----------------------------------------------------------------------
def test_create_stores_a_working_task_watched_as_unclaimed(store, tasks, clock) -> None:
    before = clock.now_ms()
    ref = tasks.new(arguments={"text": "héllo", "n": [1, 2]})
    record = store.record(ref)
    assert record is not None
    assert record.status == "working" and record.gen == record.runs == 0
    assert (record.tool, record.queue, record.owner) == ("echo", "tools-q", tasks.owner)
    assert (record.arguments, record.ttl_ms) == ({"text": "héllo", "n": [1, 2]}, 60_000)
    assert before <= record.created_ms == record.updated_ms <= clock.now_ms()
    due_at = in_index(store, store.keys.at(ref).unclaimed, ref)
    assert due_at == record.created_ms + tasks.unclaimed_ms


def test_a_second_create_with_the_same_ref_returns_none_and_changes_nothing(
    store, tasks, raw_client
) -> None:
    ref = tasks.new()
    before = raw_client.hgetall(store.keys.task(ref))
    again = NewTask(ref, "other", "q2", "mallory", {"x": 1}, {}, 5, 100)
    assert store.create(again, 10) is None
    assert raw_client.hgetall(store.keys.task(ref)) == before


def test_mark_enqueued_gives_the_run_longer_to_start(store, tasks, clock) -> None:
    # Given a task on the unclaimed watch with its short "must be enqueued" deadline (and a TTL
    # beyond the longer one: the due index holds the earlier of deadline and expiry)
    ref = tasks.new(ttl_ms=600_000)
    short = in_index(store, store.keys.at(ref).unclaimed, ref)
    assert short is not None
    # When its message is published, then the deadline becomes "must be started" (longer)
    before = clock.now_ms()
    store.mark_enqueued(ref, 300_000)
    later = in_index(store, store.keys.at(ref).unclaimed, ref)
    assert later is not None and later > short
    assert before + 300_000 <= later <= clock.now_ms() + 300_000


def test_mark_enqueued_after_the_claim_does_not_put_the_task_back(store, tasks) -> None:
    # A worker can claim the run before the web tier marks it enqueued
    ref = tasks.new()
    assert store.claim(ref, 5_000).reply == "OK"
    lease = int(field(store, ref, "lease") or 0)
    store.mark_enqueued(ref, 300_000)
    # Its deadline stays its lease: the "must be started" one does not come back
    assert in_index(store, store.keys.at(ref).unclaimed, ref) == lease
    assert field(store, ref, "sends") == "0"


def test_a_run_enqueued_but_never_started_is_swept_again(store, tasks, clock) -> None:
    # A message taken by a worker that died before starting it: enqueued, never claimed
    ref = tasks.new()
    store.mark_enqueued(ref, 50)
    clock.wait_past(int(in_index(store, store.keys.at(ref).unclaimed, ref) or 0))
    due = store.sweep(60_000)
    assert [item.ref for item in due] == [ref]


def test_each_resend_of_an_unstarted_run_waits_twice_as_long(store, tasks, clock) -> None:
    # Given a run sent three times (the web tier's send, then two sweeper re-sends)
    ref = tasks.new()
    waits = []
    for _send in range(3):
        before = clock.now_ms()
        assert store.mark_enqueued(ref, 10_000) == 1
        waits.append(int(in_index(store, store.keys.at(ref).unclaimed, ref) or 0) - before)
    # then each waits twice as long as the one before: a backlog does not multiply messages
    assert [round(w, -3) for w in waits] == [10_000, 20_000, 40_000]
    assert store.redis.hget(store.keys.task(ref), "sends") == "3"
    # and a claim starts the count again for the next time the task is sent.
    assert store.claim(ref, 5_000).reply == "OK"
    assert store.redis.hget(store.keys.task(ref), "sends") == "0"
    assert store.mark_enqueued(ref, 10_000) == 0  # claimed: nothing to watch


def test_mark_enqueued_of_a_vanished_task_writes_nothing(store, tasks) -> None:
    ref = tasks.new()
    store.redis.delete(store.keys.task(ref))
    assert store.mark_enqueued(ref, 10_000) == 0
    assert not store.redis.exists(store.keys.task(ref))  # no hash without a TTL left behind


# -- claim ----------------------------------------------------------------------------------------
def test_claim_ok_increments_gen_and_takes_a_lease(store, tasks, clock) -> None:
    ref = tasks.new()
    claim = store.claim(ref, 5_000)
    assert claim.reply == "OK" and claim.gen == 1 and claim.answers == {}
    assert claim.record is not None and claim.record.gen == claim.record.runs == 1
    lease = int(store.redis.hget(store.keys.task(ref), "lease"))
    assert 0 < lease - clock.now_ms() <= 5_000
    # One deadline in the due index (named unclaimed): the lease replaced the start-by one
    assert in_index(store, store.keys.at(ref).unclaimed, ref) == lease
    assert in_index(store, store.keys.at(ref).leases, ref) is None  # the legacy index


def test_claim_is_busy_while_the_lease_lives_then_ok_with_a_new_gen(store, tasks, clock) -> None:
    ref, gen = tasks.running(lease_ms=200)
    assert store.claim(ref, 200) == Claim("BUSY")
    clock.wait_past(int(field(store, ref, "lease") or 0))
    again = store.claim(ref, 200)
    assert (again.reply, again.gen) == ("OK", gen + 1)
    assert field(store, ref, "runs") == "2"


def test_claim_of_a_parked_task_is_parked(store, tasks) -> None:
    ref, _ = tasks.waiting(parked=True)
    assert store.claim(ref, 1_000) == Claim("PARKED")


def test_claim_of_a_terminal_task_is_terminal_and_drops_it_from_the_indexes(store, tasks) -> None:
    ref = tasks.new()
    store.cancel(ref, tasks.owner)
    store.redis.zadd(store.keys.at(ref).unclaimed, {ref: 0})  # a stale index entry
    assert store.claim(ref, 1_000) == Claim("TERMINAL")
    assert in_index(store, store.keys.at(ref).unclaimed, ref) is None


def test_claim_of_an_unknown_task_is_gone_and_drops_it_from_the_indexes(store) -> None:
    ref = task_ref("never-created")
    store.redis.zadd(store.keys.at(ref).leases, {ref: 0})
    assert store.claim(ref, 1_000) == Claim("GONE")
    assert in_index(store, store.keys.at(ref).leases, ref) is None


def test_claim_hands_the_new_run_its_delivered_answers(store, tasks) -> None:
    ref, _ = tasks.waiting("name", parked=True)
    assert store.answer(ref, tasks.owner, {"name": {"action": "accept"}}, 1_000).reply == "RESUME"
    claim = store.claim(ref, 1_000)
    assert claim.reply == "OK" and claim.answers == {"name": '{"action":"accept"}'}


def test_claim_of_a_task_whose_status_message_is_two_dashes(store, tasks) -> None:
    ref, gen = tasks.running()
    assert store.report(ref, gen, "--") == "OK"
    assert store.release(ref, gen) == "OK"
    claim = store.claim(ref, 1_000)
    assert claim.record is not None and claim.record.message == "--"


# -- renew, report ---------------------------------------------------------------------------------
def test_renew_extends_the_lease_and_tells_the_status(store, tasks, clock) -> None:
    ref, gen = tasks.running(lease_ms=1_000, ttl_ms=600_000)
    first = in_index(store, store.keys.at(ref).unclaimed, ref) or 0
    clock.tick()
    assert store.renew(ref, gen, 60_000) == Renewal(Reply.OK, TaskStatus.WORKING)
    lease = int(field(store, ref, "lease") or 0)
    assert lease > first + 50_000 and in_index(store, store.keys.at(ref).unclaimed, ref) == lease
    store.request_input(ref, gen, {"k": {}})
    assert store.renew(ref, gen, 60_000) == Renewal(Reply.OK, TaskStatus.INPUT_REQUIRED)


def test_renew_by_a_stale_or_vanished_run_changes_nothing(store, tasks, raw_client) -> None:
    ref, gen = tasks.running()
    before = raw_client.hgetall(store.keys.task(ref))
    assert store.renew(ref, gen + 1, 60_000) == Renewal(Reply.SUPERSEDED)
    assert store.renew(task_ref("nope"), 1, 60_000) == Renewal(Reply.GONE)
    assert raw_client.hgetall(store.keys.task(ref)) == before


def test_a_late_heartbeat_after_park_does_not_rearm_the_lease(store, tasks) -> None:
    ref, gen = tasks.waiting(parked=True)
    store.renew(ref, gen, 60_000)  # the heartbeat thread's renew, in flight during park
    assert store.answer(ref, tasks.owner, {"name": "x"}, 1_000).reply == "RESUME"
    assert store.claim(ref, 1_000).reply == "OK"


def test_report_sets_the_status_message(store, tasks, clock) -> None:
    ref, gen = tasks.running()
    clock.tick()
    assert store.report(ref, gen, "halfway") == "OK"
    record = store.record(ref)
    assert record is not None and record.message == "halfway"
    assert record.updated_ms > record.created_ms
    assert store.report(ref, gen + 1, "stale") == "SUPERSEDED"
    assert store.report(task_ref("nope"), 1, "x") == "GONE"
    assert field(store, ref, "msg") == "halfway"


# -- request_input ---------------------------------------------------------------------------------
def test_request_input_makes_new_keys_outstanding(store, tasks) -> None:
    ref, gen = tasks.running()
    requests = {"name": {"method": "elicitation/create"}, "age": {"method": "sampling/x"}}
    assert store.request_input(ref, gen, requests) == InputPoll("OK", 2, {})
    assert field(store, ref, "status") == "input_required"
    stored = store.redis.hgetall(store.keys.inputs(ref))
    assert {key: orjson.loads(raw) for key, raw in stored.items()} == requests


def test_request_input_again_is_an_idempotent_poll(store, tasks, raw_client, clock) -> None:
    ref, gen = tasks.waiting("name", "age")
    task_key, inputs_key = store.keys.task(ref), store.keys.inputs(ref)
    before = raw_client.hgetall(task_key), raw_client.hgetall(inputs_key)
    clock.tick()
    poll = store.request_input(ref, gen, {"name": {"changed": True}, "age": {}})
    assert poll == InputPoll("OK", 2, {})
    assert (raw_client.hgetall(task_key), raw_client.hgetall(inputs_key)) == before


def test_request_input_returns_answered_keys_without_asking_again(store, tasks) -> None:
    ref, gen = tasks.waiting("name", "age")
    assert store.answer(ref, tasks.owner, {"name": {"v": "Ada"}}, 1_000).reply == "PARTIAL"
    poll = store.request_input(ref, gen, {"name": {}, "age": {}})
    assert poll == InputPoll("OK", 1, {"name": {"v": "Ada"}})
    assert list(store.redis.hkeys(store.keys.inputs(ref))) == ["age"]

    assert store.answer(ref, tasks.owner, {"age": 36}, 1_000).reply == "WOKEN"
    poll = store.request_input(ref, gen, {"name": {}, "age": {}})
    assert poll == InputPoll("OK", 0, {"name": {"v": "Ada"}, "age": 36})
    assert field(store, ref, "status") == "working"
    assert store.redis.exists(store.keys.inputs(ref)) == 0


def test_every_change_a_client_sees_is_published_on_the_tasks_channel(store, tasks) -> None:
    ref, gen = tasks.running()
    task_key = store.keys.task(ref)
    with heard(store, ref) as report:
        store.report(ref, gen, "halfway")
    with heard(store, ref) as ask:
        store.request_input(ref, gen, {"name": {}, "age": {}})
    with heard(store, ref) as partial:
        store.answer(ref, tasks.owner, {"name": "Ada"}, 1_000)
    with heard(store, ref) as resumed:
        store.answer(ref, tasks.owner, {"age": 36}, 1_000)
    with heard(store, ref) as ended:
        store.finish(ref, gen, "completed", RESULT)
    assert [report, ask, partial, resumed, ended] == [[task_key]] * 5
    with heard(store, ref) as after:  # a refused write changes nothing and says nothing
        store.report(ref, gen, "late")
    assert after == []
    other, _ = tasks.running()
    with heard(store, other) as cancelled:
        store.cancel(other, tasks.owner)
    assert cancelled == [store.keys.task(other)]


def test_request_input_by_a_stale_run_is_superseded(store, tasks) -> None:
    ref, gen = tasks.running()
    assert store.request_input(ref, gen + 1, {"k": {}}) == InputPoll("SUPERSEDED")
    assert field(store, ref, "status") == "working"
    assert store.request_input(task_ref("nope"), 1, {"k": {}}) == InputPoll("GONE")


# -- answer ----------------------------------------------------------------------------------------
def test_answer_with_only_unknown_keys_is_ignored(store, tasks) -> None:
    ref, _ = tasks.waiting("name")
    assert store.answer(ref, tasks.owner, {"bogus": 1}, 1_000).reply == "IGNORED"
    assert field(store, ref, "status") == "input_required"
    assert store.redis.exists(store.keys.answers(ref)) == 0


@contextmanager
def wakes(redis_client: redis.Redis, channel: str) -> Iterator[list[str]]:
    """The wake-ups published on ``channel`` while the block runs (subscribed before it)."""
    pubsub = redis_client.pubsub()
    pubsub.subscribe(channel)
    confirmed = pubsub.get_message(timeout=1.0)
    assert confirmed is not None and confirmed["type"] == "subscribe"
    seen: list[str] = []
    try:
        yield seen
        while (message := pubsub.get_message(timeout=0.3)) is not None:
            if message["type"] == "message":
                seen.append(str(message["data"]))
    finally:
        pubsub.close()


def test_answer_counts_only_outstanding_keys_and_partial_keeps_waiting(store, tasks) -> None:
    ref, _ = tasks.waiting("name", "age")
    with wakes(store.redis, store.keys.wake(ref)) as woken:
        reply = store.answer(ref, tasks.owner, {"name": "Ada", "bogus": 1}, 1_000).reply
    assert reply == "PARTIAL"
    assert field(store, ref, "status") == "input_required"
    assert store.redis.hgetall(store.keys.answers(ref)) == {"name": '"Ada"'}
    assert list(store.redis.hkeys(store.keys.inputs(ref))) == ["age"]
    assert woken == ["answer"]  # the run reads its answers so far
    assert store.answer(ref, tasks.owner, {"name": "Eve"}, 1_000).reply == "IGNORED"  # answered
    assert store.redis.hget(store.keys.answers(ref), "name") == '"Ada"'


def test_the_last_answer_wakes_the_waiting_worker(store, tasks, redis_client) -> None:
    ref, _ = tasks.waiting("name", "age")
    with wakes(store.redis, store.keys.wake(ref)) as woken:
        assert store.answer(ref, tasks.owner, {"name": "Ada", "age": 36}, 1_000).reply == "WOKEN"
    assert field(store, ref, "status") == "working"
    assert woken == ["answer"]
    # The waiting run holds it: its deadline is still its lease, not a new start-by one
    assert in_index(store, store.keys.at(ref).unclaimed, ref) == int(
        field(store, ref, "lease") or 0
    )


def test_the_last_answer_resumes_a_parked_task_on_its_queue(store, tasks, clock) -> None:
    ref, _ = tasks.waiting("name", parked=True)
    now = clock.now_ms()
    reply = store.answer(ref, tasks.owner, {"name": "Ada"}, 7_000)
    assert reply == Answered(Reply.RESUME, "echo", "tools-q")
    assert (field(store, ref, "status"), field(store, ref, "parked")) == ("working", "0")
    due_at = in_index(store, store.keys.at(ref).unclaimed, ref) or 0
    assert now + 7_000 <= due_at <= clock.now_ms() + 7_000


def test_answer_from_another_owner_is_notfound(store, tasks, raw_client) -> None:
    ref, _ = tasks.waiting("name")
    before = raw_client.hgetall(store.keys.task(ref)), raw_client.hgetall(store.keys.inputs(ref))
    assert store.answer(ref, "principal-mallory", {"name": "x"}, 1_000).reply == "NOTFOUND"
    assert store.answer(task_ref("nope"), tasks.owner, {"name": "x"}, 1_000).reply == "NOTFOUND"
    after = raw_client.hgetall(store.keys.task(ref)), raw_client.hgetall(store.keys.inputs(ref))
    assert after == before


def test_answer_to_a_task_that_asks_nothing_is_ignored(store, tasks) -> None:
    ref, _ = tasks.running()
    assert store.answer(ref, tasks.owner, {"name": "x"}, 1_000).reply == "IGNORED"


# -- park ------------------------------------------------------------------------------------------
def test_park_frees_the_slot_of_a_run_that_still_waits(store, tasks) -> None:
    ref, gen = tasks.waiting("name")
    assert store.park(ref, gen) == "PARKED"
    assert (field(store, ref, "parked"), field(store, ref, "lease")) == ("1", "0")
    assert in_index(store, store.keys.at(ref).leases, ref) is None


def test_park_after_the_answers_arrived_goes_on_in_place(store, tasks, raw_client) -> None:
    ref, gen = tasks.waiting("name")
    store.answer(ref, tasks.owner, {"name": "x"}, 1_000)
    before = raw_client.hgetall(store.keys.task(ref))
    assert store.park(ref, gen) == "ANSWERED"
    assert raw_client.hgetall(store.keys.task(ref)) == before
    assert store.park(ref, gen + 1) == "SUPERSEDED"


# -- finish ----------------------------------------------------------------------------------------
def test_finish_completed_stores_the_result_and_clears_the_run(store, tasks) -> None:
    ref, gen = tasks.waiting("name", sync=True)
    assert store.finish(ref, gen, "completed", RESULT, "all good") == "OK"
    record = store.record(ref)
    assert record is not None
    assert (record.status, record.result, record.message) == ("completed", RESULT, "all good")
    assert record.error is None
    assert field(store, ref, "lease") == "0"
    assert store.redis.exists(store.keys.inputs(ref), store.keys.wake(ref)) == 0
    assert in_index(store, store.keys.at(ref).leases, ref) is None


def test_finish_failed_stores_the_error_and_drops_the_progress_text(store, tasks) -> None:
    ref, gen = tasks.running()
    store.report(ref, gen, "working hard")
    assert store.finish(ref, gen, "failed", ERROR) == "OK"
    record = store.record(ref)
    assert record is not None
    assert (record.status, record.error, record.message) == ("failed", ERROR, "")
    assert record.result is None


def test_finish_by_a_stale_run_is_superseded(store, tasks, clock, raw_client) -> None:
    ref, old = tasks.running(lease_ms=100)
    clock.wait_past(int(field(store, ref, "lease") or 0))
    new = store.claim(ref, 10_000).gen
    before = raw_client.hgetall(store.keys.task(ref))
    assert store.finish(ref, old, "completed", RESULT) == "SUPERSEDED"
    assert raw_client.hgetall(store.keys.task(ref)) == before
    assert store.finish(ref, new, "completed", RESULT) == "OK"
    assert store.finish(task_ref("nope"), 1, "completed", RESULT) == "GONE"


def test_finish_after_cancel_is_terminal(store, tasks) -> None:
    ref, gen = tasks.running()
    store.cancel(ref, tasks.owner)
    assert store.finish(ref, gen, "completed", RESULT) == "TERMINAL"
    record = store.record(ref)
    assert record is not None and (record.status, record.result) == ("cancelled", None)


# -- cancel ----------------------------------------------------------------------------------------
def test_cancel_clears_inputs_and_wakes_the_worker(store, tasks, redis_client) -> None:
    ref, _ = tasks.waiting("name", sync=True)
    with wakes(store.redis, store.keys.wake(ref)) as woken:
        cancelled = store.cancel(ref, tasks.owner, "user gave up")
    assert cancelled == Cancelled(Reply.CANCELLED, True)
    record = store.record(ref)
    assert record is not None and (record.status, record.message) == ("cancelled", "user gave up")
    assert store.redis.exists(store.keys.inputs(ref)) == 0
    assert woken == ["cancel"]
    assert in_index(store, store.keys.at(ref).leases, ref) is None
    assert store.claim(ref, 1_000) == Claim("TERMINAL")


def test_cancel_without_a_live_worker_says_so(store, tasks) -> None:
    ref = tasks.new()
    assert store.cancel(ref, tasks.owner) == Cancelled(Reply.CANCELLED, False)
    assert in_index(store, store.keys.at(ref).unclaimed, ref) is None
    parked, _ = tasks.waiting(parked=True)
    assert store.cancel(parked, tasks.owner) == Cancelled(Reply.CANCELLED, False)
    assert field(store, parked, "parked") == "0"


def test_cancel_of_an_ended_task_is_terminal(store, tasks) -> None:
    ref, gen = tasks.running()
    store.finish(ref, gen, "completed", RESULT)
    assert store.cancel(ref, tasks.owner) == Cancelled(Reply.TERMINAL, False)
    assert field(store, ref, "status") == "completed"


def test_cancel_by_another_owner_is_notfound(store, tasks, raw_client) -> None:
    ref, _ = tasks.waiting("name")
    before = raw_client.hgetall(store.keys.task(ref))
    assert store.cancel(ref, "principal-mallory") == Cancelled(Reply.NOTFOUND, False)
    assert raw_client.hgetall(store.keys.task(ref)) == before
    assert store.redis.exists(store.keys.inputs(ref)) == 1


# -- release, save_step ----------------------------------------------------------------------------
def test_release_hands_the_run_back_at_once(store, tasks, clock) -> None:
    ref, gen = tasks.running()
    assert store.release(ref, gen + 1) == "SUPERSEDED"
    assert store.release(ref, gen) == "OK"
    assert field(store, ref, "lease") == "0"
    assert in_index(store, store.keys.at(ref).leases, ref) is None
    assert (in_index(store, store.keys.at(ref).unclaimed, ref) or 0) <= clock.now_ms()
    assert store.claim(ref, 1_000).gen == gen + 1  # no wait for the old lease


def test_save_step_keeps_the_first_value(store, tasks) -> None:
    ref, gen = tasks.running()
    assert store.step_value(ref, "fetch") == (False, None)
    assert store.save_step(ref, gen, "fetch", {"rows": [1, 2]}) == ("OK", {"rows": [1, 2]})
    assert store.save_step(ref, gen, "fetch", {"rows": []}) == ("OK", {"rows": [1, 2]})
    assert store.step_value(ref, "fetch") == (True, {"rows": [1, 2]})


def test_save_step_by_a_stale_run_stores_nothing(store, tasks) -> None:
    ref, gen = tasks.running()
    assert store.save_step(ref, gen + 1, "fetch", 1) == ("SUPERSEDED", None)
    assert store.save_step(task_ref("nope"), 1, "fetch", 1) == ("GONE", None)
    assert store.step_value(ref, "fetch") == (False, None)
