"""The official TypeScript SDK (``@modelcontextprotocol/sdk``, pinned in
``tests/clients/node/package.json``) against a live stack: two web replicas, one worker.

Each test runs one scenario of ``tests/clients/node/sdk_scenarios.mjs`` (``Client`` +
``StreamableHTTPClientTransport``) in its own node process and asserts on the JSON report the
script prints: results, progress, the server's requests for input, task states and the HTTP
exchanges. A failing assertion shows that report, its HTTP log and the script's stderr.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
from tests.clients.node_clients import NodeInstall, ScenarioRun, installed_or_skip, run_sdk_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

PROTOCOL_VERSION = "2025-11-25"
TEAL = {"action": "accept", "content": {"color": "teal"}}
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "hi there"},
    "model": "test-model",
}
TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(scope="module")
def node() -> NodeInstall:
    return installed_or_skip()


def scenario(
    node: NodeInstall, url: str, name: str, timeout_s: float = 60.0, **args: Any
) -> ScenarioRun:
    """Run a scenario and require that the script ran to its end without an error."""
    ran = run_sdk_scenario(node, url, name, args, timeout_s=timeout_s)
    if not ran.ok or ran.report.get("error") is not None:
        pytest.fail(ran.describe())
    return ran


def test_initialize_and_list_tools(node: NodeInstall, stack: Stack) -> None:
    ran = scenario(node, stack.url(0), "initialize")
    report = ran.report
    assert report["protocolVersion"] == PROTOCOL_VERSION, ran.describe()
    assert report["sessionId"], ran.describe()
    capabilities = report["serverCapabilities"]
    assert "tools" in capabilities and "tasks" in capabilities, ran.describe()
    tools = {tool["name"]: tool for tool in report["tools"]}
    assert {"count_up", "ask_color", "greet"} <= tools.keys(), ran.describe()
    support = {
        name: (tool.get("execution") or {}).get("taskSupport") for name, tool in tools.items()
    }
    assert support["greet"] == "forbidden", ran.describe()
    assert support["slow_compute"] == "optional", ran.describe()
    assert support["failing_job"] == "required", ran.describe()
    assert all(support.values()), f"tools without execution.taskSupport: {support}"


@pytest.mark.parametrize("replica", [0, 1], ids=["replica-a", "replica-b"])
def test_synchronous_call(node: NodeInstall, stack: Stack, replica: int) -> None:
    ran = scenario(node, stack.url(replica), "call", tool="greet", arguments={"name": "Ada"})
    assert ran.report["text"] == "Hello, Ada!", ran.describe()
    assert ran.report["isError"] is False, ran.describe()


def test_elicitation_answered_during_a_synchronous_call(node: NodeInstall, stack: Stack) -> None:
    """The session lives on replica A; the SDK's elicitation handler answers on that session."""
    ran = scenario(node, stack.url(0), "call", tool="ask_color", elicit=TEAL)
    report = ran.report
    assert report["text"] == "colour: teal", ran.describe()
    assert len(report["elicitations"]) == 1, ran.describe()
    asked = report["elicitations"][0]
    assert asked["message"] == "Which colour?", ran.describe()
    assert "color" in asked["requestedSchema"]["properties"], ran.describe()
    assert (asked["via"] or "").startswith("tools/call"), (
        f"not on the call's stream\n{ran.describe()}"
    )


def test_sampling_answered_during_a_synchronous_call(node: NodeInstall, stack: Stack) -> None:
    ran = scenario(node, stack.url(0), "call", tool="ask_model", sample=SAMPLED)
    report = ran.report
    assert report["text"] == "model said: hi there", ran.describe()
    assert len(report["samplings"]) == 1, ran.describe()
    asked = report["samplings"][0]
    assert asked["maxTokens"] == 50, ran.describe()
    assert asked["messages"][0]["content"]["text"] == "Say hello", ran.describe()
    assert (asked["via"] or "").startswith("tools/call"), (
        f"not on the call's stream\n{ran.describe()}"
    )


def test_progress_notifications(node: NodeInstall, stack: Stack) -> None:
    arguments = {"steps": 3, "delay": 0.3}
    ran = scenario(node, stack.url(0), "call", tool="count_up", arguments=arguments, progress=True)
    report = ran.report
    assert report["text"] == "counted to 3", ran.describe()
    progress = report["progress"]
    assert len(progress) >= 2, ran.describe()
    values = [p["progress"] for p in progress]
    assert all(a < b for a, b in itertools.pairwise(values)), ran.describe()
    messages = [p["message"] for p in progress]
    assert "step 2 of 3" in messages, ran.describe()
    assert all(m is None or m.startswith("step ") for m in messages), ran.describe()


