"""Key hygiene: after a mixed run, every ``{mcpq}:*`` key expires, except the documented globals.

The run covers every outcome and every per-task key kind: completed, tool error, failed,
cancelled while running and while waiting for input, answered in place and answered after
parking, a memoized step, and synchronous calls (hidden tasks). The documented global keys
(``shared/keys.py``) are the only ones allowed to live without a TTL; every index must also be
empty of the finished tasks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.faults.support import ACCEPT, KEYS, MakeStack, TaskWatch, open_gauges

pytestmark = [pytest.mark.faults, pytest.mark.timeout(60)]

GLOBAL_KEYS = {
    KEYS.leases,
    KEYS.unclaimed,
    KEYS.active,
    KEYS.expiry,
    KEYS.stats,
    KEYS.workers,
    KEYS.lock("sweeper"),
    KEYS.listings,  # the deployment's listings' digests: three fields, for as long as it runs
}
INDEXES = (KEYS.leases, KEYS.unclaimed, KEYS.active, KEYS.expiry)


def test_every_task_key_expires(make_stack: MakeStack, tmp_path: Path) -> None:
    stack = make_stack(workers=1, env={"MCPQ_INPUT_HOLD_S": "0.5"})
    calls = tmp_path / "calls.txt"
    with McpClient(stack.url(0)) as client:
        watch = TaskWatch(client)

        def task(tool: str, **args: object) -> str:
            task_id = str(client.create_task(tool, dict(args))["taskId"])
            watch.add([task_id])
            return task_id

        task("slow_compute", seconds=0, label="ok")
        task("failing_job")
        task("protocol_error_job")
        task("step_then_sleep", path=str(tmp_path / "effect.txt"), seconds=0.2)
        running = task("slow_compute", seconds=30, label="cancel-me")
        waiting = task("ask_once", calls=str(calls), label="cancel-me")
        hot = task("ask_once", calls=str(calls), label="hot")
        parked = task("ask_once", calls=str(calls), label="parked")

        watch.wait_all("input_required", timeout=15, task_ids=[waiting, hot, parked])
        (hot_key,) = watch.keys[hot]
        assert client.update(hot, {hot_key: ACCEPT}).status == 200  # the run still holds it
        assert client.cancel(waiting).status == 200
        wait_until(lambda: client.task(running).get("statusMessage"), timeout=10)
        assert client.cancel(running).status == 200
        wait_until(
            lambda: stack.task_hash(task_ref(parked)).get("parked") == "1",
            timeout=15,
            message="parked",
        )
        (parked_key,) = watch.keys[parked]
        assert client.update(parked, {parked_key: ACCEPT}).status == 200

        # Synchronous calls: hidden tasks with their own short TTL.
        for reply in (
            client.call_tool("greet", {"name": "keys"}, tasks=False),
            client.call_tool("slow_compute", {"seconds": 0, "label": "sync"}, tasks=False),
        ):
            assert reply.status == 200 and reply.result["resultType"] == "complete", reply

        watch.wait_all("completed", "failed", "cancelled", timeout=30)
        outcomes = sorted(watch.statuses().values())
        assert outcomes.count("cancelled") == 2 and "failed" in outcomes

    def leases_settled() -> bool:
        with stack.redis_client() as r:
            return all(r.zcard(index) == 0 for index in INDEXES)

    wait_until(leases_settled, timeout=10, message="the indexes hold no finished task")
    assert set(open_gauges(stack).values()) == {0}, open_gauges(stack)
    with stack.redis_client() as r:
        keys = sorted(r.scan_iter(match=KEYS.pattern, count=1000))
        no_ttl = [k for k in keys if k not in GLOBAL_KEYS and r.pttl(k) < 0]
        kinds = sorted({_kind(k) for k in keys})
        print(f"\n[key hygiene] {len(keys)} keys; kinds: {kinds}")
        assert not no_ttl, f"keys without a TTL: {no_ttl}"
        too_long = [k for k in keys if k not in GLOBAL_KEYS and r.pttl(k) > 3_600_000]
        assert not too_long, f"keys outliving the task TTL (1 h): {too_long}"


def _kind(key: str) -> str:
    """``task``, ``task:in``, ``task:steps``... for per-task keys; the key itself otherwise."""
    if not key.startswith(KEYS.task_prefix):
        return key
    parts = key[len(KEYS.task_prefix) :].split(":")
    return ":".join(["task", *parts[1:]])
