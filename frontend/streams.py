"""Replies that stream (SSE): a task followed until it ends, told to the client as it goes.

One loop, :func:`follow`, serves a synchronous ``tools/call`` (its hidden task) and the
2025-11-25 ``tasks/result``. While the task runs it sends ``notifications/progress`` for each
``ctx.report`` (when the request carried a ``progressToken``), a keep-alive comment whenever
nothing else was sent for ``MCPQ_SSE_KEEPALIVE_S`` (proxies cut idle streams: Heroku's router
after 30 s with no first byte, 55 s between bytes), and, on a 2025-era session, the tool's input
requests as server→client requests; the client's answers come back as POSTed JSON-RPC responses
on any replica (``mcpq.frontend.legacy``). It ends with the JSON-RPC response. A 2026-07-28 call has
no server→client requests: its stream ends with the MRTR ``input_required`` result instead.

The loop learns of changes from the task's pub/sub channel and re-reads the task on every
message and at least every keep-alive interval, so a lost message delays, never loses, an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from mcpq.frontend import replies
from mcpq.frontend.http_messages import ClientGone
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.replies import Message
from mcpq.frontend.services import Services
from mcpq.shared.errors import INTERNAL_ERROR, McpError, StoreUnavailable, TaskLost, TaskNotFound
from mcpq.shared.protocol import META_RELATED_TASK
from mcpq.shared.store import TaskRecord, TaskStatus
from mcpq.shared.tool_context import LOG_LEVELS, capability_names
from mcpq.shared.tools import missing_capabilities
from mcpq.shared.wire import Result

log = logging.getLogger("mcpq.web")
Events = AsyncIterator[Message | None]
#: The status message of a call cancelled by ``notifications/cancelled``: its stream then ends
#: without a response (the spec: a cancelled request gets none).
CLIENT_CANCELLED = "Cancelled by the client (notifications/cancelled)"
#: How long a followed task's stream outlasts a store outage before it ends with the error (a
#: Redis restart takes about a second, a Sentinel failover seconds), and how often it looks.
STORE_GRACE_S = 30.0
OUTAGE_POLL_S = 0.25


@dataclass
class StreamReply:
    """A handler's answer given as an SSE stream (see :class:`frontend.http_messages.HttpReply`)."""

    events: Events


@dataclass
class Follow:
    """What to follow and how it ends.

    ``final``: the result of the ended task (or raises its error). ``on_input``: a 2026-07-28
    call answers input requests with this result (MRTR) and ends. ``abandon``: a call's run is
    stopped when its stream ends before the task (the client left, the stream's time is up); a
    task followed by ``tasks/result`` lives on. ``related_task``: the taskId put in the
    related-task ``_meta`` of every server→client request and of the final result.
    """

    task_id: str
    final: Callable[[TaskRecord], Result]
    on_input: Callable[[dict[str, Any]], Awaitable[Result]] | None = None
    abandon: Callable[[str], Awaitable[None]] | None = None
    related_task: str | None = None
    gone: ClientGone | None = None
    #: The followed task is the call's own (its client never saw its id): a task gone while
    #: followed was lost by the store (``TaskLost``), not named wrongly (``TaskNotFound``).
    owned: bool = False
    #: How long to follow (default ``MCPQ_STREAM_MAX_S``), and the error once that is up.
    limit_s: float | None = None
    limit_text: str = "No result within MCPQ_STREAM_MAX_S"


def _progress_value(record: TaskRecord) -> float:
    """What a progress notification says: ``report_progress``'s number, else how many reports."""
    return record.progress if record.progress is not None else float(record.reports)


def _progress(rpc: RpcRequest, record: TaskRecord) -> Message:
    value = _progress_value(record)
    params: dict[str, Any] = {
        "progressToken": rpc.progress_token,
        "progress": int(value) if value.is_integer() else value,
    }
    if record.progress is not None and record.total is not None:
        total = record.total
        params["total"] = int(total) if total.is_integer() else total
    if record.message:
        params["message"] = record.message
    return replies.notification("notifications/progress", params)


def _wanted(level: Any, least: str) -> bool:
    """A message at ``level`` goes to a stream that asked for ``least`` and above."""
    return level in LOG_LEVELS and LOG_LEVELS.index(level) >= LOG_LEVELS.index(least)


def follow(services: Services, rpc: RpcRequest, spec: Follow) -> Events:
    return _Follower(services, rpc, spec).events()


async def settle(services: Services, rpc: RpcRequest, spec: Follow) -> Result:
    """The same following, for a plain JSON reply: its end as a result, or raised as an error.
    (What a stream would send on the way, progress and keep-alives, has nowhere to go.)"""
    follower = _Follower(services, rpc, spec)
    async for _ in follower.events():
        pass
    if follower.error is not None:
        raise follower.error
    if follower.result is not None:
        return follower.result
    if spec.gone is not None and spec.gone.is_set():
        raise McpError(INTERNAL_ERROR, "The client disconnected")
    raise McpError(INTERNAL_ERROR, "Tool call was cancelled")


