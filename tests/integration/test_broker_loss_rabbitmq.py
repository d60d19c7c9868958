"""A worker on RabbitMQ notices its broker's loss while Celery's worker heartbeat is on its way,
with every prefetch slot busy, whether the broker goes away (its connections closed) or goes
silent (its connections open, nothing answering), or goes away again each time the worker has
just reached it; and once the broker is back it reconnects, consumes again and runs new tasks
(``test_broker_loss_with_full_slots`` is the first fault on a Redis broker).

The shared RabbitMQ is never touched: the stack reaches it (a vhost of the test's own) through a
TCP relay (``tests.support.tcp_relay``), a process of the test's. Frozen (SIGSTOP), the relay is
a broker that stopped answering; killed (SIGKILL), one that is gone; resumed (SIGCONT), or a new
relay on the same port, the broker back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kombu import Connection, Exchange, Queue

from mcpq.ops.harness.children import Child
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import free_port, listening, wait_until
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.support import rabbitmq, tcp_relay
from tests.support.stacks import FAST_KNOBS, POOLS, LiveStack
from tests.support.worker_stack import (
    BACK,
    HEARTBEAT_S,
    LOST,
    busy_slots,
    expect_broker_loss_noticed,
    expect_logged,
)

SLOTS = 2
#: The workers' AMQP heartbeat (``MCPQ_AMQP_HEARTBEAT_S``): a silent broker is noticed after
#: two beats of it, once the loop is free to check them.
AMQP_HEARTBEAT_S = 2
#: A silent broker's loss is noticed within this: a publish's confirm timeout (5 s), one
#: reconnect attempt of the heartbeat's connection (4 s), two beats, and the consumer's first
#: attempt (4 s): about 16 s. Without the confirm's bound it was never noticed while the broker
#: stayed silent; with the heartbeat's connection trying again at each beat, after 36 s.
SILENT_NOTICED_S = 26.0


class RelayedStack:
    """A stack whose every process reaches its vhost through a relay on ``port``."""

    def __init__(self, tmp_path: Path, pool: str) -> None:
        knobs = {**FAST_KNOBS, "MCPQ_AMQP_HEARTBEAT_S": str(AMQP_HEARTBEAT_S)}
        self.stack = LiveStack(
            "amqploss", tmp_path, tools=DEFAULT_TOOLS, broker="rabbitmq", env=knobs
        )
        assert self.stack.vhost is not None
        self.port = free_port()
        self.stack.broker_url = self.stack.vhost.url.replace(f":{rabbitmq.PORT}/", f":{self.port}/")
        self.relays = 0
        try:
            self.relay = self.start_relay()
            self.stack.start(webs=1, workers=0)
            self.worker: Child = self.stack.start_worker(concurrency=SLOTS, pool=pool, events=False)
        except BaseException:
            self.stack.close(check=False)
            raise

    def start_relay(self) -> int:
        argv = [sys.executable, tcp_relay.__file__, str(self.port), rabbitmq.HOST]
        child = self.stack.spawn(
            f"relay{self.relays}", [*argv, str(rabbitmq.PORT)], env=dict(os.environ)
        )
        self.relays += 1
        wait_until(lambda: listening(self.port), timeout=20, interval=0.05, message="the relay")
        return child.popen.pid

    def ridden_out(self, client: McpClient, busy: list[str]) -> None:
        """The broker is back: the worker says so, the busy runs are cancelled, and a new task
        runs to its end (it consumes again); nothing was unrecoverable."""
        self.worker.wait_for_log(BACK, timeout=30)
        for task_id in busy:
            client.cancel(task_id)
        quick = client.create_task("slow_compute", {"seconds": 0.1, "label": "after"})
        wait_until(
            lambda: self.stack.task_hash(task_ref(quick["taskId"])).get("status") == "completed",
            timeout=30,
            message="a task created after the outage to complete",
        )
        assert "Unrecoverable error" not in self.worker.log()
        assert self.worker.alive


def _with_stack(
    pool: str, tmp_path: Path, fault: Callable[[RelayedStack, McpClient], None]
) -> None:
    if why := rabbitmq.unavailable():
        pytest.skip(why)
    relayed = RelayedStack(tmp_path, pool)
    try:
        with McpClient(relayed.stack.url(0)) as client:
            fault(relayed, client)
    finally:
        relayed.stack.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pool", POOLS)
def test_a_rabbitmq_broker_lost_during_a_heartbeat_is_noticed_and_ridden_out(
    pool: str, tmp_path: Path
) -> None:
    def gone(relayed: RelayedStack, client: McpClient) -> None:
        busy = busy_slots(relayed.stack, client, SLOTS)
        os.kill(relayed.relay, signal.SIGSTOP)  # a heartbeat goes out and gets no answer
        time.sleep(HEARTBEAT_S + 0.5)
        os.kill(relayed.relay, signal.SIGKILL)  # the broker gone: every connection closed
        expect_broker_loss_noticed(relayed.worker, pool)
        relayed.start_relay()  # the broker back
        relayed.ridden_out(client, busy)

    _with_stack(pool, tmp_path, gone)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("pool", POOLS)
def test_a_rabbitmq_broker_gone_silent_is_noticed_and_ridden_out(pool: str, tmp_path: Path) -> None:
    def silent(relayed: RelayedStack, client: McpClient) -> None:
        busy = busy_slots(relayed.stack, client, SLOTS)
        os.kill(relayed.relay, signal.SIGSTOP)  # silent for good: nothing closes a connection
        expect_broker_loss_noticed(relayed.worker, pool, timeout=SILENT_NOTICED_S)
        os.kill(relayed.relay, signal.SIGCONT)  # the broker answers again
        relayed.ridden_out(client, busy)

    _with_stack(pool, tmp_path, silent)


#: Losses of the broker in a row, each but the first the moment the worker has reached it again.
LOSSES = 3


@pytest.mark.timeout(150)
@pytest.mark.parametrize("pool", POOLS)
def test_a_rabbitmq_broker_lost_again_as_the_consumer_restarts_is_ridden_out(
    pool: str, tmp_path: Path
) -> None:
    """The broker goes away again the moment the worker has reached it: while the consumer
    restarts (its heartbeat, its remote control, its task consumer and QoS, each a publish or a
    declare on the new connection). Each loss is noticed; once the broker stays, the worker
    consumes again, and its heartbeat is heard again (Flower marks a worker that stops beating
    offline)."""

    def flapping(relayed: RelayedStack, client: McpClient) -> None:
        busy = busy_slots(relayed.stack, client, SLOTS)
        for loss in range(1, LOSSES + 1):
            os.kill(relayed.relay, signal.SIGKILL)  # after the first: the consumer restarting
            expect_logged(relayed.worker, LOST, pool, times=loss, timeout=20)
            relayed.relay = relayed.start_relay()
            expect_logged(relayed.worker, BACK, pool, times=loss, timeout=20)
        relayed.ridden_out(client, busy)
        assert relayed.stack.vhost is not None
        beats = heartbeats(relayed.stack.vhost.url, within=3 * HEARTBEAT_S + 1)
        assert beats >= 2, f"{beats} worker heartbeats in {3 * HEARTBEAT_S + 1:g} s"

    _with_stack(pool, tmp_path, flapping)


def heartbeats(vhost_url: str, within: float) -> int:
    """How many ``worker-heartbeat`` events the vhost's event exchange carried in ``within``
    seconds (read on the shared server directly, not through the relay)."""
    got: list[object] = []
    exchange = Exchange("celeryev", type="topic")  # Celery's event exchange, as it declares it
    queue = Queue("", exchange, "worker.heartbeat", exclusive=True, auto_delete=True)
    callbacks = [lambda body, _: got.append(body)]
    with (
        Connection(vhost_url) as conn,
        conn.Consumer(queue, callbacks=callbacks, accept=["json"]),
    ):
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(socket.timeout):
                conn.drain_events(timeout=left)
    return len(got)
