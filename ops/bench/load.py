"""The load's MCP calls (2026-07-28 wire, the Tasks extension declared): create a task of the
no-op tool, read it, poll it to its end. Shared by the load generator (``mcpq.ops.bench.loadgen``),
the Redis cost count (``mcpq.ops.bench.costs``) and the benchmarks that drive a stack themselves."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from mcpq.ops.bench.rawhttp import HttpError, RawClient
from mcpq.shared.protocol import PROTOCOL_VERSION, TASKS_EXTENSION

TOOL, ARGS = "slow_compute", {"seconds": 0}
Http = httpx.AsyncClient | RawClient  # the benchmark's own client, or httpx where it is no load


class Load:
    """One client's MCP calls, and how many of them failed."""

    def __init__(
        self,
        url: str,
        tool: str = TOOL,
        arguments: dict[str, Any] | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        #: The tool each create calls, and its arguments (``slow_compute seconds=0`` unless told).
        self.tool, self.arguments = tool, ARGS if arguments is None else arguments
        #: The client capabilities each request declares: the Tasks extension, and
        #: ``capabilities`` (``{"elicitation": {"form": {}}}``: a tool that asks may be created).
        self.capabilities = {"extensions": {TASKS_EXTENSION: {}}, **(capabilities or {})}
        self.failures = 0
        self._ids = 0

    def _post(
        self, method: str, params: dict[str, Any], name: str
    ) -> tuple[dict[str, Any], dict[str, str]]:
        self._ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        body["params"] = {**params, "_meta": meta}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        return body, headers

    async def call(
        self, http: Http, method: str, params: dict[str, Any], name: str
    ) -> dict[str, Any] | None:
        body, headers = self._post(method, params, name)
        try:
            reply = await http.post(self.url, json=body, headers=headers)
            result: dict[str, Any] | None = (
                reply.json().get("result") if reply.status_code == 200 else None
            )
        except (httpx.HTTPError, HttpError, OSError, asyncio.IncompleteReadError, ValueError):
            result = None
        if result is None:
            self.failures += 1
        return result

    async def create(self, http: Http, arguments: dict[str, Any] | None = None) -> str | None:
        arguments = self.arguments if arguments is None else arguments
        params = {"name": self.tool, "arguments": arguments}
        result = await self.call(http, "tools/call", params, self.tool)
        return None if result is None else str(result["taskId"])

    async def status(self, http: Http, task_id: str) -> str | None:
        result = await self.call(http, "tasks/get", {"taskId": task_id}, task_id)
        return None if result is None else str(result["status"])

    async def until_done(self, http: Http, task_id: str, every_s: float) -> list[float] | None:
        """Poll until the task ends: each ``tasks/get``'s round trip (ms), or ``None`` (and a
        failure counted) when it has not ended within a minute."""
        took: list[float] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            asked = time.perf_counter()
            status = await self.status(http, task_id)
            took.append((time.perf_counter() - asked) * 1000)
            if status in {"completed", "failed", "cancelled"}:
                return took
            await asyncio.sleep(every_s)
        self.failures += 1
        return None
