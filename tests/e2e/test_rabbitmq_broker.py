"""RabbitMQ as Celery's broker (``CELERY_BROKER_URL=amqp://…``), the task store on Redis.

On the session stacks (both brokers): a cancel reaches a running tool within a second, and a
queued run that is cancelled is dropped by the worker as revoked (Celery's broadcast, on
RabbitMQ over the ``celery.pidbox`` fanout exchange) and never starts.

On private stacks with no worker at first: the depth of a queue is the broker's count, in
``mcpq status`` and ``/metrics`` (on RabbitMQ the store's Redis holds no queue to count), and
the task queues are of the ``MCPQ_AMQP_QUEUE_TYPE`` type while Celery's control queues stay
classic.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from mcpq.ops.cli.status import collect, render
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS, Settings
from mcpq.shared.store import task_ref
from tests.support import rabbitmq, stacks
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: The session stack's tests run on both brokers (``tests/e2e/conftest.py``).
BROKERS = stacks.BROKERS
POOLS = stacks.POOLS  # and on both pool kinds: the worker's side differs

METRICS_TOKEN = "broker-depths-metrics-token-7f1c"


def _wait_running(client: McpClient, task_id: str, label: str) -> None:
    client.wait_for_message(task_id, f"computing {label}", timeout=15)


def test_cancel_reaches_a_running_tool_within_a_second(client: McpClient, stack: Stack) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 60, "label": "quick-stop"})["taskId"]
    _wait_running(client, task_id, "quick-stop")

    started = time.monotonic()
    client.cancel(task_id)
    line = stack.worker.wait_for_run_end(task_ref(task_id), timeout=5)
    took = time.monotonic() - started
    print(f"\ncancel -> run ended ({line}) after {took * 1000:.0f} ms")
    assert line == "cancelled"
    assert took <= 1.0, f"the running tool stopped {took:.2f}s after the cancel"


def test_a_cancelled_queued_run_is_revoked_and_never_starts(
    client: McpClient, stack: Stack, tmp_path: Path
) -> None:
    # Both worker slots busy (prefetch 1 per slot, acks late): the next run waits in the broker.
    fillers = [
        client.create_task("slow_compute", {"seconds": 60, "label": f"hold{i}"})["taskId"]
        for i in range(2)
    ]
    for i, filler in enumerate(fillers):
        _wait_running(client, filler, f"hold{i}")
    marker = tmp_path / "revoked-task-ran"
    queued = client.create_task("touch_then_sleep", {"path": str(marker), "seconds": 0})["taskId"]
    ref = task_ref(queued)
    client.cancel(queued)
    # The revoke is a broadcast: wait until the worker has it before letting the message in.
    stack.worker.wait_for_log(f"Tasks flagged as revoked: {ref}", timeout=10)
    for filler in fillers:
        client.cancel(filler)

    stack.worker.wait_for_log(f"Discarding revoked task: touch_then_sleep[{ref}]", timeout=15)
    for filler in fillers:
        stack.worker.wait_for_run_end(task_ref(filler), timeout=5)
    assert not marker.exists(), "the cancelled run started"
    assert stack.task_hash(ref).get("runs") == "0", "no run claimed it"
    assert stack.worker.run_endings(ref) == [], "the job never ran"
    assert client.task(queued)["status"] == "cancelled"


def _metric(text: str, name: str, labels: str) -> float | None:
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


@pytest.mark.parametrize(
    ("broker_name", "queue_type"),
    [("redis", ""), ("rabbitmq", "quorum"), ("rabbitmq", "classic")],
)
def test_queue_depths_are_the_brokers_and_queues_have_their_type(
    tmp_path: Path, broker_name: str, queue_type: str
) -> None:
    if broker_name == "rabbitmq" and (why := rabbitmq.unavailable()):
        pytest.skip(why)
    env = {**FAST_KNOBS, "MCPQ_METRICS_TOKEN": METRICS_TOKEN}
    if queue_type:
        env["MCPQ_AMQP_QUEUE_TYPE"] = queue_type
    stack = LiveStack("depths", tmp_path / "stack", env=env, broker=broker_name)
    try:
        stack.start(webs=1, workers=0)  # nothing consumes yet: the runs wait in their queue
        settings = Settings(
            redis_url=stack.redis_url,
            broker_url=stack.broker_url,
            tools=tuple(DEFAULT_TOOLS.split(",")),
            data_keys=stack.data_keys,
            amqp_queue_type=queue_type or "quorum",
        )
        with McpClient(stack.url(0)) as client:
            ids = [
                client.create_task("slow_compute", {"seconds": 0, "label": f"w{i}"})["taskId"]
                for i in range(3)
            ]
            status = collect(settings, ping_timeout=0)
            print(f"\n{render(status)}")
            assert not status.broker_problem
            assert status.snapshot.queues["mcpq"] == 3
            assert status.snapshot.queues["bulk"] == 0  # a tool's queue no one declared yet
            scrape = httpx.get(
                f"{stack.web_urls[0]}/metrics",
                headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
                timeout=10,
            )
            assert scrape.status_code == 200, scrape.text
            assert _metric(scrape.text, "mcpq_queue_depth", 'queue="mcpq"') == 3.0

            if stack.vhost is not None:
                assert stack.vhost.queues()["mcpq"] == queue_type

            stack.start_worker()
            for task_id in ids:
                client.wait_for_status(task_id, "completed", timeout=30)
            wait_until(
                lambda: collect(settings, ping_timeout=0).snapshot.queues["mcpq"] == 0,
                timeout=15,
                message="the queue drained",
            )
        if stack.vhost is not None:
            types = stack.vhost.queues()
            control = {name: kind for name, kind in types.items() if name.endswith(".pidbox")}
            assert control, f"the worker's control queue is missing: {types}"
            # Quorum queues cannot be exclusive or auto-delete: Celery's own stay classic.
            assert set(control.values()) == {"classic"}, types
            # Celery's delayed-delivery queues (declared with quorum queues; mcpq sends no ETA).
            delayed = {kind for name, kind in types.items() if name.startswith("celery_delayed_")}
            assert delayed <= {"classic"}, types
    finally:
        stack.close()
