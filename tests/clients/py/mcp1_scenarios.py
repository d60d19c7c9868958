"""Scenarios of the official MCP Python SDK 1.30.0 (2025-11-25 wire) against an mcpq server.

Runs in its own venv (``requirements-mcp1.txt``); usage ``mcp1_scenarios.py URL SCENARIO
[JSON-ARGS]``. Prints one JSON line (see ``scenario_common``). The client is the SDK's own:
``streamable_http_client`` (the non-deprecated name of ``streamablehttp_client``) with an
``httpx.AsyncClient`` from the SDK's ``create_mcp_http_client`` (event hooks record the wire),
``ClientSession(read, write, sampling_callback=..., elicitation_callback=...)``,
``session.call_tool(name, args, read_timeout_seconds, progress_callback)``, and the experimental
tasks client ``session.experimental``: ``call_tool_as_task`` (``tools/call`` with
``params.task = {"ttl": ...}``), ``get_task`` (``tasks/get``), ``get_task_result``
(``tasks/result``), ``list_tasks`` (``tasks/list``), ``cancel_task`` (``tasks/cancel``).

What 1.30.0 does on its own (read from its source): after ``notifications/initialized`` it opens
a GET SSE stream (retried once after a failure, then given up); cancelling a pending
``call_tool`` only stops waiting - it sends no ``notifications/cancelled`` and keeps reading the
call's SSE stream - so ``cancel_call`` sends the notification itself, as a 1.x application must.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl
from scenario_common import Report, main

# session.experimental is deprecated in 1.30.0 (tasks left the core spec); it is what we test.
warnings.filterwarnings("ignore", category=DeprecationWarning)

TERMINAL = {"completed", "failed", "cancelled"}


class Callbacks:
    """The client's answers to server requests, and a record of every request it got."""

    def __init__(self, report: Report, args: dict[str, Any], on_message: Any = None) -> None:
        self.report = report
        self.args = args
        self.on_message = on_message
        self.elicitations: list[dict[str, Any]] = report.observed.setdefault("elicitations", [])
        self.samplings: list[dict[str, Any]] = report.observed.setdefault("samplings", [])
        self.notifications: list[str] = report.observed.setdefault("notifications", [])

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitations.append(
            {
                "t": self.report.elapsed(),
                "request_id": context.request_id,
                "params": params.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )
        content = self.args.get("elicit_content", {"color": "teal"})
        return types.ElicitResult(action=self.args.get("elicit_action", "accept"), content=content)

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.samplings.append(
            {
                "t": self.report.elapsed(),
                "request_id": context.request_id,
                "params": params.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.args.get("sample_text", "hi there")),
            model="test-model",
        )

    async def message(self, message: Any) -> None:
        root = getattr(message, "root", None)
        method = getattr(root, "method", None)
        if method is not None:
            self.notifications.append(str(method))
        if self.on_message is not None:
            await self.on_message(message)


@asynccontextmanager
async def connect(
    url: str,
    report: Report,
    args: dict[str, Any],
    logging_callback: Any = None,
    on_message: Any = None,
) -> AsyncIterator[ClientSession]:
    """An initialized session; the InitializeResult goes into the report. ``on_message`` also
    gets every message the SDK hands its ``message_handler`` (server notifications, after the
    record of their method): the SDK takes one handler only."""
    callbacks = Callbacks(report, args, on_message)
    read_s = float(args.get("read_timeout_s", 300))
    http = create_mcp_http_client(timeout=httpx.Timeout(30.0, read=read_s))
    http.event_hooks = report.wire.hooks()
    async with http, streamable_http_client(url, http_client=http) as (read, write, session_id):
        session = ClientSession(
            read,
            write,
            sampling_callback=callbacks.sample,
            elicitation_callback=callbacks.elicit,
            message_handler=callbacks.message,
            logging_callback=logging_callback,
        )
        async with session:
            init = await session.initialize()
            report.observed["protocol_version"] = init.protocolVersion
            report.observed["server_info"] = init.serverInfo.model_dump(mode="json")
            report.observed["capabilities"] = init.capabilities.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            report.observed["session_id_present"] = bool(session_id())
            yield session


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def record_result(report: Report, result: types.CallToolResult, key: str = "result") -> None:
    report.observed[key] = {"text": texts(result), "is_error": bool(result.isError)}


# -- synchronous calls -------------------------------------------------------------------------
async def initialize(url: str, args: dict[str, Any], report: Report) -> None:
    async with connect(url, report, args) as session:
        listed = await session.list_tools()
        report.observed["tools"] = {
            tool.name: {"taskSupport": tool.execution.taskSupport if tool.execution else None}
            for tool in listed.tools
        }


async def call(url: str, args: dict[str, Any], report: Report) -> None:
    """``{"tool": NAME, "arguments": {...}}``: one synchronous tools/call, with progress."""
    progress: list[dict[str, Any]] = report.observed.setdefault("progress", [])

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append({"t": report.elapsed(), "progress": value, "total": total, "msg": message})

    async with connect(url, report, args) as session:
        started = report.elapsed()
        timeout = timedelta(seconds=float(args.get("call_timeout_s", 90)))
        result = await session.call_tool(
            args["tool"],
            args.get("arguments", {}),
            read_timeout_seconds=timeout,
            progress_callback=on_progress,
        )
        report.observed["call_s"] = round(report.elapsed() - started, 3)
        record_result(report, result)


async def cancel_call(url: str, args: dict[str, Any], report: Report) -> None:
    """Start ``marked_wait``, abort it (cancel scope) once ``path`` says ``started``, send
    ``notifications/cancelled`` for its request id (unless ``{"notify": false}``), then keep the
    session open until ``path`` says ``cancelled`` (or ``wait_cancelled_s`` pass)."""
    marker = Path(args["path"])
    seconds = float(args.get("seconds", 60))
    async with connect(url, report, args) as session:
        # The SDK numbers requests from 0 and gives the call the next id; read it before sending.
        request_id = session._request_id
        report.observed["request_id"] = request_id
        scope = anyio.CancelScope()
        outcome: dict[str, Any] = report.observed.setdefault("call", {})

        async def run_call() -> None:
            with scope:
                result = await session.call_tool(
                    "marked_wait", {"path": str(marker), "seconds": seconds}
                )
                outcome["text"] = texts(result)
            outcome["cancelled_by_client"] = scope.cancelled_caught

        async with anyio.create_task_group() as group:
            group.start_soon(run_call)
            with anyio.fail_after(float(args.get("start_timeout_s", 30))):
                while "started" not in _read(marker):
                    await anyio.sleep(0.1)
            report.observed["started_at_s"] = report.elapsed()
            scope.cancel()
        if args.get("notify", True):
            await session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(
                            requestId=request_id, reason="aborted by the test client"
                        )
                    )
                )
            )
            report.observed["notified_at_s"] = report.elapsed()
        wait = float(args.get("wait_cancelled_s", 8))
        with anyio.move_on_after(wait):
            while "cancelled" not in _read(marker):
                await anyio.sleep(0.1)
            report.observed["cancelled_seen_at_s"] = report.elapsed()
        report.observed["marker"] = _read(marker).split()
        report.observed["marker_checked_at_s"] = report.elapsed()
        if args.get("notify", True):
            # The notification is a POST of its own, which closing the session would abort:
            # wait (bounded) for the server's answer, so the report shows what the server said,
            # not how fast this script closed once the run had stopped.
            with anyio.move_on_after(wait):
                while not any(
                    e.get("rpc") == "notifications/cancelled" and "status" in e
                    for e in report.wire.exchanges
                ):
                    await anyio.sleep(0.02)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


