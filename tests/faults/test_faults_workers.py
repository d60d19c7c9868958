"""Worker death: a task survives the loss of the worker running it, without repeating effects.

Every stack here has two workers from the start; the one that received the task's message is
killed as a whole (its Celery main process and every pool child, i.e. its process group), and the
other one, already running, must take the task over:

- SIGKILL: nothing is handed back; the run's lease (``MCPQ_LEASE_S=2``, renewed every 0.5 s)
  expires and the sweeper (every second) enqueues the task again. When the dead worker held the
  sweeper lock (the first worker started usually does, and usually gets the task), the survivor
  can sweep only once that lock expires: its TTL is ``max(3 x interval, 5 s)``, so here resumes
  take about 5 s rather than 3;
- SIGTERM to every process, as Heroku does, with ``REMAP_SIGTERM=SIGQUIT`` (what ``mcpq worker``
  sets): the pool child hands its run back at once, long before the (here 30 s) lease expires.

The resumed start is the survivor's ``claim``: the task hash's ``runs`` counter going to 2.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Child, Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.faults.support import ACCEPT, KEYS, MakeStack, TaskWatch, lines, open_gauges
from tests.support.stacks import BROKERS

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]

#: On both brokers (tests/faults/conftest.py): Redis and RabbitMQ, where a dead worker's message
#: comes back differently (RabbitMQ redelivers it at once, to meet the run's live lease).
ON_BOTH_BROKERS = pytest.mark.parametrize("broker", BROKERS, indirect=True)

KILL_KNOBS = {"MCPQ_LEASE_S": "2"}


def _victim_and_survivor(stack: Stack, tool: str, ref: str) -> tuple[Child, Child]:
    victims = wait_until(
        lambda: stack.worker_that_received(tool, ref), timeout=10, message="the worker running it"
    )
    assert len(victims) == 1, [v.name for v in victims]
    (victim,) = victims
    (survivor,) = [w for w in stack.workers if w is not victim]
    return victim, survivor


@ON_BOTH_BROKERS
@pytest.mark.parametrize("pool", ["cpu", "io"])
def test_sigkill_of_a_whole_worker_mid_tool(make_stack: MakeStack, pool: str) -> None:
    stack = make_stack(workers=2, env=KILL_KNOBS, pool=pool)
    with McpClient(stack.url(0)) as client:
        task_id = client.create_task("slow_compute", {"seconds": 4, "label": "survivor"})["taskId"]
        ref = task_ref(task_id)
        client.wait_for_message(task_id, "computing survivor", timeout=15)  # the run started
        victim, survivor = _victim_and_survivor(stack, "slow_compute", ref)
        assert stack.task_hash(ref)["runs"] == "1"

        killed_at = stack.kill_group(victim, signal.SIGKILL)
        resumed_at = stack.wait_runs(ref, 2, timeout=30)
        stack.reap(victim)
        done = client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)
        print(
            f"\n[worker SIGKILL] kill -> resumed start (claim on {survivor.name}): "
            f"{resumed_at - killed_at:.2f}s; kill -> completed: {time.monotonic() - killed_at:.2f}s"
        )
        assert text_of(done["result"]) == "survivor: computed in 4s"
        assert stack.worker_that_received("slow_compute", ref) == [survivor]
        assert stack.task_hash(ref)["runs"] == "2", "exactly one recovered run"
        assert resumed_at - killed_at < 10, (
            "resumed within seconds (lease 2 s, lock 5 s, sweep 1 s)"
        )


@ON_BOTH_BROKERS
@pytest.mark.parametrize("pool", ["cpu", "io"])
def test_sigkill_while_waiting_for_an_answer_asks_once(
    make_stack: MakeStack, tmp_path: Path, pool: str
) -> None:
    # A long hold: the run keeps waiting in its slot (not parked) when its worker dies.
    stack = make_stack(workers=2, env={**KILL_KNOBS, "MCPQ_INPUT_HOLD_S": "60"}, pool=pool)
    calls = tmp_path / "calls.txt"
    with McpClient(stack.url(0)) as client:
        task_id = client.create_task("ask_once", {"calls": str(calls), "label": "deploy"})["taskId"]
        ref = task_ref(task_id)
        watch = TaskWatch(client)
        watch.add([task_id])
        watch.wait_all("input_required", timeout=15)
        (key,) = watch.keys[task_id]
        assert stack.task_hash(ref)["parked"] == "0", "the run still waits in its slot"
        victim, survivor = _victim_and_survivor(stack, "ask_once", ref)

        killed_at = stack.kill_group(victim, signal.SIGKILL)
        ack = client.update(task_id, {key: ACCEPT})  # the answer arrives after the kill
        assert ack.result["resultType"] == "complete"
        answered_at = time.monotonic()
        watch.wait_all("completed", timeout=30, interval=0.02)
        resumed_at = stack.wait_runs(ref, 2, timeout=1)
        stack.reap(victim)
        print(
            f"\n[SIGKILL while waiting for input] answered {answered_at - killed_at:.2f}s after "
            f"the kill; the replay was claimed by {survivor.name} "
            f"{resumed_at - killed_at:.2f}s after the kill (runs={stack.task_hash(ref)['runs']})"
        )
        assert watch.keys[task_id] == {key}, "the client saw one question over the task's life"
        after = [keys for at, keys in watch.key_log[task_id] if at > answered_at]
        assert not after, f"asked again after the answer: {after}"
        assert text_of(watch.last[task_id]["result"]) == "deploy: yes"
        assert set(open_gauges(stack).values()) == {0}, open_gauges(stack)
        assert lines(calls) == ["deploy", "deploy"], "the question ran once per run"
        assert stack.task_hash(ref)["runs"] == "2"
        with stack.redis_client() as r:
            assert r.hkeys(KEYS.answers(ref)) == [key]


# On Redis only: the step's record is the store's; the kill and the takeover on RabbitMQ are
# test_sigkill_of_a_whole_worker_mid_tool's.
@pytest.mark.parametrize("pool", ["cpu", "io"])
def test_step_side_effect_runs_once_across_a_kill(
    make_stack: MakeStack, tmp_path: Path, pool: str
) -> None:
    stack = make_stack(workers=2, env=KILL_KNOBS, pool=pool)
    effect, calls = tmp_path / "effect.txt", tmp_path / "calls.txt"
    args = {"path": str(effect), "seconds": 3, "calls": str(calls)}
    with McpClient(stack.url(0)) as client:
        task_id = client.create_task("step_then_sleep", args)["taskId"]
        ref = task_ref(task_id)
        with stack.redis_client() as r:
            wait_until(
                lambda: r.hexists(KEYS.steps(ref), "effect"), timeout=15, message="step stored"
            )
        assert lines(effect) == ["effect"]
        victim, survivor = _victim_and_survivor(stack, "step_then_sleep", ref)

        killed_at = stack.kill_group(victim, signal.SIGKILL)
        resumed_at = stack.wait_runs(ref, 2, timeout=30)
        stack.reap(victim)
        done = client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)
        print(
            f"\n[step tool SIGKILL] kill -> resumed start on {survivor.name}: "
            f"{resumed_at - killed_at:.2f}s; effect lines: {len(lines(effect))}; "
            f"tool body runs: {len(lines(calls))}"
        )
        assert lines(effect) == ["effect"], "the step's side effect ran exactly once"
        assert lines(calls) == ["call", "call"], "the body itself ran once per run"
        assert text_of(done["result"]) == "effect written (line 1), slept 3s"
        assert stack.task_hash(ref)["runs"] == "2"


def test_a_kill_between_fn_and_its_save_calls_fn_again_with_the_same_key(
    make_stack: MakeStack, tmp_path: Path
) -> None:
    """The one window no queue can close: the worker dies after ``fn`` did its effect and
    before its value was stored. The replay calls ``fn`` once more, with the same
    ``ctx.step_key``, and the idempotent write (the README's example) happens once."""
    stack = make_stack(workers=2, env=KILL_KNOBS, pool="io")
    db, calls = tmp_path / "charges.db", tmp_path / "calls.txt"
    with McpClient(stack.url(0)) as client:
        task_id = client.create_task("charge_once", {"db": str(db), "calls": str(calls)})["taskId"]
        ref = task_ref(task_id)
        wait_until(lambda: lines(calls), timeout=15, message="fn called")
        victim, _ = _victim_and_survivor(stack, "charge_once", ref)
        with stack.redis_client() as r:
            assert not r.hexists(KEYS.steps(ref), "charge"), "fn has not returned yet"
        stack.kill_group(victim, signal.SIGKILL)
        stack.wait_runs(ref, 2, timeout=30)
        stack.reap(victim)
        done = client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)
    key = lines(calls)[0]
    assert lines(calls) == [key, key], "fn ran again on the replay, with the same key"
    assert key.startswith("mcpq-") and task_id not in key and ref not in key
    assert text_of(done["result"]) == f"charged under {key}"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT key, cents FROM charges").fetchall() == [(key, 42)]


