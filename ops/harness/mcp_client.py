"""The MCP client of the tests and the benchmarks: raw 2026-07-28 JSON-RPC over httpx.

It speaks the stateless wire: one JSON-RPC request per POST with ``MCP-Protocol-Version``,
``Mcp-Method`` and ``Mcp-Name`` (the param `mcpq.shared.protocol.NAME_PARAM` names: the tool on
``tools/call``, the ``taskId`` on ``tasks/*``), and the ``_meta`` envelope (protocol version,
client info, client capabilities: the Tasks extension, elicitation and sampling, each on or off
per client and per request). Every reply comes back raw (:class:`Reply`: HTTP status, headers,
the JSON-RPC message, also when it arrived as the last ``data:`` event of an SSE stream, and how
long the round trip took); the helpers on top (`McpClient.create_task`, `McpClient.task`, ...)
fail with :class:`UnexpectedReply` when the server did not answer what they expect.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import httpx_sse

from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    NAME_PARAM,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
)
from mcpq.shared.store import TERMINAL

__all__ = ["McpClient", "Reply", "UnexpectedReply", "text_of"]


class UnexpectedReply(AssertionError):
    """The server answered something else than the caller expected (an ``AssertionError``, so
    a test reports it as a failed expectation)."""


@dataclass
class Reply:
    """One HTTP round trip: status, headers, the JSON-RPC message (``{}`` for an empty body,
    ``{"_raw": ...}`` for one that is not a JSON object) and the elapsed wall-clock time."""

    status: int
    body: dict[str, Any]
    headers: httpx.Headers
    elapsed_s: float

    @property
    def result(self) -> dict[str, Any]:
        if self.status != 200 or not isinstance(self.body.get("result"), dict):
            raise UnexpectedReply(f"expected a result: {self}")
        return self.body["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        if not isinstance(self.body.get("error"), dict):
            raise UnexpectedReply(f"expected an error: {self}")
        return self.body["error"]  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return f"HTTP {self.status} {json.dumps(self.body)[:1500]}"


_AUTO: Any = object()


class McpClient:
    """Sends one JSON-RPC request per POST, with the 2026-07-28 headers and ``_meta`` envelope.

    ``tasks``, ``elicitation`` and ``sampling`` are the capabilities declared by default; every
    request may override them (``client.get(task_id, tasks=False)``). ``http`` is the underlying
    ``httpx.Client`` (its ``timeout`` may be changed).
    """

    def __init__(
        self,
        url: str,
        *,
        tasks: bool = True,
        elicitation: bool = True,
        sampling: bool = False,
        client_name: str = "mcpq-test",
        timeout_s: float = 30.0,
        token: str | None = None,
    ) -> None:
        self.url = url
        #: Sent as ``Authorization: Bearer`` (an OAuth access token or an mcpq API key).
        self.token = token
        self.tasks, self.elicitation, self.sampling = tasks, elicitation, sampling
        self.client_info = {"name": client_name, "version": "1.0.0"}
        self.http = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=5.0))
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def capabilities(
        self,
        *,
        tasks: bool | None = None,
        elicitation: bool | None = None,
        sampling: bool | None = None,
    ) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.tasks if tasks is None else tasks:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        if self.elicitation if elicitation is None else elicitation:
            caps["elicitation"] = {"form": {}}
        if self.sampling if sampling is None else sampling:
            caps["sampling"] = {}
        return caps

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        name: str | None = _AUTO,
        headers: Mapping[str, str] | None = None,
        **caps: bool | None,
    ) -> Reply:
        """POST one request. ``name``: the ``Mcp-Name`` header (by default the param
        ``NAME_PARAM`` names; ``None`` sends none). ``headers`` are added last (they win)."""
        sent_params = dict(params or {})
        sent_params["_meta"] = {
            META_PROTOCOL_VERSION: PROTOCOL_VERSION,
            META_CLIENT_INFO: self.client_info,
            META_CLIENT_CAPABILITIES: self.capabilities(**caps),
        }
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
        }
        if name is _AUTO:
            name = sent_params.get(NAME_PARAM.get(method, ""))
        if name is not None:
            sent["Mcp-Name"] = name
        if self.token is not None:
            sent["Authorization"] = f"Bearer {self.token}"
        sent.update(headers or {})
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        body = json.dumps({**message, "params": sent_params})
        started = time.monotonic()
        response = self.http.post(self.url, headers=sent, content=body)
        elapsed = time.monotonic() - started
        return Reply(response.status_code, _decode(response), response.headers, elapsed)

    # -- tools ----------------------------------------------------------------------------------
    def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        **kwargs: Any,
    ) -> Reply:
        params: dict[str, Any] = {"name": tool, "arguments": dict(arguments or {})}
        if input_responses is not None:
            params["inputResponses"] = dict(input_responses)
        if request_state is not None:
            params["requestState"] = request_state
        return self.request("tools/call", params, **kwargs)

    def create_task(self, tool: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call`` with the opt-in; the ``CreateTaskResult`` (a new, working task)."""
        result = self.call_tool(tool, arguments, tasks=True).result
        if result.get("resultType") != "task" or result.get("status") != "working":
            raise UnexpectedReply(f"tools/call did not create a working task: {result}")
        return result

    # -- tasks/* --------------------------------------------------------------------------------
    def get(self, task_id: str, **kwargs: Any) -> Reply:
        return self.request("tasks/get", {"taskId": task_id}, **kwargs)

    def task(self, task_id: str) -> dict[str, Any]:
        """The task as ``tasks/get`` returns it."""
        result = self.get(task_id).result
        if result.get("resultType") != "complete":
            raise UnexpectedReply(f"tasks/get: {result}")
        return result

    def update(self, task_id: str, responses: Mapping[str, Any], **kwargs: Any) -> Reply:
        params = {"taskId": task_id, "inputResponses": dict(responses)}
        return self.request("tasks/update", params, **kwargs)

    def cancel(self, task_id: str, **kwargs: Any) -> Reply:
        return self.request("tasks/cancel", {"taskId": task_id}, **kwargs)

    def wait_for_message(
        self, task_id: str, message: str, *, timeout: float = 15.0, interval: float = 0.05
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task's ``statusMessage`` is ``message`` (what its tool
        reported); returns the task as then read."""

        def reported() -> dict[str, Any] | None:
            task = self.task(task_id)
            return task if task.get("statusMessage") == message else None

        return wait_until(
            reported, timeout=timeout, interval=interval, message=f"statusMessage {message!r}"
        )

    def wait_for_status(
        self, task_id: str, *statuses: str, timeout: float = 15.0, interval: float = 0.05
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until the status is one of ``statuses``; fails at once on another
        terminal status. Returns the task as last read."""
        seen: list[str] = []

        def reached() -> dict[str, Any] | None:
            task = self.task(task_id)
            if not seen or seen[-1] != task["status"]:
                seen.append(task["status"])
            if task["status"] in statuses:
                return task
            if task["status"] in TERMINAL:
                raise UnexpectedReply(f"task ended {task['status']}, wanted {statuses}: {task}")
            return None

        try:
            return wait_until(
                reached, timeout=timeout, interval=interval, message=f"status in {statuses}"
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; statuses seen: {seen}") from None


def sse_messages(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE reply, one per event (keep-alive comments skipped); reads
    an open stream as it arrives."""
    for event in httpx_sse.EventSource(response).iter_sse():
        if event.data.strip():
            yield json.loads(event.data)


def _decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE reply (the last ``data:`` event of a stream)."""
    if not response.content:
        return {}
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = list(sse_messages(response))
        return messages[-1] if messages else {}
    try:
        body = response.json()
    except ValueError:
        return {"_raw": response.text}
    return body if isinstance(body, dict) else {"_raw": body}


def text_of(result: Mapping[str, Any]) -> str:
    """All text content of a ``CallToolResult``, joined."""
    return "\n".join(
        c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"
    )
