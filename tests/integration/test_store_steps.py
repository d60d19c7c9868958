"""``ctx.step`` calls ``fn`` only in a run that still holds the task (``begin_step.lua``).

The interleaving behind a side effect done twice under mixed faults: a run paused (SIGSTOP) or
cut off from Redis past its lease while the sweeper re-sent its task and another worker claimed
it. When it went on, its step read the memo unfenced (nothing stored yet: its successor had not
got there, or was inside ``fn`` too), called ``fn``, and only the save was refused. These tests
build that interleaving step by step on a real Redis, with the run's real ``RunContext``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from mcpq.shared.errors import StoreUnavailable, TaskCancelled
from mcpq.shared.store import Reply
from mcpq.shared.tools import step_key
from mcpq.workers.context import RunContext
from mcpq.workers.interrupts import RunSuperseded
from tests.support.white_box import quiet_watch

LEASE_MS = 200


def context(store: Any, ref: str, gen: int) -> RunContext:
    return RunContext(store, ref, gen, {}, 1.0, watch=quiet_watch(), lease_ms=LEASE_MS)


def test_a_run_taken_over_before_its_step_does_not_call_fn(store, tasks, clock) -> None:
    ref, first = tasks.running(lease_ms=LEASE_MS)
    paused = context(store, ref, first)
    # The run stops (SIGSTOP) just before its step; its lease lapses; the sweeper's re-sent run
    # claims the task on another worker.
    clock.wait_past(int(store.redis.hget(store.keys.task(ref), "lease")))
    taken = store.claim(ref, 30_000)
    assert taken.reply == "OK" and taken.gen == first + 1
    effects: list[str] = []

    with pytest.raises(RunSuperseded):  # the run ends superseded, never calling fn
        paused.step("charge", lambda: effects.append("first run") or 1)
    assert effects == []

    successor = context(store, ref, taken.gen)
    assert successor.step("charge", lambda: effects.append("second run") or 2) == 2
    assert effects == ["second run"]


def test_a_lapsed_lease_nobody_claimed_is_kept_by_the_step(store, tasks, clock) -> None:
    """Cut off from Redis past its lease, the run was not taken over: it still holds the task,
    and its step keeps the lease, so the run the sweeper sent meanwhile finds it busy."""
    ref, gen = tasks.running(lease_ms=LEASE_MS)
    clock.wait_past(int(store.redis.hget(store.keys.task(ref), "lease")))
    run = context(store, ref, gen)
    assert run.step("charge", lambda: 1) == 1
    assert int(store.redis.hget(store.keys.task(ref), "lease")) > clock.now_ms()
    assert store.claim(ref, 30_000).reply == "BUSY"


def test_an_earlier_runs_value_saved_late_spares_its_successor_the_call(
    store, tasks, clock
) -> None:
    """A run taken over while inside ``fn`` (past the check) saves what ``fn`` did; the save
    is refused as the run's (it stops) but kept as the step's value, so the run that took over
    does not call ``fn`` again if it gets there later."""
    ref, first = tasks.running(lease_ms=LEASE_MS)
    assert store.begin_step(ref, first, "charge", LEASE_MS).found is False  # fn starts
    clock.wait_past(int(store.redis.hget(store.keys.task(ref), "lease")))
    taken = store.claim(ref, 30_000)
    assert store.save_step(ref, first, "charge", {"id": "ch_1"}) == (Reply.SUPERSEDED, None)
    effects: list[str] = []
    successor = context(store, ref, taken.gen)
    assert successor.step("charge", lambda: effects.append("again") or {}) == {"id": "ch_1"}
    assert effects == []
    # A later generation's save never stands in for an earlier one's refusal: nothing newer
    # than the task's own generation is stored.
    assert store.save_step(ref, taken.gen + 1, "other", 1) == (Reply.SUPERSEDED, None)
    assert store.step_value(ref, "other") == (False, None)


def test_a_cancelled_task_refuses_the_step_before_fn(store, tasks) -> None:
    ref, gen = tasks.running()
    store.cancel(ref, tasks.owner)
    assert store.status(ref) == "cancelled"
    effects: list[str] = []
    with pytest.raises(TaskCancelled):
        context(store, ref, gen).step("charge", lambda: effects.append("x") or 1)
    assert effects == []


def test_the_step_key_is_the_same_in_every_run_and_different_for_every_step() -> None:
    key = step_key("a" * 32, "charge")
    assert key == step_key("a" * 32, "charge")
    assert key.startswith("mcpq-") and len(key) == 53 and key[5:].isalnum()
    assert len({key, step_key("a" * 32, "refund"), step_key("b" * 32, "charge")}) == 3
    # No confusion between a ref and a name that run into each other.
    assert step_key("a" * 32, "bc") != step_key("a" * 32 + "b", "c")


def test_a_taken_over_run_can_act_through_no_other_context_call(store, tasks, clock) -> None:
    """Asking, reporting, sleeping, the cancel check: each refuses a run that lost its task
    (asking and reporting are fenced writes; ``cancelled`` and ``sleep`` read the generation)."""
    ref, first = tasks.running(lease_ms=LEASE_MS)
    clock.wait_past(int(store.redis.hget(store.keys.task(ref), "lease")))
    assert store.claim(ref, 30_000).reply == "OK"
    for act in (
        lambda ctx: ctx.report("still here"),
        lambda ctx: ctx.elicit("Go on?", {"type": "object", "properties": {}}),
        lambda ctx: ctx.sleep(0.01),
    ):
        with pytest.raises(RunSuperseded):
            act(context(store, ref, first))
    assert context(store, ref, first).cancelled is True
    record = store.record(ref)
    assert record is not None and not record.message
    assert store.redis.hkeys(store.keys.inputs(ref)) == []


class Flaky:
    """The store, unreachable for the first ``failures`` step saves (a restart, a failover)."""

    def __init__(self, store: Any, failures: int) -> None:
        self._store, self.failures = store, failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def save_step(self, *args: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable()
        return self._store.save_step(*args)


def test_a_steps_value_is_saved_through_a_store_outage(store, tasks) -> None:
    """``fn`` has had its effect: a run that gave up on saving it would leave the next run to
    call it again. It waits for the store instead."""
    ref, gen = tasks.running()
    flaky = Flaky(store, failures=3)
    effects: list[str] = []
    assert context(flaky, ref, gen).step("charge", lambda: effects.append("x") or 7) == 7
    assert flaky.failures == 0 and effects == ["x"]
    assert store.step_value(ref, "charge") == (True, 7)


class Slow:
    """The store, whose first ``begin_step`` reply reaches the run late (a thread that waited
    for the GIL, a process stopped right after the round trip)."""

    def __init__(self, store: Any, late_s: float) -> None:
        self._store, self._late_s, self.begun = store, late_s, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def begin_step(self, *args: Any) -> Any:
        self.begun += 1
        start = self._store.begin_step(*args)
        if self.begun == 1:
            time.sleep(self._late_s)
        return start


def test_a_proof_that_came_late_is_sought_again_before_fn(store, tasks, clock) -> None:
    """The proof holds for a quarter of a lease on the run's clock: past it, the lease may
    have lapsed and the task been taken over, so the run proves it again (and a run taken over
    meanwhile stops there)."""
    ref, gen = tasks.running(lease_ms=LEASE_MS)
    slow = Slow(store, late_s=LEASE_MS / 1000)  # a whole lease late: it lapsed meanwhile
    effects: list[str] = []
    assert context(slow, ref, gen).step("charge", lambda: effects.append("x") or 1) == 1
    assert slow.begun == 2 and effects == ["x"]

    ref, gen = tasks.running(lease_ms=LEASE_MS)
    replies: list[Any] = []

    class TakenOverWhileLate(Slow):
        def begin_step(self, *args: Any) -> Any:
            replies.append(start := store.begin_step(*args))
            if len(replies) == 1:  # late: the lease lapsed, a successor claimed the task
                clock.wait_past(int(store.redis.hget(store.keys.task(ref), "lease")))
                assert store.claim(ref, 30_000).reply == "OK"
            return start

    late = TakenOverWhileLate(store, 0.0)
    with pytest.raises(RunSuperseded):
        context(late, ref, gen).step("charge", lambda: effects.append("late") or 1)
    assert [r.reply for r in replies] == ["OK", "SUPERSEDED"]
    assert effects == ["x"], "the late run never called fn"
