"""Scenarios of fastmcp-tasks 4.1.4's client against an mcpq server.

Runs in its own venv (``requirements-fastmcp.txt``); usage ``fastmcp_scenarios.py URL SCENARIO
[JSON-ARGS]``. Prints one JSON line (see ``scenario_common``).

The client is FastMCP's ``Client`` over its ``StreamableHttpTransport`` (mcp 2.x underneath,
``mode="auto"``: probes ``server/discover`` and speaks 2026-07-28); importing ``fastmcp_tasks``
registers its ``TasksClientExtension`` on every Client (it advertises the
``io.modelcontextprotocol/tasks`` extension and claims ``resultType: "task"`` answers).
``fastmcp_tasks.call_tool_task(client, name, args)`` sends ``tools/call`` and returns a
``ToolTask`` for the ``CreateTaskResult``; the handle's ``status()`` sends ``tasks/get``,
``wait(state=..., timeout=...)`` polls ``tasks/get``, ``result()`` polls to a terminal status and
answers ``input_required`` (the ``inputRequests`` of ``tasks/get``) through the Client's
``elicitation_handler``, delivering the answers with ``tasks/update``; ``cancel()`` sends
``tasks/cancel``. None of ``tasks/*`` carries an ``Mcp-Name`` header.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks import ToolTask, call_tool_task
from scenario_common import Report, main

TERMINAL = {"completed", "failed", "cancelled"}


def dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


@asynccontextmanager
async def connect(url: str, report: Report, args: dict[str, Any]) -> AsyncIterator[Client[Any]]:
    elicitations: list[dict[str, Any]] = report.observed.setdefault("elicitations", [])

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        elicitations.append({"t": report.elapsed(), "message": message, "params": dump(params)})
        return args.get("elicit_content", {"confirm": True})  # a plain dict means "accept"

    def http_client(**kwargs: Any) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(**kwargs, event_hooks=report.wire.hooks())

    transport = StreamableHttpTransport(url, httpx_client_factory=http_client)
    client = Client(transport, elicitation_handler=on_elicit, timeout=args.get("timeout_s", 60))
    async with client:
        report.observed["protocol_version"] = client.protocol_version
        capabilities = client.server_capabilities
        report.observed["capabilities"] = dump(capabilities) if capabilities else None
        yield client


async def start(client: Client[Any], args: dict[str, Any], report: Report) -> ToolTask:
    task = await call_tool_task(
        client, args.get("tool", "slow_compute"), args.get("arguments", {"seconds": 1})
    )
    report.observed["created"] = dump(task.create_result)
    return task


async def poll(task: ToolTask, report: Report, until: set[str], limit_s: float) -> list[str]:
    """``status()`` (tasks/get) until the status is in ``until``; statuses seen, repeats
    collapsed."""
    seen: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline:
        status = await task.status()
        if not seen or seen[-1] != status.status:
            seen.append(status.status)
        report.observed.setdefault("polls", []).append(dump(status))
        if status.status in until:
            break
        await asyncio.sleep(min(max((status.poll_interval_ms or 200) / 1000, 0.05), 1.0))
    return seen


def texts(result: Any) -> str:
    return "\n".join(str(c.text) for c in result.content if getattr(c, "text", None) is not None)


async def task_poll(url: str, args: dict[str, Any], report: Report) -> None:
    """call_tool_task, polled with status() to a terminal status, then result()."""
    async with connect(url, report, args) as client:
        task = await start(client, args, report)
        report.observed["statuses"] = await poll(task, report, TERMINAL, 30)
        result = await task.result()
        report.observed["result"] = {"text": texts(result), "is_error": result.is_error}


async def task_elicit(url: str, args: dict[str, Any], report: Report) -> None:
    """A task that asks for input: result() answers it through the elicitation handler."""
    args = {"tool": "confirm_delete", "arguments": {"filename": "x"}, **args}
    async with connect(url, report, args) as client:
        task = await start(client, args, report)
        input_seen = await task.wait(state="input_required", timeout=float(args.get("wait_s", 15)))
        report.observed["input_required"] = dump(input_seen)
        result = await task.result()
        report.observed["result"] = {"text": texts(result), "is_error": result.is_error}
        report.observed["final_status"] = (await task.status()).status


async def task_cancel(url: str, args: dict[str, Any], report: Report) -> None:
    """A long task, seen working, then cancel(); the status wait() reaches afterwards."""
    args = {"arguments": {"seconds": 60}, **args}
    async with connect(url, report, args) as client:
        task = await start(client, args, report)
        report.observed["statuses"] = await poll(task, report, {"working"}, 10)
        await task.cancel()
        report.observed["cancel_sent_at_s"] = report.elapsed()
        final = await task.wait(timeout=float(args.get("cancel_wait_s", 15)))
        report.observed["after_cancel"] = final.status
        report.observed["after_cancel_task"] = dump(final)


SCENARIOS = {"task_poll": task_poll, "task_elicit": task_elicit, "task_cancel": task_cancel}

if __name__ == "__main__":
    raise SystemExit(main(SCENARIOS, lambda scenario: asyncio.run(scenario())))
