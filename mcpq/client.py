"""A Python client for MCP tasks (the ``io.modelcontextprotocol/tasks`` extension, 2026-07-28).

Built on the official ``mcp`` SDK's ``Client``, through its extension points rather than raw
HTTP:

- :class:`TasksExtension` is a ``ClientExtension``: the SDK advertises it in the
  ``_meta.clientCapabilities.extensions`` of every request, and its ``ResultClaim`` for
  ``resultType: "task"`` lets the SDK parse a ``CreateTaskResult`` (and, for a plain
  ``client.call_tool``, hand it to :func:`wait`);
- ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` are SDK ``Request`` types whose
  ``name_param`` is ``taskId``, so the session sets ``Mcp-Name`` to the taskId;
- input requests (``inputRequests`` of an ``input_required`` task, or MRTR rounds before a task
  exists) are answered through the session's own callback table
  (``ClientSession.dispatch_input_request``), the same one the SDK uses for MRTR.

The SDK declares the client's capabilities once per connection, from the callbacks it was built
with; :func:`connect` therefore takes the callbacks (``on_input`` for elicitation forms,
``on_sampling`` for sampling) and passes only those it is given, so a client without an
elicitation callback never declares elicitation and the server never asks it.

::

    async with connect(url, on_input=approve) as client:
        result = await call(client, "approve_deployment", {"service": "api", "version": "1"})
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client, ClientSession, MCPError
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict

__all__ = [
    "TASKS_EXTENSION",
    "TERMINAL",
    "CreateMessageResult",
    "ElicitResult",
    "InputNotAnswered",
    "MCPError",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskHandle",
    "TasksExtension",
    "answer",
    "call",
    "cancel",
    "connect",
    "get",
    "start",
    "update",
    "wait",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: Polling never goes faster than this, whatever ``pollIntervalMs`` says (a server bug must not
#: turn a client into a busy loop), and uses the default when the server names none.
MIN_POLL_S = 0.05
DEFAULT_POLL_S = 1.0

ElicitResult = types.ElicitResult
CreateMessageResult = types.CreateMessageResult

OnInput = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]
"""Answers an elicitation form: ``ElicitResult(action="accept", content={...})``, or
``action="decline"`` / ``"cancel"``."""
OnSampling = Callable[[types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult]]
"""Answers a sampling request with the model's (or a human's) message."""
OnStatus = Callable[["Task"], object]
"""Told each time a task's status or ``statusMessage`` changes (and once at the first read)."""
Session = Client | ClientSession


# -- wire models -------------------------------------------------------------------------------
class TaskHandle(types.Result):
    """``CreateTaskResult``: the new task, flat, ``resultType: "task"``."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class Task(types.Result):
    """A task as ``tasks/get`` reads it: ``result`` once completed, ``error`` once failed,
    ``input_requests`` while ``input_required``."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["complete"] = "complete"
    task_id: str
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: types.InputRequests | None = None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    def call_tool_result(self) -> types.CallToolResult | None:
        """The completed task's ``CallToolResult`` (``None`` before)."""
        return None if self.result is None else types.CallToolResult.model_validate(self.result)


class _Ack(types.Result):
    """The empty acknowledgement of ``tasks/update`` and ``tasks/cancel``."""

    result_type: Literal["complete"] = "complete"


class _TaskIdParams(types.RequestParams):
    task_id: str


class _UpdateParams(_TaskIdParams):
    input_responses: types.InputResponses


