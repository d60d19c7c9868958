"""A raw MCP 2026-07-28 client for end-to-end tests (httpx).

It speaks the stateless wire: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` (tool name,
or ``taskId`` on ``tasks/*``) and the ``_meta`` envelope (protocolVersion, clientInfo,
clientCapabilities with or without the Tasks extension, elicitation and sampling).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ops.processes import wait_until
from shared.keys import task_ref

PROTOCOL = "2026-07-28"
TASKS_EXT = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: httpx.Headers
    elapsed_s: float

    @property
    def result(self) -> dict[str, Any]:
        assert self.status == 200 and "result" in self.body, f"expected a result: {self}"
        return self.body["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, f"expected an error: {self}"
        return self.body["error"]  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return f"HTTP {self.status} {json.dumps(self.body)[:1500]}"


_AUTO: Any = object()
_NAME_PARAM = {
    "tools/call": "name",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


class McpClient:
    """Sends one JSON-RPC request per POST, with the 2026-07-28 headers and ``_meta`` envelope."""

    def __init__(
        self,
        url: str,
        *,
        tasks: bool = True,
        elicitation: bool = True,
        sampling: bool = False,
        client_name: str = "mcpq-e2e",
    ) -> None:
        self.url = url
        self.tasks, self.elicitation, self.sampling = tasks, elicitation, sampling
        self.client_info = {"name": client_name, "version": "1.0.0"}
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0))
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
            caps["extensions"] = {TASKS_EXT: {}}
        if self.elicitation if elicitation is None else elicitation:
            caps["elicitation"] = {"form": {}}
        if self.sampling if sampling is None else sampling:
            caps["sampling"] = {}
        return caps

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        name: str | None = _AUTO,
        headers: Mapping[str, str] | None = None,
        **caps: bool | None,
    ) -> Reply:
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": self.client_info,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities(**caps),
        }
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
        }
        if name is _AUTO:
            name = params.get(_NAME_PARAM.get(method, ""))
        if name is not None:
            sent["Mcp-Name"] = name
        sent.update(headers or {})
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        started = time.monotonic()
        response = self.http.post(self.url, headers=sent, content=json.dumps(message))
        elapsed = time.monotonic() - started
        return Reply(response.status_code, _decode(response), response.headers, elapsed)

    # -- tools ----------------------------------------------------------------------------------
    def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        input_responses: dict[str, Any] | None = None,
        request_state: str | None = None,
        **kwargs: Any,
    ) -> Reply:
        params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state
        return self.request("tools/call", params, **kwargs)

    def create_task(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call`` with the opt-in; asserts a ``CreateTaskResult`` came back."""
        result = self.call_tool(tool, arguments, tasks=True).result
        assert result["resultType"] == "task", result
        assert result["status"] == "working", result
        return result

    # -- tasks/* --------------------------------------------------------------------------------
    def get(self, task_id: str, **kwargs: Any) -> Reply:
        return self.request("tasks/get", {"taskId": task_id}, **kwargs)

    def task(self, task_id: str) -> dict[str, Any]:
        result = self.get(task_id).result
        assert result["resultType"] == "complete", result
        return result

    def update(self, task_id: str, responses: dict[str, Any], **kwargs: Any) -> Reply:
        return self.request(
            "tasks/update", {"taskId": task_id, "inputResponses": responses}, **kwargs
        )

    def cancel(self, task_id: str, **kwargs: Any) -> Reply:
        return self.request("tasks/cancel", {"taskId": task_id}, **kwargs)

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
            assert task["status"] not in TERMINAL, (
                f"task ended {task['status']}, wanted {statuses}: {task}"
            )
            return None

        try:
            return wait_until(
                reached, timeout=timeout, interval=interval, message=f"status in {statuses}"
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; statuses seen: {seen}") from None


def _decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE reply (the last ``data:`` event of a stream)."""
    if not response.content:
        return {}
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in response.text.splitlines() if ln.startswith("data:")]
        return json.loads(data[-1]) if data else {}
    try:
        body = response.json()
    except ValueError:
        return {"_raw": response.text}
    return body if isinstance(body, dict) else {"_raw": body}


def text_of(result: dict[str, Any]) -> str:
    """All text content of a ``CallToolResult``, joined."""
    return "\n".join(
        c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"
    )


def ref_of(task_id: str) -> str:
    """The storage ref (and Celery task id) of a task."""
    return task_ref(task_id)
