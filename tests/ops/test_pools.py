"""Worker pools: one queue per pool, each tool runs only in its own pool.

The session stack runs the Procfile's two worker formations, ``mcpq worker --queues mcpq`` (node
``pool-mcpq``) and ``mcpq worker --queues bulk`` (node ``pool-bulk``); ``bulk_job``
(``tests.ops.tools_pools``) declares ``queue="bulk"``, the built-in tools name no queue. Where a
run happened is read twice: the worker node Flower saw, and which worker's log has its
``run ended`` line. A backlog on ``bulk`` does not hold up ``mcpq``, and ``mcpq status`` shows
both queues and both nodes. ``python -m mcpq.ops.bench.pools`` is run small, as a smoke test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mcpq.ops.harness.stack import REPO, Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.store import task_ref
from tests.ops.ops_harness import BULK_NODE, MCPQ_NODE, Flower, OpsClient
from tests.support.benches import run_bench

pytestmark = [pytest.mark.ops, pytest.mark.timeout(120)]


def run_lines(stack: Stack, node: str) -> set[str]:
    """Task hashes of the ``run ended`` lines in one pool's log."""
    hashes = set()
    for name, text in stack.all_logs().items():
        if name.startswith(f"worker-{node}"):
            for line in text.splitlines():
                if line.startswith("{"):
                    entry = json.loads(line)
                    if entry.get("msg") == "run ended":
                        hashes.add(entry["task"])
    return hashes


def test_each_tool_runs_only_in_its_pool(
    ops_stack: Stack, client: OpsClient, flower: Flower
) -> None:
    bulk = [client.create_task("bulk_job", {"seconds": 0.1})["taskId"] for _ in range(4)]
    plain = [client.create_task("slow_compute", {"seconds": 0.1})["taskId"] for _ in range(4)]
    for task_id in bulk + plain:
        client.wait_for_status(task_id, "completed", timeout=20)

    # (Each node consumes only its pool's queue. Flower's routing_key column comes from the
    # producer's task-sent event, sent only with MCPQ_TASK_EVENTS.)
    expected = [(bulk, "bulk_job", BULK_NODE), (plain, "slow_compute", MCPQ_NODE)]
    for task_ids, tool, node in expected:
        for task_id in task_ids:
            info = flower.wait_state(task_ref(task_id), "SUCCESS", timeout=10)
            assert info["name"] == tool
            assert info["worker"].startswith(f"{node}@"), info["worker"]

    wait_until(
        lambda: {task_hash(task_ref(t)) for t in bulk} <= run_lines(ops_stack, BULK_NODE),
        timeout=5,
        message="bulk run lines",
    )
    bulk_runs, plain_runs = run_lines(ops_stack, BULK_NODE), run_lines(ops_stack, MCPQ_NODE)
    assert {task_hash(task_ref(t)) for t in bulk} <= bulk_runs
    assert not {task_hash(task_ref(t)) for t in bulk} & plain_runs
    assert {task_hash(task_ref(t)) for t in plain} <= plain_runs
    assert not {task_hash(task_ref(t)) for t in plain} & bulk_runs


def test_bulk_backlog_does_not_hold_up_the_default_pool(
    ops_stack: Stack, client: OpsClient
) -> None:
    # The bulk pool has 2 slots: fill them and queue more behind them. The backlog would take a
    # minute to drain (it is cancelled at the end): a loaded machine cannot end it before the
    # quick task and `mcpq status` below have run.
    backlog = [client.create_task("bulk_job", {"seconds": 30.0})["taskId"] for _ in range(4)]
    quick = client.create_task("slow_compute", {"seconds": 0.1})["taskId"]
    client.wait_for_status(quick, "completed", timeout=10)
    statuses = [client.task(t)["status"] for t in backlog]
    assert statuses == ["working"] * 4, statuses

    status = subprocess.run(
        [sys.executable, "-m", "mcpq", "status"],
        env=ops_stack.child_env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    depth = {
        line.split()[0]: int(line.split()[1])
        for line in status.splitlines()
        if line.endswith(" waiting")
    }
    assert depth["bulk"] >= 1, status  # two run, the rest wait on the bulk queue
    assert depth["mcpq"] == 0, status
    assert f"{MCPQ_NODE}@" in status and f"{BULK_NODE}@" in status, status
    assert "workers answering a Celery ping: 2" in status, status
    assert not any(t in status or task_ref(t) in status for t in backlog), status
    for task_id in backlog:
        assert (
            client.cancel(task_id).result["resultType"] == "complete"
        )  # leave the pool idle for the next test


def test_pool_benchmark_smoke() -> None:
    """``python -m mcpq.ops.bench.pools``, small: a second worker process adds throughput."""
    result = run_bench("pools", "--tasks", "10", "--seconds", "0.2", timeout=90)
    assert result["tasks"] == 10
    assert 0 < result["one_worker_tasks_per_s"] <= 1 / 0.2 * 1.1, result
    assert result["ratio"] > 1.3, result


def test_two_instances_of_one_formation_are_two_nodes(ops_stack: Stack) -> None:
    argv = [
        sys.executable,
        "-m",
        "mcpq.ops.cli.main",
        "worker",
        "--queues",
        "scale",
        "--concurrency",
        "1",
    ]
    instances = [
        ops_stack.spawn(
            f"worker-scale{i}", argv, ops_stack.child_env(HONCHO_PROCESS_NAME=f"worker_scale.{i}")
        )
        for i in (1, 2)
    ]

    def scale_nodes() -> set[str]:
        return {node for node in ops_stack.stats().workers if "scale" in node}

    try:
        for child in instances:
            ops_stack.wait_ready(child)
        # Each node beats every sweep interval (1 s); two instances sharing one node name would
        # only ever show one.
        nodes = wait_until(
            lambda: found if len(found := scale_nodes()) >= 2 else None,
            timeout=10,
            message="two scale nodes beating",
        )
    finally:
        for child in instances:
            ops_stack.stop_child(child)
    assert len(nodes) == 2, nodes
