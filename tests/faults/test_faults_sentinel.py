"""Redis through Sentinel: the primary fails over, and what acknowledged writes survive it.

One primary, one replica, three sentinels (quorum 2, down after 1 s), all real processes on free
ports (``tests.support.sentinel``); web and worker get ``REDIS_URL=redis+sentinel://…``.

- SIGKILL the primary with tasks in flight: after the promotion every task completes, and the
  same web process creates and serves tasks again without a restart (the failover time as a
  client sees it is printed).
- Replication lag made deterministic (the replica SIGSTOPped until the primary drops it, tasks
  created, the primary SIGKILLed, the replica resumed and promoted): without
  ``MCPQ_REDIS_MIN_REPLICAS`` every task acknowledged during the lag is lost; with
  ``MCPQ_REDIS_MIN_REPLICAS=1`` those creates are refused (503, "not replicated") and no
  acknowledged task is lost.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient, Reply
from mcpq.ops.runtime.processes import descendant_pids, pid_alive, wait_until
from tests.faults.support import FAULT_KNOBS, FAULT_TOOLS
from tests.support.sentinel import SentinelGroup, SentinelStack

pytestmark = [pytest.mark.faults]

MakeSentinelStack = Callable[..., SentinelStack]


@pytest.fixture
def sentinel_stack(tmp_path: Path) -> Iterator[MakeSentinelStack]:
    """``sentinel_stack(webs=1, workers=1, env={...})``: a Sentinel group and a stack on it;
    both stopped afterwards, and no process may be left."""
    before = {p for p in descendant_pids(os.getpid()) if pid_alive(p)}
    made: list[tuple[SentinelGroup, SentinelStack]] = []

    def make(
        *, webs: int = 1, workers: int = 1, env: dict[str, str] | None = None
    ) -> SentinelStack:
        group = SentinelGroup(tmp_path / f"redis-{len(made)}")
        stack = SentinelStack(
            "sentinel",
            tmp_path / f"stack-{len(made)}",
            group,
            tools=FAULT_TOOLS,
            env={**FAULT_KNOBS, **(env or {})},
        )
        made.append((group, stack))
        group.start()
        stack.start(webs=webs, workers=workers, pool="io")
        return stack

    try:
        yield make
    finally:
        for group, stack in made:
            stack.close(check=False)
            group.close()
    left = sorted(p for p in descendant_pids(os.getpid()) - before if pid_alive(p))
    assert not left, f"processes left behind: {left}"


def _served(attempt: Callable[[], Reply], *also: int) -> Callable[[], Reply | None]:
    """``attempt`` until it answers 200 (or a status in ``also``); every other answer must be
    the store's 503."""

    def once() -> Reply | None:
        reply = attempt()
        if reply.status == 200 or reply.status in also:
            return reply
        assert reply.status == 503, reply
        assert reply.error["code"] == -32603, reply
        assert "Retry-After" in reply.headers, reply
        return None

    return once


@pytest.mark.timeout(180)
def test_failover_with_tasks_in_flight(sentinel_stack: MakeSentinelStack) -> None:
    stack = sentinel_stack(webs=1, workers=1)
    group = stack.group
    with McpClient(stack.url(0), timeout_s=30) as client:
        in_flight = [
            client.create_task("slow_compute", {"seconds": 2, "label": f"t{i}"})["taskId"]
            for i in range(6)
        ]
        for task_id in in_flight[:2]:
            client.wait_for_message(task_id, f"computing t{in_flight.index(task_id)}")
        group.wait_synced()
        old_primary = group.primary_port()
        killed_at = group.kill_primary()

        def create() -> Reply:
            return client.call_tool("slow_compute", {"seconds": 0, "label": "after"}, tasks=True)

        reply = wait_until(_served(create), timeout=60, interval=0.05, message="create")
        served_at = time.monotonic()
        promoted_at = group.wait_promoted()
        assert group.primary_port() != old_primary
        after_id = reply.result["taskId"]

        done = [client.wait_for_status(t, "completed", timeout=60) for t in in_flight]
        client.wait_for_status(after_id, "completed", timeout=30)
        all_done_at = time.monotonic()
    assert [task["status"] for task in done] == ["completed"] * len(in_flight)
    print(
        f"\n[Sentinel failover] primary SIGKILLed with {len(in_flight)} tasks in flight: "
        f"sentinels promoted the replica after {promoted_at - killed_at:.2f}s (as first seen), "
        f"the web tier created a task again after {served_at - killed_at:.2f}s, "
        f"every task completed {all_done_at - killed_at:.2f}s after the kill"
    )
    assert not stack.dead(), stack.dead()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("min_replicas", [0, 1])
def test_acknowledged_creates_lost_to_lag_unless_min_replicas(
    sentinel_stack: MakeSentinelStack, min_replicas: int
) -> None:
    env = {"MCPQ_REDIS_MIN_REPLICAS": str(min_replicas), "MCPQ_REDIS_REPLICA_WAIT_MS": "300"}
    stack = sentinel_stack(webs=1, workers=0, env=env)
    group = stack.group
    lagging = 20
    with McpClient(stack.url(0), timeout_s=30) as client:
        before = [client.create_task("slow_compute", {"seconds": 0})["taskId"] for _ in range(5)]
        group.wait_synced()
        dropped_s = group.freeze_replica()

        acknowledged, refused = [], []
        for _ in range(lagging):
            reply = client.call_tool("slow_compute", {"seconds": 0}, tasks=True)
            if reply.status == 200:
                acknowledged.append(reply.result["taskId"])
            else:
                assert reply.status == 503, reply
                assert reply.error == {
                    "code": -32603,
                    "message": "not replicated",
                    "data": {"requiredReplicas": 1, "replicas": 0},
                }, reply
                assert reply.headers.get("Retry-After"), reply
                refused.append(reply)

        killed_at = group.kill_primary()
        group.thaw_replica()
        promoted_at = group.wait_promoted()

        def found(task_id: str) -> bool:
            # 400: unknown (-32602), as a lost task reads.
            reply = wait_until(_served(lambda: client.get(task_id), 400), timeout=60, interval=0.1)
            if reply.status == 400:
                assert reply.error["message"] == "Failed to retrieve task: Task not found"
                return False
            return True

        lost = [task_id for task_id in acknowledged if not found(task_id)]
        kept_before = [task_id for task_id in before if found(task_id)]
        after = client.call_tool("slow_compute", {"seconds": 0}, tasks=True)
    print(
        f"\n[Sentinel lag, MCPQ_REDIS_MIN_REPLICAS={min_replicas}] replica frozen (dropped by "
        f"the primary after {dropped_s:.1f}s); {lagging} creates during the lag: "
        f"{len(acknowledged)} acknowledged, {len(refused)} refused (503 not replicated); "
        f"primary SIGKILLed, replica promoted after {promoted_at - killed_at:.2f}s; "
        f"acknowledged tasks lost: {len(lost)} of {len(acknowledged)}; "
        f"tasks created before the lag kept: {len(kept_before)} of {len(before)}"
    )
    assert kept_before == before, "what reached the replica survives the failover"
    if min_replicas == 0:
        assert len(acknowledged) == lagging, "without WAIT the primary's word is the ack"
        assert len(lost) == lagging, "and a failover loses what the replica never got"
    else:
        assert acknowledged == [], "no create is acknowledged that no replica holds"
        assert lost == []
        # The promoted replica has no replica of its own yet: creates stay refused (and say
        # why) until one is attached, rather than being acknowledged unprotected.
        assert after.status == 503 and after.error["message"] == "not replicated", after
