"""fastmcp-tasks 4.1.4's client (FastMCP ``Client`` + ``fastmcp_tasks.call_tool_task``, 2026-07-28
wire, SEP-2663 tasks extension) against the client stack.

Installed in its own venv (``tests/clients/py_clients.py``); each test runs one scenario of
``tests/clients/py/fastmcp_scenarios.py``. The client never sends ``Mcp-Name`` on ``tasks/*``,
so these tests also pin that the server accepts its absence there.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
from tests.clients.py_clients import ScenarioRun, ensure_installed, run_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

CLIENT = "fastmcp"


@pytest.fixture(scope="module")
def client_python() -> Path:
    """The venv's python (installed on first use; an install failure fails, never skips)."""
    return ensure_installed(CLIENT)


def run(stack: Stack, scenario: str, args: dict[str, Any] | None = None) -> ScenarioRun:
    done = run_scenario(CLIENT, stack.url(0), scenario, args)
    assert done.ok, done.describe()
    assert done.observed["protocol_version"] == "2026-07-28", done.describe()
    task_calls = [e for e in done.data["wire"] if str(e.get("rpc", "")).startswith("tasks/")]
    assert task_calls, done.describe()
    assert all("mcp-name" not in e["headers"] for e in task_calls), done.describe()
    return done


def result_text(done: ScenarioRun) -> str:
    result = done.observed.get("result") or {}
    assert not result.get("is_error"), done.describe()
    return str(result.get("text"))


def test_client_version(client_python: Path) -> None:
    probe = "import importlib.metadata as m; print(m.version('fastmcp-tasks'))"
    done = subprocess.run([str(client_python), "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "4.1.4", done.stderr


def test_call_tool_task_polled_to_completion(stack: Stack, client_python: Path) -> None:
    done = run(stack, "task_poll", {"tool": "slow_compute", "arguments": {"seconds": 1}})
    created = done.observed["created"]
    assert created["resultType"] == "task" and created["status"] == "working", done.describe()
    assert done.observed["statuses"][-1] == "completed", done.describe()
    assert result_text(done) == "result: computed in 1s", done.describe()


def test_task_input_answered_through_the_elicitation_handler(
    stack: Stack, client_python: Path
) -> None:
    done = run(stack, "task_elicit", {"tool": "confirm_delete", "arguments": {"filename": "x"}})
    parked = done.observed["input_required"]
    requests = list(parked.get("inputRequests", {}).values())
    assert [r.get("method") for r in requests] == ["elicitation/create"], done.describe()
    [asked] = done.observed["elicitations"]
    assert asked["message"] == "Delete x?", done.describe()
    assert result_text(done) == "Deleted x", done.describe()
    assert done.observed["final_status"] == "completed", done.describe()
    assert any(e.get("rpc") == "tasks/update" for e in done.data["wire"]), done.describe()


def test_cancel_a_running_task(stack: Stack, client_python: Path) -> None:
    done = run(stack, "task_cancel", {"tool": "slow_compute", "arguments": {"seconds": 60}})
    assert "working" in done.observed["statuses"], done.describe()
    assert done.observed["after_cancel"] == "cancelled", done.describe()
