"""Flower shows tool runs by tool name, with MCP states, and nothing secret.

Each tool is a Celery task named after the tool; its Celery id and only argument is the storage
ref (``sha256(taskId)[:32]``), so Flower's API lists runs under the tool's name, moving through
RECEIVED/STARTED to SUCCESS, with the custom ``INPUT_REQUIRED`` state (a ``task-input_required``
event) while the tool waits for the client, and never the ``taskId`` or the tool's arguments.
"""

from __future__ import annotations

import json
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcpq.ops.harness.mcp_client import text_of
from mcpq.ops.harness.stack import REPO, Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import task_ref
from tests.ops.ops_harness import ISSUED, MCPQ_NODE, Flower, OpsClient, run_ended

pytestmark = [pytest.mark.ops, pytest.mark.timeout(120)]

SECRET_LABEL = "label-only-the-client-knows-7f3a"


def test_run_listed_under_tool_name_moving_to_success(client: OpsClient, flower: Flower) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 1.0, "label": SECRET_LABEL})["taskId"]
    ref = task_ref(task_id)

    seen: list[str] = []
    running = flower.wait_state(ref, "STARTED", timeout=15, seen=seen)
    assert running["name"] == "slow_compute"
    assert running["worker"].startswith(f"{MCPQ_NODE}@")
    done = client.wait_for_status(task_id, "completed", timeout=15)
    assert text_of(done["result"]) == f"{SECRET_LABEL}: computed in 1s"

    info = flower.wait_state(ref, "SUCCESS", timeout=15, seen=seen)
    assert seen[-1] == "SUCCESS" and "STARTED" in seen, seen
    assert info["name"] == "slow_compute"
    assert info["received"] <= info["started"] <= info["succeeded"], info
    assert info["result"] == repr("completed")
    listed = flower.tasks(taskname="slow_compute")
    assert ref in listed and listed[ref]["state"] == "SUCCESS"


def test_input_waiting_run_shows_input_required(client: OpsClient, flower: Flower) -> None:
    task_id = client.create_task("confirm_delete", {"filename": "payroll.xlsx"})["taskId"]
    ref = task_ref(task_id)
    task = client.wait_for_status(task_id, "input_required", timeout=15)

    waiting = flower.wait_state(ref, "INPUT_REQUIRED", timeout=10)
    assert waiting["name"] == "confirm_delete"
    assert waiting["succeeded"] is None

    ((key, _request),) = task["inputRequests"].items()
    assert (
        client.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}}).result[
            "resultType"
        ]
        == "complete"
    )
    client.wait_for_status(task_id, "completed", timeout=15)
    assert flower.wait_state(ref, "SUCCESS", timeout=10)["name"] == "confirm_delete"


def test_flower_shows_the_ref_only_never_the_task_id_or_arguments(
    client: OpsClient, flower: Flower
) -> None:
    arguments = {"seconds": 0.1, "label": SECRET_LABEL}
    task_id = client.create_task("slow_compute", arguments)["taskId"]
    ref = task_ref(task_id)
    client.wait_for_status(task_id, "completed", timeout=15)
    info = flower.wait_state(ref, "SUCCESS", timeout=10)

    assert info["args"] == repr([ref])  # the message carries the storage ref, nothing else
    assert info["kwargs"] == "{}"
    everything = json.dumps(flower.tasks())  # every run Flower knows of, every field
    assert SECRET_LABEL not in everything
    leaked = [tid for tid in ISSUED if tid in everything]
    assert not leaked, "a taskId (a bearer token) reached Flower"


def test_flower_metrics_the_dashboard_reads(client: OpsClient, flower: Flower) -> None:
    """The Grafana dashboard's flower_* series exist on Flower's /metrics (Prometheus)."""
    task_id = client.create_task("confirm_delete", {"filename": "metrics.txt"})["taskId"]
    client.wait_for_status(task_id, "input_required", timeout=15)
    flower.wait_state(task_ref(task_id), "INPUT_REQUIRED", timeout=10)
    assert client.cancel(task_id).result["resultType"] == "complete"
    dashboard = json.loads((REPO / "ops" / "grafana" / "mcpq.json").read_text())
    exprs = [t.get("expr", "") for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\bflower_[a-z_]+", expr)}
    assert used

    def served_all() -> bool:  # per-worker gauges appear with the workers' heartbeats (2 s)
        response = flower.http.get("/metrics")
        assert response.status_code == 200
        families = text_string_to_metric_families(response.text)
        return used <= {sample.name for family in families for sample in family.samples}

    wait_until(served_all, timeout=10, interval=0.5, message=f"{sorted(used)} on Flower")
    response = flower.http.get("/metrics")
    assert "task-input_required" in response.text  # custom MCP state events are counted


def test_cancelled_run_ends_cancelled_in_flower(
    ops_stack: Stack, client: OpsClient, flower: Flower
) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 30, "label": "to-cancel"})["taskId"]
    ref = task_ref(task_id)
    flower.wait_state(ref, "STARTED", timeout=15)
    assert client.cancel(task_id).result["resultType"] == "complete"
    client.wait_for_status(task_id, "cancelled", timeout=5)
    wait_until(lambda: run_ended(ops_stack, task_id, "cancelled"), timeout=10)
    flower.wait_state(ref, "CANCELLED", "SUCCESS", timeout=10)
    with pytest.raises(TimeoutError):  # the run is over: no later event may turn it SUCCESS
        flower.wait_state(ref, "SUCCESS", timeout=3)
    info = flower.task(ref)
    assert info is not None and info["state"] == "CANCELLED", info