@ON_BOTH_BROKERS
@pytest.mark.parametrize("pool", ["cpu", "io"])
def test_heroku_sigterm_hands_the_run_over_at_once(
    make_stack: MakeStack, tmp_path: Path, pool: str
) -> None:
    # A 30 s lease: a takeover within a few seconds can only come from the hand-back.
    stack = make_stack(workers=0, env={"MCPQ_LEASE_S": "30"})
    for _ in range(2):
        stack.start_worker(REMAP_SIGTERM="SIGQUIT", pool=pool)
    effect = tmp_path / "effect.txt"
    with McpClient(stack.url(0)) as client:
        args = {"path": str(effect), "seconds": 4}
        task_id = client.create_task("step_then_sleep", args)["taskId"]
        ref = task_ref(task_id)
        client.wait_for_message(task_id, "stepped", timeout=15)  # the run is past its step
        victim, survivor = _victim_and_survivor(stack, "step_then_sleep", ref)

        terminated_at = stack.kill_group(victim, signal.SIGTERM)
        taken_at = stack.wait_runs(ref, 2, timeout=25)
        stack.reap(victim, timeout=20)
        exited_at = time.monotonic()
        done = client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)
        print(
            f"\n[Heroku SIGTERM] SIGTERM -> taken by {survivor.name}: "
            f"{taken_at - terminated_at:.2f}s (lease 30 s); victim exited after "
            f"{exited_at - terminated_at:.2f}s"
        )
        assert taken_at - terminated_at < 8, "well before the 30 s lease would expire"
        assert stack.worker_that_received("step_then_sleep", ref) == [survivor]
        assert lines(effect) == ["effect"]
        assert text_of(done["result"]) == "effect written (line 1), slept 4s"
