"""The official MCP Python SDK 1.30.0 (2025-11-25 wire) against the client stack.

The SDK lives in its own venv (``tests/clients/py_clients.py``); each test runs one scenario of
``tests/clients/py/mcp1_scenarios.py`` and asserts what the client observed. On a failure the
message carries the script's report (including every HTTP exchange it made and the bodies of
error answers) and its stdout/stderr.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
from mcpq.shared.store.announce import announce_updated
from tests.clients import resources_fixture as fixture
from tests.clients.announcer import Announcer
from tests.clients.py_clients import ScenarioRun, ensure_installed, run_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]

CLIENT = "mcp1"


@pytest.fixture(scope="module")
def sdk_python() -> Path:
    """The venv's python (installed on first use; an install failure fails, never skips)."""
    return ensure_installed(CLIENT)


def run(stack: Stack, scenario: str, args: dict[str, Any] | None = None, **kw: Any) -> ScenarioRun:
    replica = kw.pop("replica", 0)
    return run_scenario(CLIENT, stack.url(replica), scenario, args, **kw)


def call(stack: Stack, tool: str, arguments: dict[str, Any], **kw: Any) -> ScenarioRun:
    args = {"tool": tool, "arguments": arguments, **kw.pop("args", {})}
    done = run(stack, "call", args, **kw)
    assert done.ok, done.describe()
    return done


def result_text(done: ScenarioRun) -> str:
    result = done.observed.get("result") or {}
    assert not result.get("is_error"), done.describe()
    return str(result.get("text"))


