"""The store's plans without Redis (``mcpq.shared.store.plans``, ``task_plans``): what each asks its
driver to do, in which order, and what it makes of the replies and errors it is given. Both
stores run these same plans; here a list of canned replies plays the driver."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from redis.exceptions import NoScriptError

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.store import Admission, Keys, NewTask, Refused, task_ref
from mcpq.shared.store.call_types import PipelineCall
from mcpq.shared.store.clock import RedisClock
from mcpq.shared.store.plans import TIME, Done, Eval, EvalAndWait, Load, Plan, ScriptPlans, resume
from mcpq.shared.store.redis_errors import NotReplicated
from mcpq.shared.store.task_plans import TaskPlans

NOW = [1_700_000_000, 0]  # TIME's reply: 1 700 000 000 000 ms
READINGS = RedisClock.READINGS  # TIME read to set a store's first anchor
TASK = NewTask(task_ref("plan"), "echo", "q", "principal", {}, {}, 60_000, 100)


def driven(
    plan: Plan[Any], replies: Iterable[Any], ops: list[Any] | None = None
) -> tuple[list[Any], Any]:
    """The ops ``plan`` asked for (also appended to ``ops``) and its result, each op answered
    by the next of ``replies`` (an exception is raised into the plan instead, as a driver does
    with an op's error)."""
    ops = [] if ops is None else ops
    answers = iter(replies)
    op = resume(plan)
    while not isinstance(op, Done):
        ops.append(op)
        answer = next(answers)
        op = resume(plan, None, answer) if isinstance(answer, Exception) else resume(plan, answer)
    assert next(answers, None) is None, "the plan ended before every reply was used"
    return ops, op.result


def anchored(refresh_s: float = 30.0) -> RedisClock:
    clock = RedisClock(refresh_s)
    driven(ScriptPlans(clock).now_ms(), [NOW] * READINGS)
    return clock


def test_a_script_that_uses_the_clock_gets_now_last_and_a_first_run_reads_time_first() -> None:
    plans = TaskPlans(Keys())
    ops, created = driven(plans.mark_enqueued(TASK.ref, 5_000), [NOW] * READINGS + [1])
    assert ops[:READINGS] == [TIME] * READINGS
    (run,) = ops[READINGS:]
    assert isinstance(run, Eval) and run.script == "mark_enqueued"
    assert abs(int(run.args[-1]) - 1_700_000_000_000) < 1_000  # Redis's time, as last ARGV
    assert created is True


def test_a_due_anchor_is_read_again_once_by_the_run_that_finds_it_due() -> None:
    plans = TaskPlans(Keys(), clock=anchored(refresh_s=0.0))  # due at once, every time
    ops, _ = driven(plans.mark_enqueued(TASK.ref, 5_000), [NOW, 1])
    assert ops[0] == TIME and isinstance(ops[1], Eval)
    # a script that does not use the clock never reads it (tasks/get's)
    stored = ["owner", "principal", "status", "working", "created_ms", "1", "updated_ms", "2"]
    ops, (record, inputs) = driven(plans.get(TASK.ref, "principal"), [[stored, []]])
    assert [type(op) for op in ops] == [Eval] and ops[0].script == "read"
    assert (record.status, record.updated_ms, inputs) == ("working", 2, {})


def test_a_script_redis_forgot_is_loaded_and_run_once_more() -> None:
    plans = TaskPlans(Keys(), clock=anchored())
    ops, cancelled = driven(
        plans.cancel(TASK.ref, "principal", "bye"),
        [NoScriptError("NOSCRIPT"), None, ["CANCELLED", 1]],
    )
    assert ops[1] == Load("cancel") and ops[2] == ops[0]
    assert (cancelled.reply, cancelled.running) == ("CANCELLED", True)
    # forgotten again right after the load: that is not swallowed
    with pytest.raises(NoScriptError):
        driven(plans.cancel(TASK.ref, "p", "x"), [NoScriptError("1"), None, NoScriptError("2")])


def test_an_error_of_an_op_reaches_the_caller() -> None:
    plans = TaskPlans(Keys(), clock=anchored())
    with pytest.raises(StoreUnavailable):
        driven(plans.get(TASK.ref, "principal"), [StoreUnavailable()])


def test_a_sharded_create_admits_on_the_home_shard_then_creates() -> None:
    """A full quota set is pruned of the tasks that ended (read where they live) and asked
    once more; the create itself then carries no admission."""
    plans = TaskPlans(Keys(shards=4), clock=anchored())
    admit = Admission("principal-key", max_open=2)
    full = ["FULL", 1_700_000_000_000, task_ref("a"), 1, task_ref("b"), 2]
    replies = [full, ["completed", "working"], ["OK"], [1, 1_700_000_000_001]]
    ops, created = driven(plans.create(TASK, 30_000, admit), replies)
    assert [getattr(op, "script", type(op).__name__) for op in ops] == [
        "admit",
        "PipelineCall",
        "admit",
        "create",
    ]
    assert isinstance(ops[1], PipelineCall)
    # the ended one is dropped before asking again; the working one stays
    assert task_ref("a") in ops[2].args and task_ref("b") not in ops[2].args
    assert created == 1_700_000_000_001
    with pytest.raises(Refused):
        driven(plans.create(TASK, 30_000, admit), [["QUOTA", 500]])


def test_a_create_no_replica_confirmed_is_withdrawn_and_refused() -> None:
    """With ``MCPQ_REDIS_MIN_REPLICAS``, the script and its ``WAIT`` go as one op; a create
    too few replicas confirmed is cancelled (best effort: Redis may be gone by then too) and
    the client is told to retry."""
    plans = TaskPlans(Keys(), clock=anchored(), min_replicas=1, replica_wait_ms=100)
    ops, created = driven(plans.create(TASK, 30_000), [[[1, 7], 1]])
    assert isinstance(ops[0], EvalAndWait) and (ops[0].replicas, ops[0].timeout_ms) == (1, 100)
    assert created == 7
    for withdrawn in (["CANCELLED", 0], StoreUnavailable()):  # (Redis gone too: no matter)
        ops = []
        with pytest.raises(NotReplicated) as refused:
            driven(plans.create(TASK, 30_000), [[[1, 7], 0], withdrawn], ops)
        assert refused.value.data == {"requiredReplicas": 1, "replicas": 0}
        assert isinstance(ops[1], Eval) and ops[1].script == "cancel"
        assert ops[1].keys[0] == Keys().task(TASK.ref)
