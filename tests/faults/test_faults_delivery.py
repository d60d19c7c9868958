"""Delivery faults: a web process that dies between persisting and enqueueing, and a Celery
message delivered twice.

- The web process serves ``tests.faults.fault_app:app``: the production app whose producer
  ``os._exit()``s when asked to enqueue, i.e. right after ``create.lua``: the task is in Redis, no
  message was published, the client got no answer. The sweeper must enqueue it once
  ``MCPQ_UNCLAIMED_AFTER_S`` (here 2 s) has passed, and it must run once.
- Duplicate delivery: a second copy of a task's message (same Celery ``task_id``, the task's
  ``ref``) published while the task runs and again once it completed must not run the tool body
  again: ``claim`` answers BUSY, then TERMINAL.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from celery import Celery

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.celery_config import celery_config
from mcpq.shared.jobs import Run, send_run
from mcpq.shared.settings import Settings
from mcpq.shared.store import task_ref
from tests.faults.fault_app import EXIT_CODE, FAULT_APP
from tests.faults.support import KEYS, MakeStack, lines
from tests.support.stacks import BROKERS

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(60),
    # On both brokers (tests/faults/conftest.py): Redis and RabbitMQ.
    pytest.mark.parametrize("broker", BROKERS, indirect=True),
]


def test_web_dies_between_persist_and_enqueue(make_stack: MakeStack) -> None:
    stack = make_stack(webs=0, workers=1)
    faulty = stack.start_web(app=FAULT_APP)
    with stack.redis_client() as r:
        before = {str(ref) for ref in r.zrange(KEYS.active, 0, -1)}
        with McpClient(f"{faulty}/mcp") as client, pytest.raises(httpx.TransportError):
            reply = client.call_tool("slow_compute", {"seconds": 0.5, "label": "orphan"})
            pytest.fail(f"the faulty web process answered: {reply}")
        dropped_at = time.monotonic()
        # The process that persisted the task died in its producer's enqueue: nothing published.
        stack.webs[0].wait_for_log(f"exited with code {EXIT_CODE}")
        # We never learnt the taskId: find the persisted task by its ref.
        (ref,) = {str(ref) for ref in r.zrange(KEYS.active, 0, -1)} - before
        persisted = stack.task_hash(ref)
        assert persisted["status"] == "working" and persisted["tool"] == "slow_compute"
        assert persisted["runs"] == "0", "nothing was enqueued"
        assert r.zscore(KEYS.unclaimed, ref) is not None, "it is on the unclaimed watch list"

        def completed() -> dict[str, str] | None:
            task = stack.task_hash(ref)
            assert task["status"] in {"working", "completed"}, task
            return task if task["status"] == "completed" else None

        done = wait_until(completed, timeout=30, interval=0.05, message="the orphan completed")
        took = time.monotonic() - dropped_at
        print(f"\n[dies before enqueue] orphan task completed {took:.2f}s after the dropped call")
        record = stack.store().record(ref)  # the result is sealed at rest: read through the store
        assert record is not None and text_of(record.result) == "orphan: computed in 0.5s"
        assert done["runs"] == "1"
        assert "sweeper re-enqueued" in stack.worker.log()
        assert r.zscore(KEYS.active, ref) is None and r.zscore(KEYS.unclaimed, ref) is None


def test_duplicate_delivery_runs_the_tool_once(make_stack: MakeStack, tmp_path: Path) -> None:
    # One worker with two slots: the duplicate lands in the free slot while the run goes on.
    stack = make_stack(workers=1)
    effect, calls = tmp_path / "effect.txt", tmp_path / "calls.txt"
    producer = Celery("faults-duplicate")
    producer.conf.update(
        celery_config(Settings(redis_url=stack.redis_url, broker_url=stack.broker_url))
    )
    try:
        with McpClient(stack.url(0)) as client:
            args = {"path": str(effect), "seconds": 3, "calls": str(calls)}
            task_id = client.create_task("step_then_sleep", args)["taskId"]
            ref = task_ref(task_id)
            client.wait_for_message(task_id, "stepped", timeout=15)  # the run is past its step

            def send_copy() -> None:
                send_run(producer, Run("step_then_sleep", ref, "mcpq"))  # the same message again

            send_copy()  # while the first run sleeps
            wait_until(
                lambda: Counter(stack.worker.run_endings(ref))["busy"] == 1,
                timeout=15,
                message="the running copy's duplicate was fenced off",
            )
            assert client.task(task_id)["status"] == "working"
            done = client.wait_for_status(task_id, "completed", timeout=20, interval=0.1)

            send_copy()  # after completion
            wait_until(
                lambda: Counter(stack.worker.run_endings(ref))["terminal"] == 1,
                timeout=15,
                message="the completed task's duplicate was fenced off",
            )
            again = client.task(task_id)
            endings = Counter(stack.worker.run_endings(ref))
            received = stack.worker.log().count(f"Task step_then_sleep[{ref}] received")
            print(
                f"\n[duplicate delivery] {received} deliveries, run endings {dict(endings)}, "
                f"tool body runs {len(lines(calls))}, step effects {len(lines(effect))}"
            )
            assert received == 3
            assert endings == Counter({"completed": 1, "busy": 1, "terminal": 1})
            assert lines(calls) == ["call"], "the tool body ran once"
            assert lines(effect) == ["effect"], "the step ran once"
            assert again["status"] == "completed"
            assert again["result"] == done["result"], "the result is unchanged"
            assert text_of(done["result"]) == "effect written (line 1), slept 3s"
            assert stack.task_hash(ref)["runs"] == "1"
    finally:
        producer.close()