def read_lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_sdk_version(sdk_python: Path) -> None:
    probe = "import importlib.metadata as m; print(m.version('mcp'))"
    done = subprocess.run([str(sdk_python), "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "1.30.0", done.stderr


def test_initialize_negotiates_2025_11_25(stack: Stack, sdk_python: Path) -> None:
    done = run(stack, "initialize")
    assert done.ok, done.describe()
    seen = done.observed
    assert seen["protocol_version"] == "2025-11-25", done.describe()
    assert seen["session_id_present"], done.describe()
    capabilities = seen["capabilities"]
    assert "tools" in capabilities, done.describe()
    assert "tasks" in capabilities, done.describe()
    # SEP-1686: task-augmented tools/call is announced as tasks.requests.tools.call
    assert "call" in capabilities["tasks"].get("requests", {}).get("tools", {}), done.describe()
    tools = seen["tools"]
    assert {"count_up", "ask_color", "greet", "slow_compute", "failing_job"} <= set(tools)
    assert tools["greet"]["taskSupport"] == "forbidden", done.describe()
    assert tools["slow_compute"]["taskSupport"] == "optional", done.describe()
    assert tools["failing_job"]["taskSupport"] == "required", done.describe()
    # After notifications/initialized the SDK opens a GET SSE stream: an event stream or 405.
    gets = [e for e in done.data["wire"] if e["http"] == "GET"]
    assert gets and all(e.get("status") in (200, 405) for e in gets), done.describe()


def test_greet(stack: Stack, sdk_python: Path) -> None:
    done = call(stack, "greet", {"name": "Ada"})
    assert result_text(done) == "Hello, Ada!", done.describe()


def test_elicitation_during_a_synchronous_call(stack: Stack, sdk_python: Path) -> None:
    done = call(stack, "ask_color", {})
    assert result_text(done) == "colour: teal", done.describe()
    [asked] = done.observed["elicitations"]
    assert asked["params"]["message"] == "Which colour?", done.describe()
    assert "color" in asked["params"]["requestedSchema"]["properties"], done.describe()


def test_sampling_during_a_synchronous_call(stack: Stack, sdk_python: Path) -> None:
    done = call(stack, "ask_model", {})
    assert result_text(done) == "model said: hi there", done.describe()
    [asked] = done.observed["samplings"]
    assert asked["params"]["messages"][0]["content"]["text"] == "Say hello", done.describe()


def test_progress_notifications(stack: Stack, sdk_python: Path) -> None:
    done = call(stack, "count_up", {"steps": 3, "delay": 0.3})
    assert result_text(done) == "counted to 3", done.describe()
    progress = done.observed["progress"]
    assert len(progress) >= 2, done.describe()
    values = [p["progress"] for p in progress]
    assert all(a < b for a, b in itertools.pairwise(values)), done.describe()
    messages = [p["msg"] for p in progress]
    assert all(re.fullmatch(r"step [123] of 3", str(m)) for m in messages), done.describe()
    assert "step 2 of 3" in messages, done.describe()


def test_forty_second_synchronous_call(stack: Stack, sdk_python: Path) -> None:
    done = call(
        stack,
        "long_call",
        {"seconds": 40, "every": 10},
        args={"call_timeout_s": 90, "deadline_s": 110},
        timeout=130,
    )
    assert result_text(done) == "waited 40 s", done.describe()
    assert done.observed["call_s"] >= 39, done.describe()
    messages = [p["msg"] for p in done.observed["progress"]]
    assert messages and all(re.fullmatch(r"waited \d+ of 40 s", str(m)) for m in messages), (
        done.describe()
    )


def test_aborted_call_cancels_its_run(stack: Stack, sdk_python: Path, tmp_path: Path) -> None:
    """1.30.0 sends no notifications/cancelled when a call is cancelled (it only stops waiting),
    so the scenario sends it for the call's request id, as a 1.x application has to."""
    marker = tmp_path / "marked_wait.txt"
    done = run(stack, "cancel_call", {"path": str(marker), "seconds": 60, "wait_cancelled_s": 8})
    assert done.ok, done.describe()
    assert done.observed["call"].get("cancelled_by_client"), done.describe()
    deadline = time.monotonic() + 5  # the script waited up to 8 s already; a last grace
    while "cancelled" not in read_lines(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = read_lines(marker)
    assert lines[:1] == ["started"], f"marker {lines}\n{done.describe()}"
    assert "cancelled" in lines and "finished" not in lines, f"marker {lines}\n{done.describe()}"
    took = done.observed.get("cancelled_seen_at_s", math.inf) - done.observed["notified_at_s"]
    assert took <= 5, f"cancelled {took:.1f} s after notifications/cancelled\n{done.describe()}"
    sent = [e for e in done.data["wire"] if e.get("rpc") == "notifications/cancelled"]
    assert [e.get("status") for e in sent] == [202], done.describe()


# -- experimental tasks (SEP-1686) ---------------------------------------------------------------
def test_task_polled_to_completion(stack: Stack, sdk_python: Path) -> None:
    done = run(stack, "task_poll", {"tool": "slow_compute", "arguments": {"seconds": 1}})
    assert done.ok, done.describe()
    assert done.observed["created"]["status"] == "working", done.describe()
    assert done.observed["statuses"][-1] == "completed", done.describe()
    assert result_text(done) == "result: computed in 1s", done.describe()
    sent = [e for e in done.data["wire"] if e.get("rpc") == "tools/call"]
    assert sent and "ttl" in sent[0].get("task", {}), done.describe()


def test_task_input_answered_during_tasks_result(stack: Stack, sdk_python: Path) -> None:
    done = run(stack, "task_elicit", {"tool": "ask_color"})
    assert done.ok, done.describe()
    task_id = done.observed["created"]["taskId"]
    assert "input_required" in done.observed["statuses"], done.describe()
    [asked] = done.observed["elicitations"]
    related = asked["params"].get("_meta", {}).get("io.modelcontextprotocol/related-task", {})
    assert related.get("taskId") == task_id, done.describe()
    assert asked["t"] >= done.observed["result_requested_at_s"], done.describe()
    assert result_text(done) == "colour: teal", done.describe()
    assert done.observed["final_status"] == "completed", done.describe()


def test_task_list_shows_created_tasks(stack: Stack, sdk_python: Path) -> None:
    done = run(stack, "task_list", {"count": 2})
    assert done.ok, done.describe()
    created = done.observed["created_ids"]
    assert len(created) == 2 and set(created) <= set(done.observed["listed_ids"]), done.describe()


def test_task_cancel(stack: Stack, sdk_python: Path) -> None:
    done = run(stack, "task_cancel", {"arguments": {"seconds": 60}})
    assert done.ok, done.describe()
    assert "working" in done.observed["statuses"], done.describe()
    assert done.observed["cancel_answer"]["status"] == "cancelled", done.describe()
    assert done.observed["after_cancel"] == "cancelled", done.describe()


# -- resources, prompts, completion, log levels (tests.clients.resources_fixture) -----------------
def test_resources_listed_and_read_text_binary_and_templates(
    stack: Stack, sdk_python: Path
) -> None:
    reads = [fixture.NOTES_URI, fixture.PIXEL_URI, fixture.BYTES_URI, "fixture://colors/tan"]
    reads.append("fixture://orders/9/lines/1")
    refused = ["fixture://nothing", "fixture://orders/9/lines/0", "fixture://colors/..%2Fetc"]
    done = run(stack, "resources", {"read": reads, "refused": refused}, replica=1)
    assert done.ok, done.describe()
    seen = done.observed
    assert {"resources", "prompts", "completions", "logging"} <= seen["capabilities"].keys()
    listed = {r["uri"]: r for r in seen["resources"]}
    assert listed[fixture.NOTES_URI] == {
        "uri": fixture.NOTES_URI,
        "name": "release_notes",
        "title": "Release notes",
        "description": "The release notes (a text resource).",
        "mimeType": "text/markdown",
    }, done.describe()
    assert listed[fixture.PIXEL_URI]["mimeType"] == "image/png", done.describe()
    templates = {t["uriTemplate"]: t for t in seen["templates"]}
    assert templates[fixture.LINES_TEMPLATE]["name"] == "order_line", done.describe()
    assert templates[fixture.COLORS_TEMPLATE]["mimeType"] == "application/json", done.describe()

    got = seen["reads"]
    assert got[fixture.NOTES_URI] == [
        {
            "kind": "TextResourceContents",
            "uri": fixture.NOTES_URI,
            "mimeType": "text/markdown",
            "text": fixture.NOTES,
        }
    ], done.describe()
    (png,) = got[fixture.PIXEL_URI]
    assert png["kind"] == "BlobResourceContents" and png["mimeType"] == "image/png"
    assert base64.b64decode(png["blob"]) == fixture.PIXEL, done.describe()
    (raw,) = got[fixture.BYTES_URI]
    assert raw["kind"] == "BlobResourceContents", done.describe()
    assert base64.b64decode(raw["blob"]) == fixture.ALL_BYTES, done.describe()
    (tan,) = got["fixture://colors/tan"]
    assert json.loads(tan["text"]) == {"name": "tan", "hex": "#d2b48c"}, done.describe()
    assert got["fixture://orders/9/lines/1"][0]["text"] == "order 9, line 1", done.describe()

    answers = seen["refused"]
    assert {uri: a.get("code") for uri, a in answers.items()} == dict.fromkeys(refused, -32602), (
        done.describe()
    )
    assert answers["fixture://nothing"]["data"] == {"uri": "fixture://nothing"}, done.describe()
    assert "line" in answers["fixture://orders/9/lines/0"]["message"], done.describe()


def test_subscribed_resource_updated_from_another_process(
    stack: Stack, sdk_python: Path, tmp_path: Path
) -> None:
    """A change announced by this process (not the web tier, not the worker) reaches the SDK's
    GET stream on replica B: the subscription is stored in Redis, the update published through
    it. Once the scenario unsubscribed, nobody is told."""
    uri = "fixture://colors/tan"  # no other test subscribes to it: the counts below are ours
    refused = "fixture://nothing/here"
    marker = tmp_path / "subscribe.txt"
    announcer = Announcer(stack, uri, marker, until="updated")
    announcer.start()
    try:
        args = {"uri": uri, "path": str(marker), "wait_s": 30, "refused_uri": refused}
        done = run(stack, "subscribe", args, replica=1)
    finally:
        announcer.stop.set()
        announcer.join(5)
    describe = f"{done.describe()}\nmarker {read_lines(marker)}; {announcer}"
    assert done.ok, describe
    assert announcer.error is None, describe
    assert "unsubscribed_at_s" in done.observed, describe
    updates = done.observed["updates"]
    assert updates and updates[0]["uri"] == uri, describe
    assert updates[0]["t"] >= done.observed["subscribed_at_s"], describe
    # While it was subscribed each announcement counted exactly this one session.
    assert announcer.told and max(announcer.told) == 1, describe
    gets = [e for e in done.wire if e["http"] == "GET"]
    assert any(e.get("status") == 200 for e in gets), describe  # the stream it came on
    answer = done.observed["refused"]
    assert answer.get("code") == -32602, describe
    assert answer.get("data") == {"uri": refused}, describe
    assert announce_updated(uri, stack.store()) == 0, describe


def test_prompts_listed_got_with_arguments_and_completed(stack: Stack, sdk_python: Path) -> None:
    review = {"type": "ref/prompt", "name": "code_review"}
    colors = {"type": "ref/resource", "uri": fixture.COLORS_TEMPLATE}
    args = {
        "get": [
            {"name": "code_review", "arguments": {"code": "print(1)"}},
            {"name": "incident_brief", "arguments": {"service": "billing", "minutes": "2"}},
        ],
        "complete": [
            {"ref": review, "argument": {"name": "language", "value": "r"}},
            {
                "ref": review,
                "argument": {"name": "style", "value": ""},
                "context": {"language": "go"},
            },
            {"ref": colors, "argument": {"name": "name", "value": "n"}},
        ],
        "refused": [{"name": "incident_brief", "arguments": {"service": "billing"}}],
    }
    done = run(stack, "prompts", args)
    assert done.ok, done.describe()
    seen = done.observed
    prompts = {p["name"]: p for p in seen["prompts"]}
    assert prompts["code_review"]["arguments"] == [
        {"name": "code", "description": "The code to review", "required": True},
        {"name": "language", "required": False},
        {"name": "style", "required": False},
    ], done.describe()
    assert prompts["incident_brief"]["description"] == (
        "A conversation about an incident, with attachments."
    ), done.describe()

    review_got, incident_got = seen["got"]
    assert review_got["messages"] == [
        {
            "kind": "TextContent",
            "role": "user",
            "content": {
                "type": "text",
                "text": "Review this python code (plain style):\n\nprint(1)",
            },
        }
    ], done.describe()
    kinds = [(m["role"], m["kind"]) for m in incident_got["messages"]]
    assert kinds == [
        ("user", "TextContent"),
        ("assistant", "TextContent"),
        ("user", "EmbeddedResource"),
        ("user", "ImageContent"),
    ], done.describe()
    assert incident_got["messages"][0]["content"]["text"].startswith("billing was down for 2 ")
    assert incident_got["messages"][2]["content"]["resource"]["text"] == fixture.NOTES
    image = incident_got["messages"][3]["content"]
    assert base64.b64decode(image["data"]) == fixture.PIXEL, done.describe()

    languages, styles, names = seen["completions"]
    assert languages["values"] == ["rust"] and languages["hasMore"] is False, done.describe()
    assert styles["values"] == ["gofmt"], done.describe()
    assert names["values"] == ["navy"], done.describe()

    (missing,) = seen["refused"]
    assert missing["code"] == -32602 and "minutes" in missing["message"], done.describe()


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (
            "warning",
            [
                ("warning", None, {"label": "py", "level": "warning"}),
                ("error", "clients.fixture", "py: error"),
            ],
        ),
        (
            "debug",
            [
                ("debug", None, "py: debug"),
                ("info", "clients.fixture", "py: info"),
                ("warning", None, {"label": "py", "level": "warning"}),
                ("error", "clients.fixture", "py: error"),
            ],
        ),
    ],
    ids=["warning", "debug"],
)
def test_log_level_set_and_a_tools_log_messages_on_its_call(
    stack: Stack, sdk_python: Path, level: str, expected: list[tuple[str, str | None, Any]]
) -> None:
    args = {"level": level, "tool": "log_levels", "arguments": {"label": "py"}}
    done = run(stack, "logging", args)
    assert done.ok, done.describe()
    assert result_text(done) == "logged 4 messages (py)", done.describe()
    logs = done.observed["logs"]
    assert [(e["level"], e["logger"], e["data"]) for e in logs] == expected, done.describe()
    assert not any(e["after_result"] for e in logs), "log messages after the call's result"
    sent = [e for e in done.data["wire"] if e.get("rpc") == "logging/setLevel"]
    assert [e.get("status") for e in sent] == [200], done.describe()
