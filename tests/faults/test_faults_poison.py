"""Poison runs: a tool that kills the process running it ends ``failed`` after ``MCPQ_MAX_RUNS``.

``exit_worker`` calls ``os._exit(1)``: no finish, no hand-back, the run's lease just lapses.
Before, the sweeper sent the task again after every lease expiry until its TTL (forever with
``ttlMs: null``), a worker process lost each time, and the task stayed ``working``. Now each
expired lease counts as a run that lost its worker, and at the third the sweeper fails the task.

- cpu pool: the tool kills its pool process; Celery replaces it and the worker lives on (its
  requeued message meets the dead run's live lease and ends BUSY: only the sweeper re-runs it);
- io pool: the tool kills the whole worker (a thread pool shares its process): the test starts a
  new worker each time, as a platform restarts a crashed dyno. Such a loss says nothing of which
  of the process's runs was the cause, so it is not counted: at the second the task runs in a
  process of its own (``mcpq.workers.solo``), whose three deaths, its worker living on, fail it.

Also here, through ``tasks/get``: a progress text is not shown any more once the task asks for
input or ends.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from mcpq.ops.cli.status import Status, render
from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.faults.support import ACCEPT, MakeStack, lines

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

LEASE_S = 2.0
SWEEP_S = 1.0
POISON_KNOBS = {
    "MCPQ_LEASE_S": str(LEASE_S),
    "MCPQ_SWEEP_INTERVAL_S": str(SWEEP_S),
    "MCPQ_MAX_RUNS": "3",
}
MESSAGE = "Tool exit_worker was stopped after 3 runs that lost their worker (MCPQ_MAX_RUNS)"
#: Runs of ``exit_worker`` until it is failed: three of its own (a prefork process runs one
#: job); in an io pool two shared losses first, then three in a process of its own.
RUNS_BEFORE_POISONED = {"cpu": 3, "io": 5}


def _restart_dead_workers(stack: Stack, pool: str) -> float:
    """Start a new worker for each one that died; returns the seconds spent starting them."""
    spent = 0.0
    for worker in [w for w in stack.workers if not w.alive]:
        started = time.monotonic()
        stack.reap(worker)
        stack.start_worker(pool=pool)
        spent += time.monotonic() - started
    return spent


@pytest.mark.parametrize("pool", ["cpu", "io"])
def test_a_tool_that_kills_its_worker_fails_after_three_runs(
    make_stack: MakeStack, tmp_path: Path, pool: str
) -> None:
    # Two slots: in a cpu pool the second takes the re-sent run while Celery is still noticing
    # that the first one's process died (seconds), so each round costs about a lease and a sweep.
    stack = make_stack(workers=1, env=POISON_KNOBS, pool=pool)
    calls = tmp_path / "calls.txt"
    with McpClient(stack.url(0)) as client:
        created_at = time.monotonic()
        task_id = client.create_task("exit_worker", {"calls": str(calls)})["taskId"]
        restarts = 0.0

        def ended() -> dict[str, object] | None:
            nonlocal restarts
            if pool == "io":
                restarts += _restart_dead_workers(stack, pool)
            task = client.task(task_id)
            return task if task["status"] != "working" else None

        task = wait_until(ended, timeout=60, interval=0.1, message="the task to end")
        elapsed = time.monotonic() - created_at
        print(
            f"\n[poison run, {pool} pool] create -> failed: {elapsed:.2f}s "
            f"({elapsed / LEASE_S:.1f} leases of {LEASE_S:g}s; {restarts:.2f}s of it restarting "
            f"workers); runs: {len(lines(calls))}"
        )
        assert task["status"] == "failed", task
        assert task["statusMessage"] == MESSAGE
        assert task["error"] == {"code": -32603, "message": MESSAGE}
        assert "result" not in task
        # Three runs of its own, each lost; about one lease and one sweep apiece (plus worker
        # restarts). In an io pool (a process that takes other jobs) its first two losses say
        # nothing of the tool (judge_loss: shared); from the second on it runs in a process of
        # its own (mcpq.workers.solo), whose deaths count.
        runs = RUNS_BEFORE_POISONED[pool]
        assert lines(calls) == ["call"] * runs
        stored = stack.task_hash(task_ref(task_id))
        assert (stored["runs"], stored["lost"]) == (str(runs), "3")
        assert stored.get("shared", "0") == str(runs - 3)
        assert elapsed - restarts < runs * (LEASE_S + SWEEP_S) + 3, f"within about {runs} leases"

        # And never again: one more lease and sweep later, nothing ran.
        time.sleep(LEASE_S + SWEEP_S)
        _restart_dead_workers(stack, pool)
        assert lines(calls) == ["call"] * runs
        assert client.task(task_id)["status"] == "failed"

    snapshot = stack.stats()
    assert snapshot.totals["poisoned"] == {"exit_worker": 1}
    assert snapshot.totals["failed"] == {"exit_worker": 1}
    shown = render(Status(snapshot))
    assert "poisoned (total)" in shown and "exit_worker" in shown, shown
    if pool == "cpu":
        assert stack.dead() == [], "the worker itself survived its pool process"


def test_progress_text_is_not_shown_once_the_task_asks_or_ends(
    make_stack: MakeStack, tmp_path: Path
) -> None:
    stack = make_stack(workers=1, env={"MCPQ_INPUT_HOLD_S": "30"}, pool="io")
    calls = tmp_path / "calls.txt"
    with McpClient(stack.url(0)) as client:
        task_id = client.create_task("report_then_ask", {"calls": str(calls)})["taskId"]
        waiting = client.wait_for_status(task_id, "input_required", timeout=15)
        assert "statusMessage" not in waiting, waiting
        (key,) = waiting["inputRequests"]
        assert client.update(task_id, {key: ACCEPT}).status == 200
        done = client.wait_for_status(task_id, "completed", timeout=15)
        assert "statusMessage" not in done, done
        assert text_of(done["result"]) == "after-report: yes"
        assert stack.task_hash(task_ref(task_id))["reports"] == "1", "the text was written"


HEALTHY = 10


def _all_claimed(stack: Stack, refs: list[str], runs: int) -> bool:
    return all(int(stack.task_hash(ref)["runs"]) >= runs for ref in refs)


@pytest.mark.timeout(180)
def test_healthy_runs_killed_with_their_io_worker_three_times_are_not_poison(
    make_stack: MakeStack,
) -> None:
    """A whole io worker killed from outside, three times, with ten healthy runs in it: each
    loss is shared (the runs' renewals said so), so none counts (``lost`` stays 0). The second
    marks the tasks ``solo``; their next runs are each a process of its own (four at a time), in
    the worker's process group: killed with it, their renewals still said they had peers."""
    stack = make_stack(workers=0, env=POISON_KNOBS)
    stack.start_worker(pool="io", concurrency=2 * HEALTHY)
    with McpClient(stack.url(0)) as client:
        args = [{"seconds": 8, "label": f"healthy {i}"} for i in range(HEALTHY)]
        ids = [client.create_task("slow_compute", a)["taskId"] for a in args]
        refs = [task_ref(task_id) for task_id in ids]
        for kill in range(3):
            wait_until(
                lambda k=kill: _all_claimed(stack, refs, k + 1),  # type: ignore[misc]
                timeout=60,
                interval=0.1,
                message=f"every task running before kill {kill + 1}",
            )
            time.sleep(LEASE_S / 2)  # a renewal or two: each lease says how many peers it had
            (victim,) = stack.workers
            stack.kill_group(victim, signal.SIGKILL)
            stack.reap(victim)
            stack.start_worker(pool="io", concurrency=2 * HEALTHY)
        done = [client.wait_for_status(t, "completed", timeout=90) for t in ids]
    assert [d["status"] for d in done] == ["completed"] * HEALTHY, done
    hashes = [stack.task_hash(ref) for ref in refs]
    assert [h.get("lost", "0") for h in hashes] == ["0"] * HEALTHY
    assert all(h.get("solo") == "1" and int(h["runs"]) >= 3 for h in hashes), hashes


@pytest.mark.timeout(180)
def test_waiting_runs_outlive_three_redis_restarts_without_being_poison(
    make_stack: MakeStack,
) -> None:
    """Redis restarted three times, each outage longer than the lease, under ten waiting runs:
    their leases lapse because nobody could reach the store, which says nothing about their
    tool (every process saw the store unreachable since the runs last renewed)."""
    stack = make_stack(workers=0, env=POISON_KNOBS, aof=True)
    stack.start_worker(pool="io", concurrency=2 * HEALTHY)
    with McpClient(stack.url(0)) as client:
        args = [{"seconds": 25, "label": f"waiting {i}"} for i in range(HEALTHY)]
        ids = [client.create_task("slow_compute", a)["taskId"] for a in args]
        refs = [task_ref(task_id) for task_id in ids]
        wait_until(lambda: _all_claimed(stack, refs, 1), timeout=30, message="every task running")
        for _ in range(3):
            time.sleep(LEASE_S / 2)
            stack.stop_redis()
            time.sleep(LEASE_S + SWEEP_S)  # every lease lapses meanwhile
            stack.start_redis_again()
            wait_until(lambda: client.get(ids[0]).status == 200, timeout=20, message="Redis back")
        done = [client.wait_for_status(t, "completed", timeout=90) for t in ids]
    assert [d["status"] for d in done] == ["completed"] * HEALTHY, done
    assert [stack.task_hash(ref).get("lost", "0") for ref in refs] == ["0"] * HEALTHY
