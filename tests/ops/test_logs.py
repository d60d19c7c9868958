"""Logs after a run that touches every method: JSON request lines, request ids that follow the
task to the worker, and never a ``taskId`` (a bearer token) anywhere.

One module-scoped run on the session stack covers ``server/discover``, ``tools/list``,
``tools/call`` (task, synchronous, MRTR rounds, tool errors), ``tasks/get``, ``tasks/update``
(answered in time, and after the run parked), ``tasks/cancel``, and errors at every rung of the
ladder. Then every line of every log file of the stack (web, both pools, Flower, redis) is read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.protocol import PROTOCOL_VERSION
from mcpq.shared.store import task_ref
from tests.ops.ops_harness import ISSUED, OpsClient, run_ended, worker_lines

pytestmark = [pytest.mark.ops, pytest.mark.timeout(120)]

GUNICORN_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[\d+\] \[[A-Z]+\] ")
TASK_FIELD = re.compile(r"^[0-9a-f]{12}$")
ACCEPT = "application/json, text/event-stream"


@dataclass
class Run:
    """What the scripted run did: request ids chosen per call, and the tasks they made."""

    request_ids: dict[str, str] = field(default_factory=dict)  # label -> X-Request-Id
    tasks: dict[str, str] = field(default_factory=dict)  # label -> taskId
    raw_ids: list[str] = field(default_factory=list)  # request ids of transport-level rejects


def rid(run: Run, label: str) -> dict[str, str]:
    run.request_ids[label] = f"ops-{label}"
    return {"X-Request-Id": f"ops-{label}"}


def answer_confirm(task: dict[str, Any]) -> dict[str, Any]:
    ((key, _request),) = task["inputRequests"].items()
    return {key: {"action": "accept", "content": {"confirm": True}}}


def _tasks(stack: Stack, client: OpsClient, run: Run) -> None:
    created = client.call_tool("slow_compute", {"seconds": 0.2}, headers=rid(run, "task"))
    run.tasks["task"] = created.result["taskId"]
    client.wait_for_status(run.tasks["task"], "completed", timeout=15)

    asked = client.call_tool("confirm_delete", {"filename": "a.txt"}, headers=rid(run, "ask"))
    run.tasks["ask"] = asked.result["taskId"]
    task = client.wait_for_status(run.tasks["ask"], "input_required", timeout=15)
    assert (
        client.update(run.tasks["ask"], answer_confirm(task), headers=rid(run, "answer")).result[
            "resultType"
        ]
        == "complete"
    )
    client.wait_for_status(run.tasks["ask"], "completed", timeout=15)

    # Answered after the hold (MCPQ_INPUT_HOLD_S=3): the run parks, the answer re-enqueues it.
    parked = client.call_tool("confirm_delete", {"filename": "b.txt"}, headers=rid(run, "park"))
    run.tasks["park"] = parked.result["taskId"]
    task = client.wait_for_status(run.tasks["park"], "input_required", timeout=15)
    wait_until(lambda: run_ended(stack, run.tasks["park"], "parked"), timeout=15)
    assert (
        client.update(run.tasks["park"], answer_confirm(task), headers=rid(run, "resume")).result[
            "resultType"
        ]
        == "complete"
    )
    client.wait_for_status(run.tasks["park"], "completed", timeout=15)

    cancelled = client.call_tool("slow_compute", {"seconds": 30}, headers=rid(run, "cancel-me"))
    run.tasks["cancel"] = cancelled.result["taskId"]
    wait_until(lambda: client.task(run.tasks["cancel"]).get("statusMessage"), timeout=15)
    assert (
        client.cancel(run.tasks["cancel"], headers=rid(run, "cancel")).result["resultType"]
        == "complete"
    )
    client.wait_for_status(run.tasks["cancel"], "cancelled", timeout=15)

    failed = client.call_tool("protocol_error_job", {}, headers=rid(run, "failing"))
    run.tasks["failing"] = failed.result["taskId"]
    client.wait_for_status(run.tasks["failing"], "failed", timeout=15)


def _sync(client: OpsClient, run: Run) -> None:
    assert client.request("server/discover", {}, headers=rid(run, "discover")).status == 200
    assert client.request("tools/list", {}, headers=rid(run, "list")).status == 200
    greet = client.call_tool("greet", {"name": "ops"}, tasks=False, headers=rid(run, "greet"))
    assert greet.result["content"]
    sync = client.call_tool("slow_compute", {"seconds": 0.1}, tasks=False, headers=rid(run, "sync"))
    assert sync.result["content"]
    first = client.call_tool("confirm_delete", {"filename": "c.txt"}, tasks=False)
    assert first.result["resultType"] == "input_required"
    final = client.call_tool(
        "confirm_delete",
        {"filename": "c.txt"},
        tasks=False,
        input_responses=answer_confirm(first.result),
        request_state=first.result["requestState"],
        headers=rid(run, "mrtr"),
    )
    assert final.result["content"]
    tool_error = client.call_tool("slow_compute", {"seconds": "soon"}, headers=rid(run, "bad-args"))
    assert tool_error.result.get("isError") is True


def _errors(client: OpsClient, run: Run) -> None:
    known = run.tasks["task"]
    errors = [
        client.get("not-a-task", headers=rid(run, "unknown-task")),
        client.get(known, tasks=False, headers=rid(run, "no-capability")),
        client.request("tasks/list", {}, headers=rid(run, "no-method")),
        client.call_tool("no_such_tool", {}, headers=rid(run, "no-tool")),
        client.request("tasks/get", {"taskId": 42}, name="42", headers=rid(run, "bad-params")),
    ]
    assert all("error" in reply.body for reply in errors), [str(e) for e in errors]
    mismatch = client.get(known, name="someone-else")  # refused by the routing-header check
    assert mismatch.error["code"] == -32020
    run.raw_ids.append(mismatch.headers["X-Request-Id"])


def _transport_errors(stack: Stack, run: Run) -> None:
    """Requests refused before any JSON-RPC is read: bad Accept, GET, unparseable body."""
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": PROTOCOL_VERSION}
    with httpx.Client(timeout=10) as http:
        replies = [
            http.post(stack.url(), headers={**headers, "Accept": "text/html"}, content=b"{}"),
            http.get(stack.url(), headers={**headers, "Accept": ACCEPT}),
            http.post(stack.url(), headers={**headers, "Accept": ACCEPT}, content=b"{nope"),
        ]
    assert [r.status_code for r in replies][:2] == [406, 405], replies
    run.raw_ids += [r.headers["X-Request-Id"] for r in replies]


@pytest.fixture(scope="module")
def scripted_run(ops_stack: Stack) -> Run:
    run = Run()
    with OpsClient(ops_stack.url()) as client:
        _tasks(ops_stack, client, run)
        _sync(client, run)
        _errors(client, run)
    _transport_errors(ops_stack, run)
    # The last lines of the run: the cancelled run ended, every request was logged.
    wait_until(lambda: run_ended(ops_stack, run.tasks["cancel"], "cancelled"), timeout=15)
    return run


def web_request_lines(stack: Stack) -> list[dict[str, Any]]:
    lines = []
    for name, text in stack.all_logs().items():
        if name.startswith("web"):
            for line in text.splitlines():
                if line.startswith("{"):
                    entry = json.loads(line)
                    if entry.get("msg") == "mcp request":
                        lines.append(entry)
    return lines


def test_no_log_line_contains_a_task_id(ops_stack: Stack, scripted_run: Run) -> None:
    assert set(scripted_run.tasks.values()) <= ISSUED
    logs = ops_stack.all_logs()
    assert any(name.startswith("web") for name in logs)
    assert sum(name.startswith("worker-") for name in logs) == 2
    leaks = [
        (name, number)
        for name, text in logs.items()
        for number, line in enumerate(text.splitlines(), 1)
        if any(task_id in line for task_id in ISSUED)
    ]
    assert not leaks, f"taskIds in logs at {leaks}"


def test_web_lines_are_json_with_the_request_fields(ops_stack: Stack, scripted_run: Run) -> None:
    for name, text in ops_stack.all_logs().items():
        if not name.startswith("web"):
            continue
        for line in text.splitlines():
            if line.startswith("{"):
                entry = json.loads(line)  # raises on a broken JSON line
                assert {"ts", "level", "logger", "msg"} <= entry.keys(), line
                if "task" in entry:
                    assert TASK_FIELD.match(entry["task"]), line
            else:  # gunicorn's own start/stop lines; never a request
                assert GUNICORN_LINE.match(line), f"{name}: not JSON, not gunicorn: {line!r}"
                assert "/mcp" not in line, line

    by_id = {ln["request_id"]: ln for ln in web_request_lines(ops_stack)}
    for label, request_id in scripted_run.request_ids.items():
        entry = by_id.get(request_id)
        assert entry is not None, f"no request line for {label} ({request_id})"
        assert isinstance(entry["method"], str) and entry["method"], entry
        assert isinstance(entry["http_status"], int), entry
        assert isinstance(entry["latency_ms"], int | float) and entry["latency_ms"] >= 0, entry
    assert by_id["ops-no-method"]["method"] == "tasks/list"
    assert by_id["ops-no-method"]["error_code"] == -32601
    assert by_id["ops-unknown-task"]["http_status"] != 200
    assert by_id["ops-task"]["tool"] == "slow_compute"
    assert by_id["ops-cancel"]["task"] == task_hash(task_ref(scripted_run.tasks["cancel"]))


def test_requests_refused_early_are_logged_with_a_method(
    ops_stack: Stack, scripted_run: Run
) -> None:
    by_id = {ln["request_id"]: ln for ln in web_request_lines(ops_stack)}
    for request_id in scripted_run.raw_ids:
        entry = by_id[request_id]
        assert {"http_status", "latency_ms", "request_id"} <= entry.keys(), entry
        assert "method" in entry, entry


def test_request_id_follows_the_task_to_the_worker(ops_stack: Stack, scripted_run: Run) -> None:
    ids, tasks = scripted_run.request_ids, scripted_run.tasks
    expectations = [
        ("task", "completed", ids["task"]),
        ("ask", "completed", ids["ask"]),
        ("park", "parked", ids["park"]),
        ("park", "completed", ids["resume"]),  # the resumed run carries the answer's request
        ("cancel", "cancelled", ids["cancel-me"]),
        ("failing", "failed", ids["failing"]),
    ]
    for label, transition, request_id in expectations:
        line = run_ended(ops_stack, tasks[label], transition)
        assert line is not None, f"no 'run ended' {transition} line for {label}"
        assert line["request_id"] == request_id, (label, line)
        assert TASK_FIELD.match(line["task"]), line
    sync_runs = [
        ln
        for ln in worker_lines(ops_stack)
        if ln.get("msg") == "run ended" and ln.get("request_id") == ids["sync"]
    ]
    assert [ln["transition"] for ln in sync_runs] == ["completed"]