# ``name_param``: the SDK session copies params["taskId"] into the Mcp-Name header (its own
# table only knows tools/call, prompts/get and resources/read).
class _GetTask(types.Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskIdParams
    name_param = "taskId"


class _UpdateTask(types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams
    name_param = "taskId"


class _CancelTask(types.Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskIdParams
    name_param = "taskId"


# -- errors ------------------------------------------------------------------------------------
class TaskError(Exception):
    """A task did not complete; ``task`` is its last read."""

    def __init__(self, task: Task, message: str) -> None:
        super().__init__(message)
        self.task = task
        self.task_id = task.task_id


class TaskFailed(TaskError):
    """The task ended ``failed``: ``code`` and ``message`` are its JSON-RPC error's."""

    def __init__(self, task: Task) -> None:
        error = task.error or {}
        self.code: int | None = error.get("code")
        self.error_message = str(error.get("message") or task.status_message or "failed")
        super().__init__(task, f"task failed: {self.error_message} (code {self.code})")


class TaskCancelled(TaskError):
    """The task ended ``cancelled``."""

    def __init__(self, task: Task) -> None:
        super().__init__(task, "task cancelled")


class InputNotAnswered(TaskError):
    """The server asked for input this client has no answer for (no callback of that kind, or
    the callback declined with an error). The task has been cancelled, so it does not sit in
    ``input_required`` until its TTL."""


# -- the extension -----------------------------------------------------------------------------
class TasksExtension(ClientExtension):
    """The client side of ``io.modelcontextprotocol/tasks`` for an SDK ``Client``: advertised on
    every request; a ``tools/call`` answered with a task is followed to its end by :func:`wait`
    when it comes through ``Client.call_tool``."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        return await wait(ctx.session, handle.task_id)


@asynccontextmanager
async def connect(
    url: str,
    *,
    token: str | None = None,
    on_input: OnInput | None = None,
    on_sampling: OnSampling | None = None,
    client_name: str = "mcpq-client",
    timeout_s: float = 30.0,
    on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
) -> AsyncIterator[Client]:
    """An SDK ``Client`` on ``url`` (streamable HTTP, 2026-07-28) with :class:`TasksExtension`.

    ``token`` goes out as ``Authorization: Bearer`` (an mcpq API key or an OAuth access token).
    Elicitation is declared only with ``on_input``, sampling only with ``on_sampling``.
    ``on_response`` sees every HTTP response (an httpx2 event hook): the SDK reports an HTTP
    error status only as an ``MCPError``, without the status or its headers.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else None
    hooks = {"response": [on_response]} if on_response else None
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(timeout_s, connect=10.0),
                event_hooks=hooks,
            )
        )
        client = Client(
            streamable_http_client(url, http_client=http),
            extensions=[TasksExtension()],
            client_info=types.Implementation(name=client_name, version="1.0.0"),
            read_timeout_seconds=timeout_s,
            elicitation_callback=_elicitation(on_input) if on_input else None,
            sampling_callback=_sampling(on_sampling) if on_sampling else None,
        )
        yield await stack.enter_async_context(client)


def _elicitation(on_input: OnInput) -> Any:
    async def callback(
        _ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return await on_input(params)

    return callback


def _sampling(on_sampling: OnSampling) -> Any:
    async def callback(
        _ctx: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        return await on_sampling(params)

    return callback


# -- operations --------------------------------------------------------------------------------
def _session(client: Session) -> ClientSession:
    return client.session if isinstance(client, Client) else client


async def start(
    client: Session, tool: str, arguments: Mapping[str, Any] | None = None
) -> TaskHandle | types.CallToolResult:
    """``tools/call`` with the tasks opt-in: the new task's handle, or the ``CallToolResult`` of
    a tool that ran at once (a tool that never runs as a task). Input the server asks for before
    the task exists (MRTR rounds) is answered through the client's callbacks."""
    session = _session(client)
    args = dict(arguments or {})
    responses: types.InputResponses | None = None
    state: str | None = None
    for _ in range(16):  # bounded: a server that keeps asking must not loop us forever
        reply = await session.call_tool(
            tool,
            args,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
            allow_claimed=True,
        )
        if isinstance(reply, TaskHandle | types.CallToolResult):
            return reply
        if not isinstance(reply, types.InputRequiredResult):
            raise TypeError(f"tools/call answered an unexpected result: {type(reply).__name__}")
        responses = {}
        for key, request in (reply.input_requests or {}).items():
            response = await _dispatch(session, key, request)
            if isinstance(response, types.ErrorData):
                raise MCPError(response.code, response.message, response.data)
            responses[key] = response
        state = reply.request_state
    raise MCPError(-32603, f"{tool}: the server asked for input more than 16 times")


async def get(client: Session, task_id: str) -> Task:
    """``tasks/get``."""
    request = _GetTask(params=_TaskIdParams(task_id=task_id))
    return await _session(client).send_request(request, Task)


async def update(client: Session, task_id: str, responses: types.InputResponses) -> None:
    """``tasks/update``: answers to the task's input requests, by key."""
    params = _UpdateParams(task_id=task_id, input_responses=responses)
    await _session(client).send_request(_UpdateTask(params=params), _Ack)


async def cancel(client: Session, task_id: str) -> None:
    """``tasks/cancel`` (the task may take a moment to read ``cancelled``)."""
    await _session(client).send_request(_CancelTask(params=_TaskIdParams(task_id=task_id)), _Ack)


async def answer(client: Session, task: Task, *, skip: set[str] | None = None) -> list[str]:
    """Answer the input requests of an ``input_required`` task through the client's callbacks
    and send them in one ``tasks/update``; returns the keys answered. ``skip``: keys already
    answered (a read may still show them: ``tasks/update`` is eventually consistent).

    An input request the client has no answer for cancels the task and raises
    :class:`InputNotAnswered`."""
    session = _session(client)
    responses: types.InputResponses = {}
    for key, request in (task.input_requests or {}).items():
        if skip is not None and key in skip:
            continue
        response = await _dispatch(session, key, request)
        if isinstance(response, types.ErrorData):
            # Leaving it unanswered would park the task in input_required until its TTL.
            await cancel(session, task.task_id)
            raise InputNotAnswered(task, f"{request.method} not answered: {response.message}")
        responses[key] = response
    if responses:
        await update(session, task.task_id, responses)
    return list(responses)


async def _dispatch(
    session: ClientSession, key: str, request: types.InputRequest
) -> types.InputResponse | types.ErrorData:
    ctx = ClientRequestContext(session=session, request_id=key, meta=None)
    return await session.dispatch_input_request(ctx, request)


async def wait(
    client: Session, task_id: str, *, on_status: OnStatus | None = None
) -> types.CallToolResult:
    """Poll ``tasks/get`` at the server's ``pollIntervalMs`` until the task ends, answering its
    input requests on the way; the ``CallToolResult`` of a completed task (check ``is_error``
    for a tool error), :class:`TaskFailed` or :class:`TaskCancelled` otherwise."""
    session = _session(client)
    answered: set[str] = set()
    seen: tuple[str, str | None] | None = None
    while True:
        task = await get(session, task_id)
        if on_status is not None and (task.status, task.status_message) != seen:
            seen = (task.status, task.status_message)
            on_status(task)
        if task.status == "completed":
            return task.call_tool_result() or types.CallToolResult(content=[])
        if task.status == "failed":
            raise TaskFailed(task)
        if task.status == "cancelled":
            raise TaskCancelled(task)
        if task.status == "input_required":
            answered.update(await answer(session, task, skip=answered))
        interval = (task.poll_interval_ms or DEFAULT_POLL_S * 1000) / 1000
        await anyio.sleep(max(interval, MIN_POLL_S))


async def call(
    client: Session,
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    on_status: OnStatus | None = None,
) -> types.CallToolResult:
    """Run ``tool`` as a task and return its result: :func:`start`, then :func:`wait`.

    If the caller is cancelled while waiting (a timeout, Ctrl-C in an event loop), the task is
    cancelled on the server too, so no run is left working for nobody."""
    started = await start(client, tool, arguments)
    if isinstance(started, types.CallToolResult):
        return started
    try:
        return await wait(client, started.task_id, on_status=on_status)
    except anyio.get_cancelled_exc_class():
        with anyio.move_on_after(5, shield=True):
            await cancel(client, started.task_id)
        raise
