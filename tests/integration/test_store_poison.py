"""Poison runs on a real Redis: a task whose runs keep losing their worker ends ``failed``.

"A run that lost its worker" is a lease that expired while still set: the run neither finished,
parked nor handed the task back. ``sweep.lua`` or ``claim.lua``, whichever sees it first, counts
it once in the task's ``lost`` field; at ``max_runs`` (``MCPQ_MAX_RUNS``) ``sweep`` returns the
task poisoned instead of due, ``claim`` refuses to start it, and the sweeper fails it with
``finish.lua`` fenced by the generation it found. Runs that park, runs handed back and messages
re-sent because no worker started them are not lost runs.
"""

from __future__ import annotations

import threading
import time

import pytest

from mcpq.shared.settings import Settings
from mcpq.shared.store import Claim, Due, Renewal, Reply, TaskStatus
from mcpq.workers.sweeper import poisoned_message, sweep_due, sweep_once
from tests.integration.conftest import RedisClock, TaskFactory, stats_hash
from tests.support.white_box import WhiteBoxStore, field, heard, in_index

LEASE_MS = 50
MAX_RUNS = 3


@pytest.fixture
def poison(store: WhiteBoxStore) -> WhiteBoxStore:
    """The test's store, with a limit of :data:`MAX_RUNS` lost runs."""
    store.max_runs = MAX_RUNS
    return store


def lose_run(store: WhiteBoxStore, clock: RedisClock, ref: str) -> int:
    """Claim the task and let the run's lease lapse, as a killed worker does; returns its gen."""
    claim = store.claim(ref, LEASE_MS)
    assert claim.reply is Reply.OK, claim
    clock.wait_past(int(field(store, ref, "lease") or 0))
    return claim.gen