# -- experimental tasks (SEP-1686) ---------------------------------------------------------------
def task_dump(task: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = task.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


async def poll(
    session: ClientSession, task_id: str, report: Report, until: set[str], limit_s: float
) -> list[str]:
    """tasks/get until the status is in ``until`` (or ``limit_s`` pass); statuses seen, in order,
    with repeats collapsed. Follows the server's pollInterval, within 50..1000 ms."""
    seen: list[str] = []
    with anyio.move_on_after(limit_s):
        while True:
            status = await session.experimental.get_task(task_id)
            if not seen or seen[-1] != status.status:
                seen.append(status.status)
            report.observed.setdefault("polls", []).append(task_dump(status))
            if status.status in until:
                break
            interval = (status.pollInterval or 200) / 1000
            await anyio.sleep(min(max(interval, 0.05), 1.0))
    return seen


async def task_poll(url: str, args: dict[str, Any], report: Report) -> None:
    """``{"tool", "arguments"}`` as a task: created, polled to a terminal status, result fetched."""
    async with connect(url, report, args) as session:
        created = await session.experimental.call_tool_as_task(
            args.get("tool", "slow_compute"), args.get("arguments", {"seconds": 1})
        )
        report.observed["created"] = task_dump(created.task)
        task_id = created.task.taskId
        report.observed["statuses"] = await poll(session, task_id, report, TERMINAL, 30)
        result = await session.experimental.get_task_result(task_id, types.CallToolResult)
        record_result(report, result)
        report.observed["result_meta"] = result.meta


async def task_elicit(url: str, args: dict[str, Any], report: Report) -> None:
    """``ask_color`` as a task: polled to input_required (or terminal), then tasks/result, during
    which the server's elicitation/create arrives on that stream and is answered."""
    async with connect(url, report, args) as session:
        created = await session.experimental.call_tool_as_task(
            args.get("tool", "ask_color"), args.get("arguments", {})
        )
        report.observed["created"] = task_dump(created.task)
        task_id = created.task.taskId
        until = TERMINAL | {"input_required"}
        report.observed["statuses"] = await poll(session, task_id, report, until, 15)
        report.observed["result_requested_at_s"] = report.elapsed()
        with anyio.fail_after(float(args.get("result_timeout_s", 30))):
            result = await session.experimental.get_task_result(task_id, types.CallToolResult)
        record_result(report, result)
        final = await session.experimental.get_task(task_id)
        report.observed["final_status"] = final.status


async def task_list(url: str, args: dict[str, Any], report: Report) -> None:
    """Create ``count`` short tasks, then tasks/list (every page): which of them are listed."""
    async with connect(url, report, args) as session:
        ids = []
        for i in range(int(args.get("count", 2))):
            created = await session.experimental.call_tool_as_task(
                "slow_compute", {"seconds": 0.5, "label": f"listed-{i}"}
            )
            ids.append(created.task.taskId)
        report.observed["created_ids"] = ids
        listed: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(20):
            page = await session.experimental.list_tasks(cursor)
            listed.extend(task_dump(t) for t in page.tasks)
            cursor = page.nextCursor
            if not cursor:
                break
        report.observed["listed"] = listed
        report.observed["listed_ids"] = [t["taskId"] for t in listed]


async def task_cancel(url: str, args: dict[str, Any], report: Report) -> None:
    """A long task, seen working, then tasks/cancel; the answer and a tasks/get after it."""
    async with connect(url, report, args) as session:
        created = await session.experimental.call_tool_as_task(
            args.get("tool", "slow_compute"), args.get("arguments", {"seconds": 60})
        )
        report.observed["created"] = task_dump(created.task)
        task_id = created.task.taskId
        report.observed["statuses"] = await poll(session, task_id, report, {"working"}, 10)
        cancelled = await session.experimental.cancel_task(task_id)
        report.observed["cancel_answer"] = task_dump(cancelled)
        report.observed["after_cancel"] = (
            await poll(session, task_id, report, TERMINAL, 10) or ["?"]
        )[-1]


# -- resources, prompts, completion, log levels --------------------------------------------------
def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def refusal(request: Any) -> dict[str, Any]:
    """How a request the server should refuse ended: the SDK's McpError (code, message, data),
    or the result when it did not fail."""
    try:
        return {"settled": "resolved", "result": dump(await request)}
    except McpError as exc:
        error = exc.error
        return {
            "settled": "rejected",
            "code": error.code,
            "message": error.message,
            "data": error.data,
        }


async def resources(url: str, args: dict[str, Any], report: Report) -> None:
    """``{"read": [uri...], "refused": [uri...]}``: ``list_resources``,
    ``list_resource_templates``, ``read_resource`` of each URI (contents as the SDK parsed them:
    ``TextResourceContents`` / ``BlobResourceContents``), and the errors of the refused ones."""
    async with connect(url, report, args) as session:
        listed = await session.list_resources()
        report.observed["resources"] = [dump(r) for r in listed.resources]
        templates = await session.list_resource_templates()
        report.observed["templates"] = [dump(t) for t in templates.resourceTemplates]
        reads: dict[str, Any] = report.observed.setdefault("reads", {})
        for uri in args.get("read", []):
            read = await session.read_resource(AnyUrl(uri))
            reads[uri] = [{"kind": type(c).__name__, **dump(c)} for c in read.contents]
        refused: dict[str, Any] = report.observed.setdefault("refused", {})
        for uri in args.get("refused", []):
            refused[uri] = await refusal(session.read_resource(AnyUrl(uri)))


async def subscribe(url: str, args: dict[str, Any], report: Report) -> None:
    """``{"uri", "path", "wait_s", "refused_uri"}``: ``subscribe_resource(uri)``, then
    ``subscribed`` into the marker file ``path``: the test announces the resource's change from
    its own process until the file says ``updated``, since an update reaches only a GET stream
    open at that moment. Waits (up to ``wait_s``) for the ``notifications/resources/updated``
    of ``uri`` on the ``message_handler``, records every one that arrived (URI and time), writes
    ``updated`` once it came, then ``unsubscribe_resource(uri)``, and the error of subscribing
    to ``refused_uri`` (a URI nothing serves)."""
    uri = args["uri"]
    marker = Path(args["path"])
    arrived = anyio.Event()
    updates: list[dict[str, Any]] = report.observed.setdefault("updates", [])

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", None)
        if isinstance(root, types.ResourceUpdatedNotification):
            updates.append({"uri": str(root.params.uri), "t": report.elapsed()})
            if str(root.params.uri) == uri:
                arrived.set()

    async with connect(url, report, args, on_message=on_message) as session:
        await session.subscribe_resource(AnyUrl(uri))
        report.observed["subscribed_at_s"] = report.elapsed()
        _note(marker, "subscribed")
        with anyio.move_on_after(float(args.get("wait_s", 20))):
            await arrived.wait()
        if arrived.is_set():
            _note(marker, "updated")
        await session.unsubscribe_resource(AnyUrl(uri))
        report.observed["unsubscribed_at_s"] = report.elapsed()
        refused = args.get("refused_uri", "fixture://nothing/here")
        report.observed["refused"] = await refusal(session.subscribe_resource(AnyUrl(refused)))


def _note(path: Path, line: str) -> None:
    with path.open("a") as handle:
        handle.write(f"{line}\n")


def reference(ref: dict[str, Any]) -> types.PromptReference | types.ResourceTemplateReference:
    if ref["type"] == "ref/prompt":
        return types.PromptReference(type="ref/prompt", name=ref["name"])
    return types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"])


async def prompts(url: str, args: dict[str, Any], report: Report) -> None:
    """``{"get": [{"name", "arguments"}], "complete": [{"ref", "argument", "context"?}],
    "refused": [{"name", "arguments"}]}`` (a completion's ``context``: the arguments already
    chosen, ``{name: value}``): ``list_prompts``, ``get_prompt`` of each (messages as the SDK
    parsed them), ``complete`` of each (``context_arguments``), and the errors of the refused
    gets."""
    async with connect(url, report, args) as session:
        listed = await session.list_prompts()
        report.observed["prompts"] = [dump(p) for p in listed.prompts]
        got: list[Any] = report.observed.setdefault("got", [])
        for request in args.get("get", []):
            prompt = await session.get_prompt(request["name"], request.get("arguments"))
            got.append(
                {
                    "description": prompt.description,
                    "messages": [
                        {"kind": type(m.content).__name__, **dump(m)} for m in prompt.messages
                    ],
                }
            )
        completions: list[Any] = report.observed.setdefault("completions", [])
        for request in args.get("complete", []):
            answer = await session.complete(
                reference(request["ref"]), request["argument"], request.get("context")
            )
            completions.append(dump(answer.completion))
        refused: list[Any] = report.observed.setdefault("refused", [])
        for request in args.get("refused", []):
            refused.append(
                await refusal(session.get_prompt(request["name"], request.get("arguments")))
            )


async def logging(url: str, args: dict[str, Any], report: Report) -> None:
    """``{"level", "tool", "arguments"}``: ``set_logging_level(level)``, then one synchronous
    ``call_tool``; the ``notifications/message`` its ``logging_callback`` got, in order, each
    with whether the call had returned yet."""
    logs: list[dict[str, Any]] = report.observed.setdefault("logs", [])
    returned = False

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(
            {
                "level": params.level,
                "logger": params.logger,
                "data": params.data,
                "after_result": returned,
            }
        )

    async with connect(url, report, args, logging_callback=on_log) as session:
        if args.get("level"):
            await session.set_logging_level(args["level"])
        result = await session.call_tool(args["tool"], args.get("arguments", {}))
        returned = True
        record_result(report, result)


SCENARIOS = {
    "initialize": initialize,
    "call": call,
    "cancel_call": cancel_call,
    "task_poll": task_poll,
    "task_elicit": task_elicit,
    "task_list": task_list,
    "task_cancel": task_cancel,
    "resources": resources,
    "subscribe": subscribe,
    "prompts": prompts,
    "logging": logging,
}

if __name__ == "__main__":
    raise SystemExit(main(SCENARIOS, anyio.run))
