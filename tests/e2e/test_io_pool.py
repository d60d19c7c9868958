"""The io pool (``mcpq worker``'s default: Celery's threads pool): tools that wait hold a
thread, not a process; ``async def`` tools run natively; cancel reaches a run within 1 s; a run
that ignores its cancel is abandoned after the grace and its slot serves the next run, while the
process and its other runs go on.

Real processes: a private Redis, ``mcpq web``, ``mcpq worker`` (io) as the Procfile runs it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.protocol import PROTOCOL_VERSION
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.support.stacks import LiveStack

TOOLS = f"{DEFAULT_TOOLS},tests.e2e.tools_fixture"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = LiveStack("io", tmp_path_factory.mktemp("io-stack"), tools=TOOLS)
    running.start_redis()
    running.start_web()
    # As the Procfile's `worker` runs it: the io pool at its default concurrency.
    running.wait_ready(running.spawn_pool("mcpq", "io", concurrency=None))
    yield running
    running.close()


@pytest.fixture(scope="module")
def solo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """An io worker with ONE slot: a run that is not let go of blocks every later one."""
    running = LiveStack("solo", tmp_path_factory.mktemp("solo-stack"), tools=TOOLS)
    running.start_redis()
    running.start_web()
    running.wait_ready(running.spawn_pool("mcpq", "solo", concurrency=1))
    yield running
    running.close()


def running(stack: Stack, task_id: str) -> None:
    ref = task_ref(task_id)
    wait_until(
        lambda: (r := stack.store().record(ref)) is not None and r.runs >= 1,
        timeout=15,
        interval=0.02,
        message="the run to start",
    )


def run_ended(stack: Stack, task_id: str, transition: str, timeout: float = 10) -> float:
    """When the worker logged the end of the task's run with ``transition``."""
    needle = f'"task":"{task_hash(task_ref(task_id))}"'

    def ended() -> bool:
        return any(
            needle in line and f'"transition":"{transition}"' in line
            for line in stack.workers[-1].log().splitlines()
        )

    wait_until(ended, timeout=timeout, interval=0.02, message=f"run ended {transition}")
    return time.monotonic()


def test_abandoned_waiting_tools_do_not_delay_a_short_one(stack: Stack) -> None:
    with McpClient(stack.url()) as client:
        long = [client.create_task("slow_compute", {"seconds": 30})["taskId"] for _ in range(4)]
        for task_id in long:
            running(stack, task_id)
        started = time.monotonic()
        short = client.create_task("slow_compute", {"seconds": 0.3})["taskId"]
        done = client.wait_for_status(short, "completed", timeout=10, interval=0.02)
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, f"the 0.3 s tool took {elapsed:.2f} s beside four 30 s ones"
        assert "computed in 0.3s" in text_of(done["result"])
        for task_id in long:  # a cancel reaches each waiting run within 1 s
            sent = time.monotonic()
            client.cancel(task_id)
            assert run_ended(stack, task_id, "cancelled") - sent < 1.0


def test_an_async_tool_runs_natively_and_cancel_reaches_it_where_it_awaits(stack: Stack) -> None:
    with McpClient(stack.url()) as client:
        quick = client.create_task("async_wait", {"seconds": 0.2})["taskId"]
        assert client.wait_for_status(quick, "completed", timeout=10)["status"] == "completed"
        reporting = client.create_task("async_report", {"seconds": 0.2})["taskId"]
        assert "reported" in text_of(
            client.wait_for_status(reporting, "completed", timeout=10)["result"]
        )
        waiting = client.create_task("async_wait", {"seconds": 60})["taskId"]
        running(stack, waiting)
        sent = time.monotonic()
        client.cancel(waiting)
        # The lease keeper sees the cancel at its next renewal (every lease/3 ≤ 1 s here) and
        # cancels the asyncio task at once.
        assert run_ended(stack, waiting, "cancelled") - sent < 1.5
        assert client.task(waiting)["status"] == "cancelled"


@pytest.mark.parametrize("tool", ["stubborn_sleep", "blocked_in_c"])
def test_a_run_deaf_to_cancel_is_let_go_after_the_grace_and_its_slot_serves_again(
    solo: Stack, tool: str
) -> None:
    worker = solo.workers[-1]
    with McpClient(solo.url()) as client:
        deaf = client.create_task(tool, {"seconds": 60})["taskId"]
        running(solo, deaf)
        sent = time.monotonic()
        client.cancel(deaf)
        assert client.task(deaf)["status"] == "cancelled"
        # The only slot is free again after the grace (MCPQ_CANCEL_GRACE_S=1 in tests).
        after = client.create_task("slow_compute", {"seconds": 0.1})["taskId"]
        client.wait_for_status(after, "completed", timeout=15, interval=0.02)
        assert time.monotonic() - sent < 5.0
        assert run_ended(solo, deaf, "abandoned") - sent < 3.0
    assert worker.popen.poll() is None  # the process was not killed


def test_hundreds_of_waiting_synchronous_calls_hold_few_redis_connections(stack: Stack) -> None:
    """300 synchronous calls wait at once on one web process (one gunicorn worker): none gets
    503, and Redis sees far fewer connections than waiting calls (their waits share one)."""
    probe = redis.Redis.from_url(stack.redis_url)
    peak = 0

    async def call(client: httpx.AsyncClient, i: int) -> int:
        body = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {
                "name": "slow_compute",
                "arguments": {"seconds": 1.5},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {
            "Accept": "application/json",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "slow_compute",
        }
        reply = await client.post(stack.url(), json=body, headers=headers)
        return reply.status_code

    async def scenario() -> list[int]:
        nonlocal peak
        limits = httpx.Limits(max_connections=400)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            calls = asyncio.gather(*(call(client, i) for i in range(300)))
            while not calls.done():
                peak = max(peak, int(probe.info("clients")["connected_clients"]))
                await asyncio.sleep(0.1)
            return await calls

    statuses = asyncio.run(scenario())
    assert statuses.count(200) == 300, {s: statuses.count(s) for s in set(statuses)}
    assert peak < 200, f"{peak} Redis connections for 300 waiting calls"