class _Follower:
    """The state of one followed task: what was sent, and when."""

    def __init__(self, services: Services, rpc: RpcRequest, spec: Follow) -> None:
        self.services, self.rpc, self.spec = services, rpc, spec
        s = services.settings
        self.keepalive_s = s.sse_keepalive_s
        limit = s.stream_max_s if spec.limit_s is None else spec.limit_s
        self.deadline = time.monotonic() + limit if limit > 0 else float("inf")
        self.limit = limit
        self.reported: float | None = None  # the progress last sent (it must increase)
        self.logged = 0  # the log messages read so far
        self.asked: set[str] = set()
        self.sent_at = time.monotonic()
        self.ended = False
        self.result: Result | None = None
        self.error: McpError | None = None

    def answer(self, result: Result | None = None, error: McpError | None = None) -> Message:
        """The stream's last message, the JSON-RPC response."""
        self.ended = True
        self.result, self.error = result, error
        return replies.response(
            self.rpc.id,
            result=result,
            error=error,
            server_info=self.services.server_info,
            legacy=self.rpc.legacy,
        )

    async def events(self) -> Events:
        spec = self.spec
        if spec.gone is not None:
            spec.gone.watch()  # this request waits: its client's leaving must be seen
        failed: McpError | None = None
        try:
            # Marked watched by the first read (_step), not by a round trip of its own.
            async with self.services.tasks.watch([spec.task_id], mark=False) as watch:
                while True:
                    async for message in self._read():
                        yield message
                    if self.ended:
                        return
                    async for message in self._quiet(watch):
                        yield message
                    if self.ended or (spec.gone is not None and spec.gone.is_set()):
                        return
        except McpError as exc:
            # The store went away (503), or the task with it, after the reply had begun: a
            # stream's status line is sent already, so the error is its last message (a JSON
            # reply raises it: ``settle``). Never an exception out of a started stream.
            failed = exc
        finally:
            if not self.ended and spec.abandon is not None:
                # The stream ended before the task did (the client went away, the stream was
                # closed under us, the store failed it): the spec makes that a cancellation of
                # this request. Best effort: the store may be away for this too.
                reason = "the task store was unavailable" if failed else "the client disconnected"
                with contextlib.suppress(McpError):
                    await asyncio.shield(spec.abandon(reason))
        if failed is not None:
            yield self.answer(error=failed)

    async def _read(self) -> Events:
        """``_step``, outlasting a store outage.

        NOTE: a started stream cannot answer 503 for its client to retry: ending it would end
        the call (a synchronous call's run is cancelled with it) for what is usually a second
        (a Redis restart) or a few (a failover). So it waits, with keep-alives, for up to
        ``STORE_GRACE_S``, then ends with the error."""
        outage_since: float | None = None
        while True:
            try:
                async for message in self._step():
                    yield message
                return
            except StoreUnavailable:
                now = time.monotonic()
                outage_since = now if outage_since is None else outage_since
                if now - outage_since >= STORE_GRACE_S or now >= self.deadline:
                    raise
                if now - self.sent_at >= self.keepalive_s:
                    self.sent_at = now
                    yield None
                await asyncio.sleep(OUTAGE_POLL_S)

    async def _step(self) -> Events:
        """Read the task and send what is new: progress, input requests, or the end."""
        spec, rpc = self.spec, self.rpc
        try:
            record, inputs = await self.services.tasks.get(rpc.owner, spec.task_id, watching=True)
        except TaskNotFound:
            if not spec.owned:
                raise
            yield self.answer(error=TaskLost())
            return
        async for message in self._news(record):
            yield message
        if record.terminal:
            if record.status is TaskStatus.CANCELLED and record.message == CLIENT_CANCELLED:
                self.ended = True
                return
            try:
                yield self.answer(spec.final(record))
            except McpError as exc:
                yield self.answer(error=exc)
            return
        if record.status is TaskStatus.INPUT_REQUIRED and inputs:
            if spec.on_input is not None:  # 2026-07-28: MRTR ends the call's stream
                try:
                    yield self.answer(await spec.on_input(inputs))
                except McpError as exc:
                    yield self.answer(error=exc)
                return
            async for message in self._ask_new(inputs):
                yield message

    async def _news(self, record: TaskRecord) -> Events:
        """The progress and log messages ``record`` has that were not sent yet."""
        rpc = self.rpc
        # A task that ended cleared its progress text (statusMessage is the end's, or none):
        # a count of reports read only now would go out empty, so the result goes out alone;
        # report_progress's numbers still say where the run ended (its last report, written
        # just before its end), and go out without a text.
        value = _progress_value(record)
        grew = record.reports > 0 and (self.reported is None or value > self.reported)
        numbered = record.progress is not None
        fresh = grew and not (record.terminal and not record.message and not numbered)
        if rpc.progress_token is not None and fresh:
            self.reported = value
            self.sent_at = time.monotonic()
            yield _progress(rpc, record)
        # The tool's log messages, before its result (its run wrote them before its end).
        least = rpc.log_level
        if record.logs > self.logged and least is not None:
            logs = await self.services.tasks.logs(self.spec.task_id, self.logged, record.logs)
            for params in logs:
                if _wanted(params.get("level"), least):
                    self.sent_at = time.monotonic()
                    yield replies.notification("notifications/message", params)
            self.logged = record.logs

    async def _ask_new(self, inputs: dict[str, Any]) -> Events:
        fresh = {k: r for k, r in inputs.items() if k not in self.asked}
        missing = missing_capabilities(fresh.values(), self.rpc.caps)
        if missing and self.spec.abandon is not None:
            # Never ask what the session cannot answer: the call fails instead of hanging.
            await self.spec.abandon("client cannot answer the tool's input request")
            names = ", ".join(sorted(capability_names(missing)))
            text = f"The tool asks for input this session did not declare ({names})"
            yield self.answer(error=McpError(INTERNAL_ERROR, text))
            return
        for key, request in fresh.items():
            yield await _ask(self.services, self.rpc, self.spec, key, request)
            self.asked.add(key)
            self.sent_at = time.monotonic()

    async def _quiet(self, watch: Changes) -> Events:
        """Wait for a change; a keep-alive when quiet for long; the end of the stream's time."""
        spec = self.spec
        while not (spec.gone is not None and spec.gone.is_set()):
            now = time.monotonic()
            if now >= self.deadline:
                if spec.abandon is not None:
                    await spec.abandon(f"no result within {self.limit:g} s")
                text = f"{spec.limit_text} ({self.limit:g} s)"
                yield self.answer(error=McpError(INTERNAL_ERROR, text))
                return
            quiet_left = self.keepalive_s - (now - self.sent_at)
            if quiet_left <= 0:
                self.sent_at = time.monotonic()
                yield None
                return  # and re-read the task: the fallback for a lost message
            if await watch.next(min(quiet_left, self.deadline - now, 1.0)) is not None:
                return


