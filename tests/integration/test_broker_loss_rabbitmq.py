"""A worker on RabbitMQ notices its broker's loss when the loss comes as its event loop publishes
Celery's worker heartbeat, with every prefetch slot busy; and once the broker is back it
reconnects, consumes again, and runs new tasks (``test_broker_loss_with_full_slots`` is the same
fault on a Redis broker).

The shared RabbitMQ is never touched: the stack reaches it (a vhost of the test's own) through a
TCP relay (``tests.support.tcp_relay``), a process of the test's. The relay is frozen (SIGSTOP)
for longer than a heartbeat interval, so a heartbeat is on its way into a broker that does not
answer, then killed (SIGKILL): every connection of the worker's is closed at once. Then a new
relay on the same port is the broker back.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import free_port, listening, wait_until
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.support import rabbitmq, tcp_relay
from tests.support.stacks import POOLS, LiveStack
from tests.support.worker_stack import HEARTBEAT_S, busy_slots, expect_broker_loss_noticed

SLOTS = 2


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pool", POOLS)
def test_a_rabbitmq_broker_lost_during_a_heartbeat_is_noticed_and_ridden_out(
    pool: str, tmp_path: Path
) -> None:
    if why := rabbitmq.unavailable():
        pytest.skip(why)
    stack = LiveStack("amqploss", tmp_path, tools=DEFAULT_TOOLS, broker="rabbitmq")
    assert stack.vhost is not None
    port = free_port()
    # Every process of the stack reaches the vhost through the relay.
    stack.broker_url = stack.vhost.url.replace(f":{rabbitmq.PORT}/", f":{port}/")
    relay_argv = [sys.executable, tcp_relay.__file__, str(port), rabbitmq.HOST, str(rabbitmq.PORT)]

    def start_relay(n: int) -> int:
        child = stack.spawn(f"relay{n}", relay_argv, env=dict(os.environ))
        wait_until(lambda: listening(port), timeout=20, interval=0.05, message="the relay")
        return child.popen.pid

    try:
        relay = start_relay(0)
        stack.start(webs=1, workers=0)
        worker = stack.start_worker(concurrency=SLOTS, pool=pool, events=False)
        with McpClient(stack.url(0)) as client:
            ids = busy_slots(stack, client, SLOTS)
            os.kill(relay, signal.SIGSTOP)  # a heartbeat goes out and gets no answer
            time.sleep(HEARTBEAT_S + 0.5)
            os.kill(relay, signal.SIGKILL)  # the broker gone: every connection closed
            expect_broker_loss_noticed(worker, pool)
            start_relay(1)  # the broker back
            worker.wait_for_log("reached the broker at", timeout=30)
            # It consumes again: the slow runs are cancelled, and a new task runs to its end.
            for task_id in ids:
                client.cancel(task_id)
            quick = client.create_task("slow_compute", {"seconds": 0.1, "label": "after"})
            wait_until(
                lambda: stack.task_hash(task_ref(quick["taskId"])).get("status") == "completed",
                timeout=30,
                message="a task created after the outage to complete",
            )
        assert "Unrecoverable error" not in worker.log()
        assert worker.alive
    finally:
        stack.close()
