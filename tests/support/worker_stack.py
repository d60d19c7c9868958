"""A running Celery worker's main thread (its consumer's event loop), as Celery's SIGUSR1 handler
prints every thread's stack into the worker's log: for a failure message that says where a
worker is stuck; and the two halves of the broker-loss tests around it (every slot busy, then
the loss noticed)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from mcpq.ops.harness.children import Child
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.support.stacks import LiveStack

#: Celery's worker heartbeat interval (``celery.worker.heartbeat.Heart``): a broker frozen longer
#: than this has a heartbeat waiting on it.
HEARTBEAT_S = 2.0
#: What a worker logs once per outage of its broker, and once the outage is over.
LOST, BACK = "cannot reach the broker at", "reached the broker at"


def main_thread_stack(worker: Child, frames_kept: int = 24) -> str:
    """The innermost ``frames_kept`` lines of the worker's main-thread stack (where its event loop
    is), or ``"(no stack dump)"``."""
    before = len(worker.log())
    os.kill(worker.popen.pid, signal.SIGUSR1)
    time.sleep(1.0)
    dump = worker.log()[before:]
    start = dump.find("MainThread\n")
    if start < 0:
        return "(no stack dump)"
    frames: list[str] = []
    for line in dump[start:].splitlines()[2:]:  # past the thread's name and its underline
        if line.startswith("=") or "in cry_handler" in line:  # its locals, or the dump itself
            break
        frames.append(line)
    return "\n".join(frames[-frames_kept:])


def busy_slots(stack: LiveStack, client: McpClient, slots: int) -> list[str]:
    """``slots`` tasks of a minute each, created and running: a worker of that many slots has
    every one busy (so no BRPOP of a Redis broker is in flight). Their taskIds."""
    ids = [
        client.create_task("slow_compute", {"seconds": 60, "label": f"s{i}"})["taskId"]
        for i in range(slots)
    ]
    wait_until(
        lambda: all(stack.task_hash(task_ref(t)).get("runs") == "1" for t in ids),
        timeout=20,
        message="every slot busy",
    )
    return ids


def expect_broker_loss_noticed(worker: Child, pool: str, timeout: float = 10.0) -> None:
    """The worker logs its broker's loss within ``timeout``; otherwise the test fails with
    where its event loop is stuck."""
    expect_logged(worker, LOST, pool, timeout=timeout)


def expect_logged(
    worker: Child, needle: str, pool: str, times: int = 1, timeout: float = 10.0
) -> None:
    """``needle`` is in the worker's log ``times`` times within ``timeout``; otherwise the test
    fails with where its event loop is stuck."""
    try:
        wait_until(lambda: worker.log().count(needle) >= times, timeout=timeout, interval=0.02)
    except TimeoutError:
        pytest.fail(
            f"the {pool} worker logged {needle!r} {worker.log().count(needle)} times, not"
            f" {times}, in {timeout:g} s; its event loop:\n{main_thread_stack(worker)}"
        )