async def _ask(
    services: Services, rpc: RpcRequest, spec: Follow, key: str, request: dict[str, Any]
) -> Message:
    """A server→client request for one input request; its answer is routed back by id."""
    assert rpc.session is not None
    out_id = await services.tasks.ask_client(rpc.session, spec.task_id, key)
    params = dict(request.get("params") or {})
    if spec.related_task is not None:
        params["_meta"] = {
            **params.get("_meta", {}),
            META_RELATED_TASK: {"taskId": spec.related_task},
        }
    return replies.request(out_id, str(request.get("method")), params)


Render = Callable[[str], Awaitable[Message | None]]


class Changes(Protocol):
    async def next(self, timeout_s: float) -> str | None:
        """What changed next (what ``Render`` takes), or ``None`` after ``timeout_s`` of quiet."""
        ...


async def watch_stream(
    services: Services,
    *,
    watching: AbstractAsyncContextManager[Changes],
    render: Render,
    first: list[Message] | None = None,
    snapshot: list[str] | None = None,
    gone: ClientGone | None = None,
    alive: Callable[[], Awaitable[bool]] | None = None,
) -> Events:
    """A notification stream (``subscriptions/listen``; a 2025-11-25 session's ``GET``) of what
    ``watching`` reports: the ``first`` messages, each of ``snapshot`` rendered as it is now
    (one that ended already is reported too; it is read after subscribing, so no change falls in
    between), then one rendered message per change, keep-alives when quiet, until the client
    leaves, ``alive()`` (asked at each keep-alive) says no, or ``MCPQ_STREAM_MAX_S`` passes."""
    try:
        async for message in _watched(services, watching, render, first, snapshot, gone, alive):
            yield message
    except McpError:
        # The store went away after the stream began: it ends, and its client listens again
        # (a notification stream has no response to carry an error).
        log.warning("a notification stream ended: the task store failed it")


async def _watched(
    services: Services,
    watching: AbstractAsyncContextManager[Changes],
    render: Render,
    first: list[Message] | None,
    snapshot: list[str] | None,
    gone: ClientGone | None,
    alive: Callable[[], Awaitable[bool]] | None,
) -> Events:
    s = services.settings
    deadline = time.monotonic() + s.stream_max_s if s.stream_max_s > 0 else float("inf")
    if gone is not None:
        gone.watch()
    async with watching as watch:
        for message in first or []:
            yield message
        for watched in snapshot or []:
            if (now_message := await render(watched)) is not None:
                yield now_message
        sent_at = time.monotonic()
        while not (gone is not None and gone.is_set()):
            now = time.monotonic()
            if now >= deadline:
                return
            quiet_left = s.sse_keepalive_s - (now - sent_at)
            if quiet_left <= 0:
                if alive is not None and not await alive():
                    return  # e.g. the session was ended (DELETE) on some replica
                sent_at = time.monotonic()
                yield None
                continue
            changed = await watch.next(min(quiet_left, deadline - now, 1.0))
            if changed is not None and (rendered := await render(changed)) is not None:
                sent_at = time.monotonic()
                yield rendered