def test_forty_second_synchronous_call(node: NodeInstall, stack: Stack) -> None:
    """One POST stays open for 40 s: keep-alives every 2 s, progress every 10 s."""
    ran = scenario(
        node,
        stack.url(0),
        "call",
        timeout_s=110.0,
        tool="long_call",
        arguments={"seconds": 40, "every": 10},
        progress=True,
        timeoutMs=90_000,
        resetTimeoutOnProgress=True,
    )
    report = ran.report
    assert report["text"] == "waited 40 s", ran.describe()
    assert report["callMs"] >= 39_000, ran.describe()
    assert len(report["progress"]) >= 3, ran.describe()
    stream = report["callStream"] or {}
    assert stream.get("contentType", "").startswith("text/event-stream"), ran.describe()
    assert stream.get("comments", 0) >= 5, f"few keep-alives on the call's stream\n{ran.describe()}"


def test_aborted_call_cancels_its_run(node: NodeInstall, stack: Stack, tmp_path: Path) -> None:
    marker = tmp_path / "marked_wait.log"
    ran = scenario(
        node,
        stack.url(0),
        "abort",
        tool="marked_wait",
        arguments={"path": str(marker), "seconds": 60},
        markerPath=str(marker),
        waitCancelledMs=5000,
    )
    report = ran.report
    assert report["started"] is True, ran.describe()
    assert report["call"]["settled"] == "rejected", ran.describe()
    notification = report["cancelNotification"]
    assert notification is not None, f"the SDK sent no notifications/cancelled\n{ran.describe()}"
    assert 200 <= (notification["status"] or 0) < 300, ran.describe()
    deadline = time.monotonic() + 5.0  # the script already waited; allow a little more
    lines = marker.read_text().splitlines()
    while "cancelled" not in lines and time.monotonic() < deadline:
        time.sleep(0.1)
        lines = marker.read_text().splitlines()
    assert lines[:1] == ["started"], ran.describe()
    assert "cancelled" in lines, f"marker says {lines}\n{ran.describe()}"
    assert "finished" not in lines, ran.describe()
    assert report["cancelledSeen"] is True, (
        f"cancelled only after the session closed\n{ran.describe()}"
    )


def test_experimental_tasks_api(node: NodeInstall, stack: Stack) -> None:
    ran = scenario(node, stack.url(0), "tasks", timeout_s=120.0, elicit=TEAL, computeSeconds=1)
    report, describe = ran.report, ran.describe()
    steps = report["steps"]
    for name in ("listTools", "stream", "poll", "input", "list", "cancel"):
        assert steps[name]["ok"] and "error" not in steps[name], f"step {name}\n{describe}"
    # The SDK sends params.task only for tools it knows as task tools (tools/list + capability).
    assert steps["listTools"]["isToolTask"]["slow_compute"] is True, describe
    calls = report["toolCallsSent"]
    assert calls and all(c["taskParam"] is not None for c in calls), describe

    stream = steps["stream"]["messages"]
    kinds = [m["type"] for m in stream]
    assert kinds[:1] == ["taskCreated"] and kinds[-1:] == ["result"], describe
    assert stream[-1]["text"] == "streamed: computed in 1s", describe
    assert stream[0]["task"]["status"] in {"working", "submitted"}, describe

    poll = steps["poll"]
    assert poll["statuses"][-1] == "completed", describe
    assert poll["text"] == "polled: computed in 1s", describe

    asked = steps["input"]
    kinds = [m["type"] for m in asked["messages"]]
    assert kinds[:1] == ["taskCreated"] and kinds[-1:] == ["result"], describe
    assert asked["messages"][-1]["text"] == "colour: teal", describe
    assert len(asked["elicitations"]) == 1, describe
    elicitation = asked["elicitations"][0]
    assert (elicitation["via"] or "").startswith("tasks/result"), describe
    related = (elicitation["meta"] or {}).get("io.modelcontextprotocol/related-task") or {}
    assert related.get("taskId") == asked["taskId"], describe

    created = {steps[name]["taskId"] for name in ("stream", "poll", "input", "cancel")}
    listed = {task["taskId"] for task in steps["list"]["tasks"]}
    assert created - {steps["cancel"]["taskId"]} <= listed, describe

    cancel = steps["cancel"]
    assert cancel["cancelResult"]["status"] == "cancelled", describe
    assert cancel["after"]["status"] == "cancelled", describe
    assert {"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"} <= set(
        report["taskMethodsSent"]
    ), describe
    listed_statuses = {t["status"] for t in steps["list"]["tasks"] if t["taskId"] in created}
    assert listed_statuses <= TERMINAL, describe