class NoBroker:
    """Stands in for the Celery app: a poisoned task is never sent, so nothing may publish."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the sweeper used the broker ({name}) for a poisoned task")


def test_the_third_lost_run_makes_the_sweep_fail_the_task_atomically(
    poison: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    store = poison
    ref = tasks.new()
    for lost in (1, 2):
        lose_run(store, clock, ref)
        assert store.sweep(60_000) == [Due(ref, "echo", "tools-q")], "re-enqueued"
        assert field(store, ref, "lost") == str(lost)
        assert field(store, ref, "lease") == "0", "counted once: the lease is spent"
    gen = lose_run(store, clock, ref)
    store.report(ref, gen, "halfway")  # ... and then its worker died

    settings = Settings(sweep_interval_s=1.0, unclaimed_after_s=60.0, max_runs=MAX_RUNS)
    with heard(store, ref) as published:
        assert sweep_once(NoBroker(), store, settings) == 0  # type: ignore[arg-type]
    assert published == [store.keys.task(ref)], "watchers see the change"

    record = store.record(ref)
    assert record is not None
    message = poisoned_message("echo", MAX_RUNS)
    assert message == "Tool echo was stopped after 3 runs that lost their worker (MCPQ_MAX_RUNS)"
    assert (record.status, record.message, record.runs) == ("failed", message, 3)
    assert record.error == {"code": -32603, "message": message}
    assert record.result is None
    shard = store.keys.at(ref)
    for index in (shard.leases, shard.unclaimed, shard.active, shard.expiry):
        assert in_index(store, index, ref) is None, index
    stats = stats_hash(store.redis, store.keys)
    assert (stats.get("failed:echo"), stats.get("poisoned:echo")) == ("1", "1")
    assert store.stats([]).totals["poisoned"] == {"echo": 1}

    # A straggler of the last run (its worker only stalled) is fenced out, and told to stop.
    assert store.finish(ref, gen, TaskStatus.COMPLETED, {"content": []}) == "TERMINAL"
    assert store.report(ref, gen, "still here") == "TERMINAL"
    assert store.renew(ref, gen, 5_000) == Renewal(Reply.TERMINAL, TaskStatus.FAILED)
    assert store.claim(ref, LEASE_MS) == Claim("TERMINAL")
    after = store.record(ref)
    assert after is not None and (after.status, after.message) == ("failed", message)
    assert store.sweep(60_000) == [], "nothing left to do"


def test_a_claim_over_an_expired_lease_counts_it_and_refuses_to_start_past_the_limit(
    poison: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    # Duplicate messages reach a worker before any sweep saw the expired leases.
    store = poison
    ref = tasks.new()
    for _run in range(3):
        lose_run(store, clock, ref)
    assert field(store, ref, "lost") == "2", "the second and third claims counted one each"
    assert store.claim(ref, LEASE_MS) == Claim("POISONED"), "a fourth run never starts"
    assert (field(store, ref, "lost"), field(store, ref, "runs")) == ("3", "3")
    assert in_index(store, store.keys.at(ref).leases, ref) is None
    due_at = in_index(store, store.keys.at(ref).unclaimed, ref)
    assert due_at is not None and due_at <= clock.now_ms(), "due for the sweeper at once"
    assert store.claim(ref, LEASE_MS) == Claim("POISONED"), "and no later message starts it"

    (due,) = store.sweep(60_000)
    assert (due.ref, due.poisoned, due.gen) == (ref, True, 3)
    assert store.finish(ref, due.gen, "failed", {"code": -32603, "message": "x"}, "x") == "OK"


def test_a_sweeper_that_dies_before_failing_it_leaves_it_to_the_next_sweep(
    poison: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    store = poison
    ref = tasks.new()
    for run in range(3):
        lose_run(store, clock, ref)
        assert [due.poisoned for due in store.sweep(50)] == [run == 2]
    # The third sweep returned it poisoned; its sweeper died before finish.lua.
    assert field(store, ref, "status") == "working", "the sweep itself only reports it"
    clock.wait_past(int(in_index(store, store.keys.at(ref).unclaimed, ref) or 0))
    (again,) = store.sweep(50)
    assert (again.poisoned, again.gen, field(store, ref, "lost")) == (True, 3, "3")


@pytest.mark.parametrize("limit", [1, 0])
def test_parked_runs_handed_back_runs_and_unstarted_messages_are_not_lost_runs(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock, limit: int
) -> None:
    # With a limit of 1, the first miscounted run would poison the task; 0 is "no limit".
    store.max_runs = limit
    ref, gen = tasks.waiting(parked=True, lease_ms=LEASE_MS)  # parks: lease given up
    clock.wait_past(clock.now_ms() + LEASE_MS)
    assert store.sweep(60_000) == [], "a parked task waits for answers, not a worker"
    assert store.answer(ref, tasks.owner, {"name": "Ada"}, 10).reply == "RESUME"
    resumed = store.claim(ref, 5_000)
    assert resumed.reply is Reply.OK
    assert store.release(ref, resumed.gen) == "OK"  # a worker shutting down hands it back
    assert [d.poisoned for d in store.sweep(60_000)] == [False]
    store.mark_enqueued(ref, 1)  # re-sent; no worker starts it
    clock.wait_past(int(in_index(store, store.keys.at(ref).unclaimed, ref) or 0))
    assert [d.poisoned for d in store.sweep(60_000)] == [False]
    again = store.claim(ref, 5_000)
    assert again.reply is Reply.OK and field(store, ref, "lost") == "0"
    assert (field(store, ref, "runs"), gen) == ("3", 1)


def test_without_a_limit_lost_runs_are_counted_and_the_task_runs_on(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    store.max_runs = 0
    ref = tasks.new()
    for _run in range(4):
        lose_run(store, clock, ref)
        assert [d.poisoned for d in store.sweep(60_000)] == [False]
    assert field(store, ref, "lost") == "4"
    assert store.claim(ref, 5_000).reply is Reply.OK


# -- what a loss says about the tool (judge_loss in _prelude.lua) ------------------------------


def test_a_loss_shared_with_other_runs_is_not_counted_and_the_task_must_run_alone(
    poison: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    store = poison
    ref = tasks.new()
    for killed in range(MAX_RUNS + 1):  # more often than the limit: a whole io process, killed
        claim = store.claim(ref, LEASE_MS, peers=0, alone=True)
        assert claim.reply is Reply.OK, claim
        store.renew_many([(ref, claim.gen), ("another-run", 1)], LEASE_MS)  # with a peer
        assert field(store, ref, "peers") == "1"
        clock.wait_past(int(field(store, ref, "lease") or 0))
        assert store.sweep(60_000, lease_ms=LEASE_MS) == [Due(ref, "echo", "tools-q")]
        # One such loss is what any long task on a host that dies sees: the second isolates it.
        assert field(store, ref, "solo") == ("1" if killed else "0")
    assert (field(store, ref, "lost"), field(store, ref, "shared")) == ("0", str(MAX_RUNS + 1))
    # An io pool (other runs in its process) may not run it: it starts a process of its own.
    assert store.claim(ref, LEASE_MS, peers=5, alone=False) == Claim(Reply.SOLO)
    assert field(store, ref, "runs") == str(MAX_RUNS + 1), "SOLO wrote nothing"
    own = store.claim(ref, LEASE_MS, peers=1, alone=True)  # the run of its own
    assert own.reply is Reply.OK
    # ... whose death while its parent lives counts: the parent says it was alone.
    assert store.lost_alone(ref) is True
    clock.wait_past(int(field(store, ref, "lease") or 0))
    store.sweep(60_000, lease_ms=LEASE_MS)
    assert field(store, ref, "lost") == "1"


def test_a_lease_that_lapsed_while_the_store_was_unreachable_is_excused(
    poison: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    store = poison
    ref = tasks.new()
    lose_run(store, clock, ref)
    store._unreachable_at = time.monotonic()  # the sweeping process just failed to reach it
    assert store.sweep(60_000, lease_ms=LEASE_MS) == [Due(ref, "echo", "tools-q")]
    assert field(store, ref, "lost") in (None, "0"), "no evidence: the run could not renew"
    # A lapse whose run renewed after the store came back is evidence again.
    gen = store.claim(ref, LEASE_MS).gen
    clock.wait_past(store.unreachable_at_ms() + LEASE_MS)
    store.renew(ref, gen, LEASE_MS)
    clock.wait_past(int(field(store, ref, "lease") or 0))
    store.sweep(60_000, lease_ms=LEASE_MS)
    assert field(store, ref, "lost") == "1"


def test_a_run_counted_lost_that_renews_after_all_withdraws_its_loss(
    poison: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    """Paused past its lease (SIGSTOP), alone: counted; when it goes on, its renewal proves
    it was alive, whether or not another run took the task over meanwhile."""
    store = poison
    ref = tasks.new()
    paused = lose_run(store, clock, ref)
    store.sweep(60_000, lease_ms=LEASE_MS)
    assert field(store, ref, "lost") == "1"
    assert store.claim(ref, 60_000).reply is Reply.OK  # taken over meanwhile
    assert store.renew(ref, paused, LEASE_MS).reply is Reply.SUPERSEDED
    assert field(store, ref, "lost") == "0"
    assert store.renew(ref, paused, LEASE_MS).reply is Reply.SUPERSEDED
    assert field(store, ref, "lost") == "0", "withdrawn once"


class Sent:
    """Stands in for the Celery app: records the runs a sweep sends."""

    def __init__(self) -> None:
        self.refs: list[str] = []

    def send_task(self, name: str, args: list[str], **options: object) -> None:
        self.refs.append(args[0])


def test_a_lost_worker_s_thousands_of_runs_are_sent_again_in_one_go(
    store: WhiteBoxStore, tasks: TaskFactory, clock: RedisClock
) -> None:
    """Sweeps follow one another while each finds a full batch: 250 lapsed runs (a worker's run
    loop holds thousands) are all sent again at once, not a batch per sweep interval."""
    refs = [tasks.new() for _ in range(250)]
    for ref in refs:
        assert store.claim(ref, LEASE_MS).reply is Reply.OK
    clock.wait_past(max(int(field(store, ref, "lease") or 0) for ref in refs))
    settings = Settings(sweep_interval_s=2.0, unclaimed_after_s=60.0)
    app = Sent()
    assert sweep_due(app, store, settings, threading.Event()) == 250  # type: ignore[arg-type]
    assert sorted(app.refs) == sorted(refs)
    assert sweep_due(app, store, settings, threading.Event()) == 0  # type: ignore[arg-type]
