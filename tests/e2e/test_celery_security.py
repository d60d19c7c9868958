"""Workers accept JSON only: a pickled Celery message is refused, never unpickled.

Whoever can write to the broker must not get code run in a worker. The test publishes, straight
through kombu, a well-formed Celery (protocol 2) message for the ``greet`` task on the worker's
queue, serialized with pickle. Its argument is an object whose ``__reduce__`` creates a marker
directory: if the worker ever unpickled the body, the directory would exist.
"""

from __future__ import annotations

import os
import pickle
import uuid
from pathlib import Path

import pytest
from kombu import Connection, Exchange, Producer, Queue

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


class MakesMarker:
    """Unpickling this calls ``os.mkdir(path)``."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.mkdir, (self.path,))


def test_worker_refuses_a_pickled_message(stack: Stack, client: McpClient, tmp_path: Path) -> None:
    # The payload is live: unpickling it here does create a directory.
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(MakesMarker(control)))  # unpickling untrusted data is the point
    assert control.is_dir()

    marker = tmp_path / "worker-unpickled-it"
    job_id = uuid.uuid4().hex
    headers = {
        "lang": "py",
        "task": "greet",
        "id": job_id,
        "root_id": job_id,
        "parent_id": None,
        "group": None,
        "retries": 0,
        "eta": None,
        "expires": None,
        "timelimit": [None, None],
        "argsrepr": "(<payload>,)",
        "kwargsrepr": "{}",
        "origin": "e2e-pickle-test",
        "ignore_result": True,
    }
    body: tuple[list[MakesMarker], dict[str, object], dict[str, None]] = (
        [MakesMarker(marker)],
        {},
        {"callbacks": None, "errbacks": None, "chain": None},
    )
    queue = Queue("mcpq", Exchange("mcpq", type="direct"), routing_key="mcpq")
    with Connection(stack.redis_url) as connection:
        producer = Producer(connection, serializer="pickle")
        producer.publish(
            body, exchange=queue.exchange, routing_key="mcpq", declare=[queue], headers=headers
        )

    line = wait_until(
        lambda: next(
            (
                ln
                for ln in stack.worker.log().splitlines()
                if "ContentDisallowed" in ln or "Refusing to deserialize" in ln
            ),
            None,
        ),
        timeout=10,
        message="the worker refusing the pickled message",
    )
    print(f"\nworker: {line.strip()[:400]}")
    assert "pickle" in line
    assert not marker.exists(), "the worker unpickled the message"
    assert stack.worker.alive

    # The worker is still serving JSON messages, and still has not unpickled anything.
    assert text_of(client.call_tool("greet", {"name": "after"}).result) == "Hello, after!"
    assert not marker.exists()
