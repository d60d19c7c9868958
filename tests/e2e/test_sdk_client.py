"""The official Python SDK (``mcp`` 2.3.x) as the client, over streamable HTTP, 2026-07-28.

The SDK has no built-in client for the Tasks extension, but it has the hooks one needs:

- ``ClientExtension`` with identifier ``io.modelcontextprotocol/tasks`` is advertised in
  ``_meta.clientCapabilities.extensions`` of every request (modern mode only);
- its ``ResultClaim`` for ``resultType: "task"`` lets ``Client.call_tool`` parse a
  ``CreateTaskResult`` and hand it to our resolver, which polls ``tasks/get`` through
  ``ctx.session.send_request`` and returns the inlined ``CallToolResult``;
- a ``Request`` subclass with ``name_param = "taskId"`` makes the session send
  ``Mcp-Name: <taskId>`` on ``tasks/get`` / ``tasks/cancel`` (the core ``NAME_BEARING_METHODS``
  table only covers ``tools/call``, ``prompts/get`` and ``resources/read``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext
from pydantic import ConfigDict

from mcpq.ops.harness.stack import Stack
from mcpq.shared.protocol import TASKS_EXTENSION
from tests.support.anyio_run import run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

CLIENT_INFO = types.Implementation(name="mcpq-e2e-sdk", version="1.0.0")


class TaskHandle(types.Result):
    """``CreateTaskResult``: the flat task, ``resultType: "task"``."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class DetailedTask(types.Result):
    """``tasks/get`` result: the task plus ``result`` / ``error`` / ``inputRequests``."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["complete"] = "complete"
    task_id: str
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class Ack(types.Result):
    """The empty acknowledgement of ``tasks/update`` and ``tasks/cancel``."""

    result_type: Literal["complete"] = "complete"


class TaskIdParams(types.RequestParams):
    task_id: str


class GetTaskRequest(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTaskRequest(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def get_task(session: Any, task_id: str) -> DetailedTask:
    request = GetTaskRequest(params=TaskIdParams(task_id=task_id))
    return await session.send_request(request, DetailedTask)  # type: ignore[no-any-return]


async def poll_until(
    session: Any, task_id: str, done: Callable[[DetailedTask], bool], timeout: float = 20.0
) -> list[DetailedTask]:
    """Poll ``tasks/get`` (every ``pollIntervalMs``) until ``done``; returns every read."""
    reads: list[DetailedTask] = []
    with anyio.fail_after(timeout):
        while True:
            task = await get_task(session, task_id)
            reads.append(task)
            if done(task):
                return reads
            await anyio.sleep((task.poll_interval_ms or 200) / 1000)


class TasksExtension(ClientExtension):
    """A minimal client side of ``io.modelcontextprotocol/tasks``: poll to a terminal state."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.handles: list[TaskHandle] = []
        self.reads: list[DetailedTask] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        self.handles.append(handle)
        reads = await poll_until(
            ctx.session, handle.task_id, lambda t: t.status in {"completed", "failed", "cancelled"}
        )
        self.reads.extend(reads)
        final = reads[-1]
        if final.status != "completed" or final.result is None:
            raise RuntimeError(f"task {handle.task_id} ended {final.status}: {final.error}")
        return types.CallToolResult.model_validate(final.result)


def test_sdk_client_call_tool_resolves_a_task(stack: Stack) -> None:
    tasks = TasksExtension()

    async def main() -> None:
        async with Client(stack.url(0), extensions=[tasks], client_info=CLIENT_INFO) as sdk:
            assert sdk.protocol_version == "2026-07-28"
            discovered = sdk.session.discover_result
            assert discovered is not None
            assert discovered.capabilities.extensions == {TASKS_EXTENSION: {}}

            result = await sdk.call_tool("slow_compute", {"seconds": 1, "label": "sdk"})
            assert isinstance(result, types.CallToolResult)
            assert not result.is_error
            assert [c.text for c in result.content if isinstance(c, types.TextContent)] == [
                "sdk: computed in 1s"
            ]

    run(main)
    (handle,) = tasks.handles
    assert handle.status == "working" and handle.task_id
    statuses = [read.status for read in tasks.reads]
    assert statuses[0] == "working" and statuses[-1] == "completed", statuses
    assert all(read.task_id == handle.task_id for read in tasks.reads)


def test_sdk_cancels_a_task_and_reads_it_back(stack: Stack) -> None:
    async def main() -> None:
        async with Client(
            stack.url(1), extensions=[TasksExtension()], client_info=CLIENT_INFO
        ) as sdk:
            handle = await sdk.session.call_tool(
                "slow_compute", {"seconds": 60, "label": "sdk-cancel"}, allow_claimed=True
            )
            assert isinstance(handle, TaskHandle), handle
            await poll_until(
                sdk.session, handle.task_id, lambda t: t.status_message == "computing sdk-cancel"
            )
            request = CancelTaskRequest(params=TaskIdParams(task_id=handle.task_id))
            ack = await sdk.session.send_request(request, Ack)
            assert ack.result_type == "complete"
            reads = await poll_until(
                sdk.session, handle.task_id, lambda t: t.status == "cancelled", timeout=2
            )
            assert reads[-1].result is None and reads[-1].error is None

    run(main)


def test_sdk_sync_calls_and_mrtr_without_the_extension(stack: Stack) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def confirm(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def main() -> None:
        async with Client(
            stack.url(0), elicitation_callback=confirm, client_info=CLIENT_INFO
        ) as sdk:
            assert sdk.protocol_version == "2026-07-28"
            greeting = await sdk.call_tool("greet", {"name": "SDK"})
            assert [c.text for c in greeting.content if isinstance(c, types.TextContent)] == [
                "Hello, SDK!"
            ]
            # No tasks extension: slow_compute runs synchronously.
            computed = await sdk.call_tool("slow_compute", {"seconds": 0.2, "label": "inline"})
            assert [c.text for c in computed.content if isinstance(c, types.TextContent)] == [
                "inline: computed in 0.2s"
            ]
            # MRTR: the SDK answers input_required through the callback and retries with
            # inputResponses + requestState.
            deleted = await sdk.call_tool("confirm_delete", {"filename": "sdk.txt"})
            assert [c.text for c in deleted.content if isinstance(c, types.TextContent)] == [
                "Deleted sdk.txt"
            ]

    run(main)
    assert len(asked) == 1 and "sdk.txt" in asked[0].message


def test_sdk_session_runs_slow_compute_as_a_task(stack: Stack) -> None:
    """The task flow through the SDK session, without ``Client.call_tool``'s tools/list step."""

    async def main() -> None:
        async with Client(
            stack.url(0), extensions=[TasksExtension()], client_info=CLIENT_INFO
        ) as sdk:
            assert sdk.protocol_version == "2026-07-28"
            discovered = sdk.session.discover_result
            assert discovered is not None
            assert discovered.capabilities.extensions == {TASKS_EXTENSION: {}}

            handle = await sdk.session.call_tool(
                "slow_compute", {"seconds": 1, "label": "sdk-session"}, allow_claimed=True
            )
            assert isinstance(handle, TaskHandle), handle
            assert handle.status == "working"
            reads = await poll_until(
                sdk.session,
                handle.task_id,
                lambda t: t.status in {"completed", "failed", "cancelled"},
            )
            assert reads[0].status == "working" and reads[-1].status == "completed"
            assert reads[-1].result is not None
            result = types.CallToolResult.model_validate(reads[-1].result)
            assert not result.is_error
            assert [c.text for c in result.content if isinstance(c, types.TextContent)] == [
                "sdk-session: computed in 1s"
            ]

    run(main)
