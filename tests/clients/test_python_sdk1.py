"""The official MCP Python SDK 1.30.0 (2025-11-25 wire) against the client stack.

The SDK lives in its own venv (``tests/clients/py_clients.py``); each test runs one scenario of
``tests/clients/py/mcp1_scenarios.py`` and asserts what the client observed. On a failure the
message carries the script's report (including every HTTP exchange it made and the bodies of
error answers) and its stdout/stderr.
"""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
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
