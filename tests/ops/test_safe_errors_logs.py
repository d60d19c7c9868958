"""Errors and logs that give nothing away, on a real stack (gunicorn web, an io worker) logging in
text mode, where a forged line would be easiest:

- a tool's unexpected exception reaches the client as a generic tool error with a random error
  id (task and synchronous calls alike), never its text; the worker logs that id next to the
  traceback; a ``ToolError``'s text reaches the client unchanged;
- a client's values (an ``Mcp-Name`` header whose base64 value hides a newline, a 10 000
  character method name) give exactly one, capped, log line per request;
- ``/metrics`` answers only to its bearer token.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import httpx
import pytest

from mcpq.ops.harness.mcp_client import text_of
from mcpq.ops.runtime.processes import wait_until
from tests.ops.ops_harness import OPS_TOOLS, OpsClient
from tests.ops.tools_crash import SECRET
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.ops, pytest.mark.timeout(120)]

TOKEN = "metrics-token-for-tests-5b7d1a"
GENERIC = re.compile(r"^internal error in tool crash \(error id ([0-9a-f]{16})\)$")
#: The start of every record in text mode (`HH:MM:SS LEVEL logger: ...`).
RECORD = re.compile(r"^\d\d:\d\d:\d\d [A-Z]+ +[\w.]+: ")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    env = {
        **FAST_KNOBS,
        "MCPQ_LOG_FORMAT": "text",
        "MCPQ_METRICS_TOKEN": TOKEN,
    }
    tools = f"{OPS_TOOLS},tests.ops.tools_crash"
    running = LiveStack("safe", tmp_path_factory.mktemp("safe-stack"), tools=tools, env=env)
    try:
        running.start_redis()
        pool = running.spawn_pool("mcpq", "safe")
        running.start_web()
        running.wait_ready(pool)
    except BaseException:
        running.abort()
        raise
    yield running
    running.close()


@pytest.fixture
def client(stack: LiveStack) -> Iterator[OpsClient]:
    with OpsClient(stack.url()) as raw:
        yield raw


def _worker_log(stack: LiveStack) -> str:
    return "\n".join(child.log() for child in stack.workers)


def _web_log(stack: LiveStack) -> str:
    return "\n".join(child.log() for child in stack.webs)


def _assert_logged_with_traceback(stack: LiveStack, error_id: str) -> None:
    def logged() -> list[str]:
        lines = _worker_log(stack).splitlines()
        return [i for i, line in enumerate(lines) if f"error_id={error_id}" in line]

    [at] = wait_until(logged, timeout=10, message=f"error id {error_id} in the worker's log")
    lines = _worker_log(stack).splitlines()
    assert "tool crash raised" in lines[at]
    # The traceback follows on indented lines (none can pass for a record of its own).
    trace = []
    for line in lines[at + 1 :]:
        if not line.startswith("    "):
            break
        trace.append(line.strip())
    assert trace and trace[0] == "Traceback (most recent call last):", lines[at : at + 5]
    assert trace[-1] == f"AttributeError: {SECRET}", trace


@pytest.mark.parametrize("tasks", [True, False], ids=["task", "sync"])
def test_an_unexpected_exception_reaches_the_client_as_an_error_id(
    stack: LiveStack, client: OpsClient, tasks: bool
) -> None:
    if tasks:
        task_id = client.create_task("crash", {"value": "x"})["taskId"]
        result = client.wait_for_status(task_id, "completed", timeout=15)["result"]
    else:
        result = client.call_tool("crash", {"value": "x"}, tasks=False).result
    assert result["isError"] is True, result
    text = text_of(result)
    match = GENERIC.match(text)
    assert match, text
    assert SECRET not in str(result) and "AttributeError" not in str(result)
    _assert_logged_with_traceback(stack, match.group(1))
    if tasks:
        assert task_id not in _worker_log(stack)


def test_a_tool_error_reaches_the_client_unchanged(client: OpsClient) -> None:
    result = client.call_tool("refuse", {"value": "that"}, tasks=False).result
    assert result["isError"] is True
    assert text_of(result) == "cannot do that with 'that'"


def _lines_of(stack: LiveStack, request_id: str) -> list[str]:
    def found() -> list[str]:
        return [line for line in _web_log(stack).splitlines() if request_id in line]

    return wait_until(found, timeout=10, message=f"{request_id} in the web log")


def test_a_header_hiding_a_newline_gives_one_log_line(stack: LiveStack, client: OpsClient) -> None:
    forged = "x\n12:00:00 INFO    mcpq.web: forged\u2028line"
    header = "=?base64?" + base64.b64encode(forged.encode()).decode() + "?="
    # The body names the same tool, so the header check passes and the name is logged.
    sent = client.request(
        "tools/call",
        {"name": forged, "arguments": {}},
        name=None,
        headers={"Mcp-Name": header, "X-Request-Id": "forge-2"},
    )
    assert sent.status == 400 and "error" in sent.body, sent
    [line] = _lines_of(stack, "forge-2")
    assert RECORD.match(line), line
    assert "forged" in line and "\\n12:00:00" in line and "\\u2028" in line
    assert not any(
        line.startswith("12:00:00 INFO    mcpq.web: forged")
        for line in _web_log(stack).splitlines()
    )


def test_a_huge_method_name_gives_one_capped_log_line(stack: LiveStack, client: OpsClient) -> None:
    method = "m" * 10_000
    reply = client.request(method, {}, headers={"X-Request-Id": "huge-1"})
    assert reply.status == 404 and reply.error["code"] == -32601
    [line] = _lines_of(stack, "huge-1")
    assert "method=" + "m" * 200 + "...[9800 more chars]" in line
    assert len(line) < 1000, len(line)


def test_metrics_answer_only_to_their_token(stack: LiveStack) -> None:
    url = f"{stack.web_urls[0]}/metrics"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        refused = httpx.get(url, headers=headers, timeout=10)
        assert refused.status_code == 401, headers
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "mcpq_" not in refused.text
    # Not a 500 either way: a header that is not ASCII.
    odd = httpx.get(url, headers={"Authorization": "Bearer \u00e9t\u00e9".encode("latin-1")})
    assert odd.status_code == 401
    scraped = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert scraped.status_code == 200 and "mcpq_requests_total" in scraped.text
