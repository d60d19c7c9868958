"""Worker death under the 2025-11-25 wire: a task made with ``params.task`` recovers like any other.

The client is raw httpx on a Streamable HTTP session (``initialize``, ``Mcp-Session-Id``,
``MCP-Protocol-Version: 2025-11-25``), not ``McpClient``: the task is created with
``tools/call`` + ``params.task``, polled with ``tasks/get`` and fetched with ``tasks/result``
(one blocking on SSE across the kill, one JSON after the end). The worker that received the
task's message is SIGKILLed as a whole after the tool's memoized step ran; as in
``test_faults_workers``, the run's 2 s lease expires, the sweeper re-sends it and the other
worker takes it over (``runs`` goes to 2). Nothing is lost (the task completes, the blocked
``tasks/result`` answers) and nothing is doubled (the step's side effect is one line; one task
is counted created and one completed under ``step_then_sleep`` in the store's stats, in
``/metrics`` and in ``mcpq status``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcpq.ops.harness.children import REPO, Child
from mcpq.ops.harness.mcp_client import text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.protocol import META_RELATED_TASK
from mcpq.shared.store import TERMINAL, task_ref
from tests.faults.support import KEYS, MakeStack, lines, open_gauges

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

# A short keep-alive: the blocked tasks/result's reader checks its deadline (and whether the test
# gave up) on every line, so it never outlives a failed test by more than a few seconds.
METRICS_TOKEN = "faults-metrics-token-8e21"
KILL_KNOBS = {
    "MCPQ_LEASE_S": "2",
    "MCPQ_SSE_KEEPALIVE_S": "2",
    "MCPQ_METRICS_TOKEN": METRICS_TOKEN,
}
VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
TOOL = "step_then_sleep"
TASK_TTL_MS = 60_000
READ_S = 10.0  # longest quiet spell on a stream (keep-alives come every 2 s here)
STREAM_S = 60.0  # the most the blocked tasks/result may take (recovery takes seconds)
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}


class LegacySession:
    """A 2025-11-25 Streamable HTTP session, raw: one JSON-RPC message per POST."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http, self.url = http, url
        self.session_id = ""
        self._ids = iter(range(1, 1_000_000))

    @property
    def headers(self) -> dict[str, str]:
        return {
            "Accept": ACCEPT,
            "Content-Type": "application/json",
            "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": VERSION,
        }

    def open(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpq-faults-legacy", "version": "0"},
            },
        }
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        response = self.http.post(self.url, json=body, headers=headers)
        assert response.status_code == 200, f"initialize: {response.status_code} {response.text}"
        result = response.json()["result"]
        assert result["protocolVersion"] == VERSION, result
        assert "tasks" in result["capabilities"], result
        self.session_id = response.headers.get("mcp-session-id", "")
        assert self.session_id, f"no Mcp-Session-Id on the initialize answer: {response.headers}"
        done = self.http.post(
            self.url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self.headers,
        )
        assert done.status_code == 202, f"notifications/initialized: {done.status_code} {done.text}"

    def body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """POST one request; its ``result`` (JSON reply; fails on anything else)."""
        response = self.http.post(self.url, json=self.body(method, params), headers=self.headers)
        assert response.status_code == 200, f"{method}: HTTP {response.status_code} {response.text}"
        assert response.headers["content-type"].startswith("application/json"), (
            f"{method}: {response.headers['content-type']} {response.text[:500]}"
        )
        message = response.json()
        assert "result" in message, f"{method}: {message}"
        return message["result"]  # type: ignore[no-any-return]

    def task(self, task_id: str) -> dict[str, Any]:
        return self.call("tasks/get", {"taskId": task_id})

    def close(self) -> None:
        if self.session_id:
            self.http.delete(self.url, headers=self.headers)


