"""Parking: a task waiting for a human does not hold a worker slot.

One worker with two slots and a short input hold (``MCPQ_INPUT_HOLD_S=0.25``; production: 30 s)
takes 100 tasks that each ask one question. Every run waits the hold, then parks (its job ends,
the task stays ``input_required``). With all 100 parked the worker is free: other tasks run and
complete. Answering all 100 resumes them (re-enqueued by ``tasks/update``); each replays up to its
answered question and completes. No client is ever asked twice.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.faults.support import ACCEPT, KEYS, MakeStack, TaskWatch, lines, open_gauges

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

N = 100


def test_100_parked_tasks_free_the_only_worker(make_stack: MakeStack, tmp_path: Path) -> None:
    stack = make_stack(workers=0, env={"MCPQ_INPUT_HOLD_S": "0.25"})
    stack.start_worker(concurrency=2)
    calls = tmp_path / "calls.txt"
    with McpClient(stack.url(0)) as client:
        started = time.monotonic()
        ids = [
            client.create_task("ask_once", {"calls": str(calls), "label": f"t{i}"})["taskId"]
            for i in range(N)
        ]
        watch = TaskWatch(client)
        watch.add(ids)

        def all_parked() -> bool:
            watch.poll(watch.open_tasks())
            return stack.stats().parked == N

        wait_until(all_parked, timeout=80, interval=0.2, message=f"{N} tasks parked")
        parked_after = time.monotonic() - started
        watch.poll()
        assert watch.count("input_required") == N
        with stack.redis_client() as r:
            assert [r.hget(KEYS.task(task_ref(t)), "parked") for t in ids] == ["1"] * N
            assert [r.hget(KEYS.task(task_ref(t)), "lease") for t in ids] == ["0"] * N
            # and none has a deadline: nothing is due until its answers come (answer.lua) but
            # its expiry, when the sweeper drops it from the active index if still unanswered
            expiries = [r.hget(KEYS.task(task_ref(t)), "expire_at") for t in ids]
            due = [r.zscore(KEYS.unclaimed, task_ref(t)) for t in ids]
            assert due == [float(at) for at in expiries if at], (due[:3], expiries[:3])

        # The worker is free: quick tasks run while the 100 stay parked.
        quick_started = time.monotonic()
        quick = [
            client.create_task("slow_compute", {"seconds": 0, "label": f"free{i}"})["taskId"]
            for i in range(5)
        ]
        for task_id in quick:
            done = client.wait_for_status(task_id, "completed", timeout=15)
            assert text_of(done["result"]).startswith("free")
        quick_took = time.monotonic() - quick_started
        assert stack.stats().parked == N, "still parked while the others ran"
        print(
            f"\n[parking] {N} tasks parked {parked_after:.1f}s after creation (one worker, "
            f"2 slots, hold 0.25 s); 5 other tasks completed in {quick_took:.2f}s meanwhile"
        )

        answered_at = time.monotonic()
        for task_id in ids:
            (key,) = watch.keys[task_id]
            assert client.update(task_id, {key: ACCEPT}).status == 200
        watch.wait_all("completed", timeout=60)
        print(f"[parking] all {N} completed {time.monotonic() - answered_at:.1f}s after answering")

    for task_id in ids:
        assert len(watch.keys[task_id]) == 1, f"asked more than once: {watch.keys[task_id]}"
        assert text_of(watch.last[task_id]["result"]).endswith(": yes")
    asked = Counter(lines(calls))
    assert set(asked) == {f"t{i}" for i in range(N)}
    assert set(asked.values()) == {2}, "each tool ran twice: once to park, once resumed"
    assert set(open_gauges(stack).values()) == {0}, open_gauges(stack)
    with stack.redis_client() as r:
        assert {r.hget(KEYS.task(task_ref(t)), "runs") for t in ids} == {"2"}
