"""The official TypeScript SDK (``@modelcontextprotocol/sdk``, pinned in
``tests/clients/node/package.json``) against a live stack: two web replicas, one worker.

Each test runs one scenario of ``tests/clients/node/sdk_scenarios.mjs`` (``Client`` +
``StreamableHTTPClientTransport``) in its own node process and asserts on the JSON report the
script prints: results, progress, the server's requests for input, task states and the HTTP
exchanges. A failing assertion shows that report, its HTTP log and the script's stderr.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
from mcpq.shared.store.announce import announce_updated
from tests.clients import resources_fixture as fixture
from tests.clients.announcer import Announcer
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


# -- resources, prompts, completion, log levels (tests.clients.resources_fixture) -----------------
def blob_of(contents: dict[str, Any]) -> bytes:
    assert "text" not in contents, contents
    return base64.b64decode(contents["blob"])


def test_resources_listed_and_read_text_binary_and_templates(
    node: NodeInstall, stack: Stack
) -> None:
    reads = [fixture.NOTES_URI, fixture.PIXEL_URI, fixture.BYTES_URI, "fixture://colors/teal"]
    reads.append("fixture://orders/17/lines/2")
    refused = ["fixture://nothing", "fixture://orders/abc/lines/2", "fixture://colors/%2e%2e"]
    ran = scenario(node, stack.url(0), "resources", read=reads, refused=refused)
    report, describe = ran.report, ran.describe()
    assert report["protocolVersion"] == PROTOCOL_VERSION, describe
    assert {"resources", "prompts", "completions", "logging"} <= report["serverCapabilities"].keys()
    listed = {r["uri"]: r for r in report["resources"]}
    assert listed[fixture.NOTES_URI] == {
        "uri": fixture.NOTES_URI,
        "name": "release_notes",
        "title": "Release notes",
        "description": "The release notes (a text resource).",
        "mimeType": "text/markdown",
    }, describe
    assert listed[fixture.PIXEL_URI]["mimeType"] == "image/png", describe
    assert "mimeType" not in listed[fixture.BYTES_URI], describe
    templates = {t["uriTemplate"]: t for t in report["resourceTemplates"]}
    assert {fixture.COLORS_TEMPLATE, fixture.LINES_TEMPLATE} <= templates.keys(), describe
    assert templates[fixture.COLORS_TEMPLATE]["name"] == "color", describe

    got = report["reads"]
    assert got[fixture.NOTES_URI] == [
        {"uri": fixture.NOTES_URI, "mimeType": "text/markdown", "text": fixture.NOTES}
    ], describe
    (png,) = got[fixture.PIXEL_URI]
    assert (png["uri"], png["mimeType"], blob_of(png)) == (
        fixture.PIXEL_URI,
        "image/png",
        fixture.PIXEL,
    ), describe
    (raw,) = got[fixture.BYTES_URI]
    assert raw["mimeType"] == "application/octet-stream", describe
    assert blob_of(raw) == fixture.ALL_BYTES, describe
    (teal,) = got["fixture://colors/teal"]
    assert teal["mimeType"] == "application/json", describe
    assert json.loads(teal["text"]) == {"name": "teal", "hex": "#008080"}, describe
    (line,) = got["fixture://orders/17/lines/2"]
    assert line["text"] == "order 17, line 2", describe

    errors = {uri: answer.get("error") or {} for uri, answer in report["refused"].items()}
    assert all(a["settled"] == "rejected" for a in report["refused"].values()), describe
    assert {uri: e.get("code") for uri, e in errors.items()} == dict.fromkeys(refused, -32602)
    assert errors["fixture://nothing"].get("data") == {"uri": "fixture://nothing"}, describe
    assert "order_id" in errors["fixture://orders/abc/lines/2"]["message"], describe


#: The resource the subscription test subscribes to: no other client test subscribes to it, so
#: its subscriber count is the test's own session or nothing.
SUBSCRIBED_URI = "fixture://colors/tomato"
ANNOUNCE_EVERY_S = 0.3


def test_subscribed_resource_update_announced_by_another_process(
    node: NodeInstall, stack: Stack, tmp_path: Path
) -> None:
    """The session lives on replica B; the update is announced by the test process, which
    shares nothing with B but Redis: ``resources/subscribe`` recorded the session there, the
    announcement publishes on the session's channel, B's GET stream hears it. After
    ``resources/unsubscribe`` an announcement tells nobody: the session ending would not show
    that (its entry in the resource's subscriber index outlives it until its TTL)."""
    marker = tmp_path / "subscribe.log"
    refused = "fixture://nothing/here"
    announcer = Announcer(
        stack, SUBSCRIBED_URI, marker, until="unsubscribed", every_s=ANNOUNCE_EVERY_S
    )
    announcer.start()
    try:
        ran = scenario(
            node,
            stack.url(1),
            "subscribe",
            uri=SUBSCRIBED_URI,
            markerPath=str(marker),
            waitMs=20_000,
            refusedUri=refused,
        )
    finally:
        announcer.stop.set()
        announcer.join(timeout=10)
    report, describe = ran.report, ran.describe()
    assert not announcer.is_alive(), describe
    assert announcer.error is None, f"announcing failed: {announcer}\n{describe}"
    assert report["protocolVersion"] == PROTOCOL_VERSION, describe
    assert report["serverCapabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    assert report["subscribed"] == {"settled": "resolved", "result": {}}, describe
    assert report["heard"] is True, (
        f"no update after {len(announcer.told)} announcements\n{describe}"
    )
    first = report["updated"][0]
    assert first["uri"] == SUBSCRIBED_URI, describe
    assert first["via"] == "GET (standalone)", f"not on the GET stream\n{describe}"
    # Delivered as the notification the SDK knows, not to the fallback handler.
    methods = [n["method"] for n in report["notifications"]]
    assert "notifications/resources/updated" not in methods, describe
    told = announcer.told
    assert told[:1] == [1], f"the session was not the one subscriber: {told}\n{describe}"
    assert report["unsubscribed"] == {"settled": "resolved", "result": {}}, describe
    assert report["transportErrors"] == [] and report["unhandled"] == [], describe
    assert marker.read_text().splitlines() == ["subscribed", "unsubscribed"], describe
    assert announce_updated(SUBSCRIBED_URI, stack.store()) == 0, describe

    answer = report["refused"]
    assert answer["settled"] == "rejected", describe
    assert answer["error"].get("code") == -32602, describe
    assert answer["error"].get("data") == {"uri": refused}, describe


def test_prompts_listed_got_with_arguments_and_completed(node: NodeInstall, stack: Stack) -> None:
    review = {"type": "ref/prompt", "name": "code_review"}
    colors = {"type": "ref/resource", "uri": fixture.COLORS_TEMPLATE}
    ran = scenario(
        node,
        stack.url(1),
        "prompts",
        get=[
            {"name": "code_review", "arguments": {"code": "x = 1", "language": "go"}},
            {"name": "incident_brief", "arguments": {"service": "api", "minutes": "15"}},
        ],
        complete=[
            {"ref": review, "argument": {"name": "language", "value": "p"}},
            {
                "ref": review,
                "argument": {"name": "style", "value": ""},
                "context": {"arguments": {"language": "python"}},
            },
            {"ref": colors, "argument": {"name": "name", "value": "t"}},
            {"ref": review, "argument": {"name": "code", "value": ""}},
        ],
        refused=[
            {"name": "incident_brief", "arguments": {"service": "api", "minutes": "soon"}},
            {"name": "code_review", "arguments": {}},
            {"name": "no_such_prompt", "arguments": {}},
        ],
    )
    report, describe = ran.report, ran.describe()
    prompts = {p["name"]: p for p in report["prompts"]}
    assert prompts["code_review"] == {
        "name": "code_review",
        "title": "Code review",
        "description": "Asks for a review of a piece of code.",
        "arguments": [
            {"name": "code", "required": True, "description": "The code to review"},
            {"name": "language", "required": False},
            {"name": "style", "required": False},
        ],
    }, describe
    assert [a["name"] for a in prompts["incident_brief"]["arguments"]] == ["service", "minutes"]

    review_got, incident_got = report["got"]
    assert review_got["description"] == "Asks for a review of a piece of code.", describe
    assert review_got["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Review this go code (plain style):\n\nx = 1"},
        }
    ], describe
    shapes = [(m["role"], m["content"]["type"]) for m in incident_got["messages"]]
    assert shapes == [
        ("user", "text"),
        ("assistant", "text"),
        ("user", "resource"),
        ("user", "image"),
    ], describe
    assert incident_got["messages"][1]["content"]["text"].endswith("(900 s of downtime)."), describe
    embedded = incident_got["messages"][2]["content"]["resource"]
    assert embedded == {
        "uri": fixture.NOTES_URI,
        "mimeType": "text/markdown",
        "text": fixture.NOTES,
    }, describe
    image = incident_got["messages"][3]["content"]
    assert base64.b64decode(image["data"]) == fixture.PIXEL, describe

    languages, styles, names, nothing = report["completions"]
    assert languages == {"values": ["python", "perl", "php"], "total": 3, "hasMore": False}
    assert styles["values"] == ["pep8", "typed"], describe
    assert names["values"] == ["tan", "teal", "tomato"], describe
    assert nothing["values"] == [], describe

    refused = report["refused"]
    assert [r["settled"] for r in refused] == ["rejected"] * 3, describe
    assert [r["error"].get("code") for r in refused] == [-32602] * 3, describe
    assert "minutes" in refused[0]["error"]["message"], describe
    assert "code" in refused[1]["error"]["message"], describe


def test_log_level_set_and_a_tools_log_messages_on_its_call(
    node: NodeInstall, stack: Stack
) -> None:
    """``logging/setLevel`` (warning), then a synchronous call of a tool that logs at four
    levels: the warning and the error arrive, on the call's own stream, before its result."""
    ran = scenario(
        node,
        stack.url(0),
        "idiom",
        tool="log_levels",
        arguments={"label": "ts"},
        setLevel="warning",
    )
    report, describe = ran.report, ran.describe()
    assert report["text"] == "logged 4 messages (ts)", describe
    logs = [[entry["level"], entry["logger"], entry["data"]] for entry in report["logs"]]
    assert logs == [
        ["warning", None, {"label": "ts", "level": "warning"}],
        ["error", "clients.fixture", "ts: error"],
    ], describe
    assert all((entry["via"] or "").startswith("tools/call") for entry in report["logs"]), describe
    set_level = [e for e in report["http"] if (e.get("sent") or "").startswith("logging/setLevel")]
    assert [e["status"] for e in set_level] == [200], describe
    events = [e["msg"] for e in report["callStream"]["events"]]
    assert events[-1].startswith("result#"), describe
    assert events.count("notifications/message") == 2, describe