def sse_messages(
    response: httpx.Response, deadline: float, stop: threading.Event
) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response, one per event (comments skipped); fails once
    ``deadline`` (``time.monotonic()``) has passed or ``stop`` is set, checked on every line
    (keep-alives too)."""
    data: list[str] = []
    for line in response.iter_lines():
        if stop.is_set():
            raise AssertionError("the test gave up on the stream")
        if time.monotonic() > deadline:
            raise AssertionError("the stream went on past its deadline")
        if line == "":
            if data and (payload := "\n".join(data).strip()):
                yield json.loads(payload)
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data and (payload := "\n".join(data).strip()):
        yield json.loads(payload)


def blocked_result(
    session: LegacySession, task_id: str, opened: threading.Event, stop: threading.Event
) -> tuple[dict[str, Any], list[dict[str, Any]], float]:
    """``tasks/result`` on its own connection, read as SSE until its response: (the response,
    every message before it, when it arrived). ``opened`` is set once the stream's headers are
    in (the server holds the request); ``stop`` ends the wait."""
    body = session.body("tasks/result", {"taskId": task_id})
    seen: list[dict[str, Any]] = []
    timeout = httpx.Timeout(10.0, read=READ_S)
    with (
        httpx.Client(timeout=timeout) as http,
        http.stream("POST", session.url, json=body, headers=session.headers) as response,
    ):
        kind = response.headers.get("content-type", "")
        if response.status_code != 200 or not kind.startswith("text/event-stream"):
            raise AssertionError(
                f"tasks/result did not stream: HTTP {response.status_code} {kind} "
                f"{response.read()[:500]!r}"
            )
        opened.set()
        for message in sse_messages(response, time.monotonic() + STREAM_S, stop):
            if message.get("id") == body["id"] and "method" not in message:
                return message, seen, time.monotonic()
            seen.append(message)
    raise AssertionError(f"the tasks/result stream ended without a response; saw {seen}")


def _victim_and_survivor(stack: Stack, ref: str) -> tuple[Child, Child]:
    victims = wait_until(
        lambda: stack.worker_that_received(TOOL, ref), timeout=10, message="the worker running it"
    )
    assert len(victims) == 1, [v.name for v in victims]
    (victim,) = victims
    (survivor,) = [w for w in stack.workers if w is not victim]
    return victim, survivor


def _metric(url: str, name: str, **labels: str) -> float:
    response = httpx.get(url, headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10)
    assert response.status_code == 200, response.text
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def _status_totals(stack: Stack) -> tuple[str, dict[str, int]]:
    """``mcpq status --no-ping`` as an operator runs it: its output and its ``(total)`` lines."""
    out = subprocess.run(
        [sys.executable, "-m", "mcpq", "status", "--no-ping"],
        env=stack.child_env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    totals = {
        line.split(" (total)")[0].strip(): int(line.split()[-1])
        for line in out.splitlines()
        if " (total)" in line
    }
    return out, totals


def test_legacy_task_survives_sigkill_of_its_worker(make_stack: MakeStack, tmp_path: Path) -> None:
    stack = make_stack(workers=2, env=KILL_KNOBS)
    effect, calls = tmp_path / "effect.txt", tmp_path / "calls.txt"
    args = {"path": str(effect), "seconds": 3, "calls": str(calls)}
    with httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0)) as http:
        session = LegacySession(http, stack.url(0))
        session.open()
        created = session.call(
            "tools/call", {"name": TOOL, "arguments": args, "task": {"ttl": TASK_TTL_MS}}
        )
        assert set(created) == {"task"}, created
        task = created["task"]
        assert set(task) >= TASK_FIELDS, task
        assert task["status"] == "working", task
        assert task["ttl"] == TASK_TTL_MS and task["pollInterval"] == 200, task
        task_id = task["taskId"]
        ref = task_ref(task_id)

        # The run is past its step (stored, effect written) when the tool reports "stepped".
        wait_until(
            lambda: session.task(task_id).get("statusMessage") == "stepped",
            timeout=15,
            interval=0.05,
            message="statusMessage 'stepped' on tasks/get",
        )
        with stack.redis_client() as r:
            assert r.hexists(KEYS.steps(ref), "effect"), "the step's outcome is stored"
        assert lines(effect) == ["effect"]
        victim, survivor = _victim_and_survivor(stack, ref)
        assert stack.task_hash(ref)["runs"] == "1"

        # A tasks/result that blocks on its stream across the kill (the web tier lives on).
        opened, stop = threading.Event(), threading.Event()
        with ThreadPoolExecutor(max_workers=1) as pool:
            waiting = pool.submit(blocked_result, session, task_id, opened, stop)
            try:
                assert opened.wait(10) or waiting.done(), "tasks/result's stream did not open"
                if waiting.done():
                    waiting.result()  # raises what went wrong
                killed_at = stack.kill_group(victim, signal.SIGKILL)
                resumed_at = stack.wait_runs(ref, 2, timeout=30)
                stack.reap(victim)

                statuses: list[str] = []

                def ended() -> dict[str, Any] | None:
                    now = session.task(task_id)
                    if not statuses or statuses[-1] != now["status"]:
                        statuses.append(now["status"])
                    return now if now["status"] in TERMINAL else None

                done = wait_until(ended, timeout=30, interval=0.1, message="a terminal status")
                completed_at = time.monotonic()
                streamed, before, streamed_at = waiting.result(timeout=15)
            finally:
                stop.set()  # a failed test does not wait out the stream's deadline

        print(
            f"\n[2025-11-25 task, worker SIGKILL] kill -> resumed start on {survivor.name}: "
            f"{resumed_at - killed_at:.2f}s; kill -> completed (tasks/get): "
            f"{completed_at - killed_at:.2f}s; kill -> blocked tasks/result answered: "
            f"{streamed_at - killed_at:.2f}s"
        )
        assert statuses == ["working", "completed"], f"statuses seen after the kill: {statuses}"
        assert set(done) >= TASK_FIELDS, done
        assert done["createdAt"] == task["createdAt"], done
        assert "result" not in done, "the 2025-11-25 task carries no result (tasks/result does)"

        # 0 lost: the blocked tasks/result and a later one give the tool's one result.
        assert "result" in streamed, f"blocked tasks/result failed: {streamed}; before: {before}"
        assert not before, f"unexpected messages on the tasks/result stream: {before}"
        fetched = session.call("tasks/result", {"taskId": task_id})
        for result in (streamed["result"], fetched):
            assert text_of(result) == "effect written (line 1), slept 3s", result
            assert not result.get("isError"), result
            assert result["_meta"][META_RELATED_TASK] == {"taskId": task_id}, result
        listed = session.call("tasks/list", {})["tasks"]
        assert [(t["taskId"], t["status"]) for t in listed] == [(task_id, "completed")], listed

        # 0 double: the step's effect once; the body once per run; exactly one recovered run.
        assert lines(effect) == ["effect"], "the step's side effect ran exactly once"
        assert lines(calls) == ["call", "call"], "the body itself ran once per run"
        assert stack.task_hash(ref)["runs"] == "2", "exactly one recovered run"
        assert stack.worker_that_received(TOOL, ref) == [survivor]
        session.close()

    # Counted like any other task: once created, once completed, under its tool's name (the
    # counts reach the stats within MCPQ_STATS_FLUSH_MS: mcpq.shared.store.tally).
    expected = {"created": 1, "completed": 1, "failed": 0, "cancelled": 0, "poisoned": 0}

    def counted() -> dict[str, int]:
        return {kind: by_tool.get(TOOL, 0) for kind, by_tool in stack.stats().totals.items()}

    wait_until(lambda: counted() == expected, timeout=10, interval=0.2, message="the counters")
    counts = counted()
    assert set(open_gauges(stack).values()) == {0}, open_gauges(stack)
    metrics = f"{stack.web_urls[0]}/metrics"
    for kind, want in counts.items():
        got = _metric(metrics, f"mcpq_tasks_{kind}_total", tool=TOOL)
        assert got == want, f"/metrics mcpq_tasks_{kind}_total{{tool={TOOL!r}}} = {got}"
    out, totals = _status_totals(stack)
    assert totals == expected, out
    assert task_id not in out and ref not in out, "mcpq status shows no task ids"
