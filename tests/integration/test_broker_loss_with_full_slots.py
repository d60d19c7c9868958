"""A worker notices the loss of its Redis broker even when the loss comes as its event loop
publishes Celery's worker heartbeat, with every prefetch slot busy.

Celery publishes ``worker-heartbeat`` from the consumer's event loop every 2 s, with kombu's
retry and no bound on it. A broker lost while one was on its way kept the loop in that retry
until the broker came back: the closed sockets were never read, the acks of the runs that died of
the outage never ran, and the worker neither logged the loss nor gave up after
``MCPQ_BROKER_WAIT_S`` (``workers.event_loop_guard.EventLoopGuard`` gives such a reconnect one
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
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.stacks import POOLS, LiveStack
from tests.support.worker_stack import HEARTBEAT_S, busy_slots, expect_broker_loss_noticed

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
            busy_slots(stack, client, SLOTS)
        redis = stack.redis_server
        assert redis is not None
        os.kill(redis.pid, signal.SIGSTOP)  # a heartbeat goes out and waits for its reply
        time.sleep(HEARTBEAT_S + 0.5)
        redis.kill()  # the broker gone: every socket of the worker's is closed
        expect_broker_loss_noticed(worker, pool)
        assert "Unrecoverable error" not in worker.log()
        assert worker.alive
    finally:
        stack.close()
