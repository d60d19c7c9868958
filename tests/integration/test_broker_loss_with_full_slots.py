"""A worker notices the loss of its Redis broker even when the loss comes as its event loop
publishes Celery's worker heartbeat, with every prefetch slot busy.

Celery publishes ``worker-heartbeat`` from the consumer's event loop every 2 s, with kombu's
retry and no bound on it. A broker lost while one was on its way kept the loop in that retry
until the broker came back: the closed sockets were never read, the acks of the runs that died of
the outage never ran, and the worker neither logged the loss nor gave up after
``MCPQ_BROKER_WAIT_S`` (``workers.redis_transport.EventLoopGuard`` gives such a reconnect one
attempt). With every slot busy no BRPOP is in flight, as in the 200-task restart of the fault
suite: only the remote-control subscription would have seen the loss.

Redis is frozen (SIGSTOP) for longer than a heartbeat interval, so a heartbeat is waiting for
its reply, then killed (SIGKILL), both by pid: the test's own redis-server on a free port.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.support.stacks import POOLS, LiveStack
from tests.support.worker_stack import main_thread_stack

#: Celery's heartbeat interval (``celery.worker.heartbeat.Heart``): Redis stays frozen longer.
HEARTBEAT_S = 2.0
SLOTS = 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pool", POOLS)
def test_a_broker_lost_during_a_heartbeat_is_noticed_with_every_slot_busy(
    pool: str, tmp_path: Path
) -> None:
    stack = LiveStack("fullslots", tmp_path, tools=DEFAULT_TOOLS)
    try:
        stack.start(webs=1, workers=0)
        worker = stack.start_worker(concurrency=SLOTS, pool=pool, events=False)
        with McpClient(stack.url(0)) as client:
            ids = [
                client.create_task("slow_compute", {"seconds": 60, "label": f"s{i}"})["taskId"]
                for i in range(SLOTS)
            ]
            wait_until(
                lambda: all(stack.task_hash(task_ref(t)).get("runs") == "1" for t in ids),
                timeout=20,
                message="every slot busy",
            )
        redis = stack.redis_server
        assert redis is not None
        os.kill(redis.pid, signal.SIGSTOP)  # a heartbeat goes out and waits for its reply
        time.sleep(HEARTBEAT_S + 0.5)
        redis.kill()  # the broker gone: every socket of the worker's is closed
        try:
            worker.wait_for_log("cannot reach the broker at", timeout=10)
        except TimeoutError:
            pytest.fail(
                f"the {pool} worker did not notice the broker's loss in 10 s; its event loop:\n"
                f"{main_thread_stack(worker)}"
            )
        assert "Unrecoverable error" not in worker.log()
        assert worker.alive
    finally:
        stack.close()
