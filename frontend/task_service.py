"""Task operations of the web tier, each written once: create, answer, cancel, enqueue, read,
watch, list; and the 2025-era session's maps that point at tasks.

The method handlers (``tools/call``, ``tasks/*``, streams) call these with the client's taskId;
none of them talks to the task store or the producer on its own (this module alone holds the
store's faces for tasks and ``tasks/list``, and the session maps that point at tasks), and none
derives a task's storage ref: that is done once, here (``task_ref``). Every operation is on
behalf of an owner (the principal): another principal's task reads and writes as unknown.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mcpq.frontend import rate_limits, web_metrics
from mcpq.frontend.producer import Producer
from mcpq.frontend.rate_limits import RateRefusals
from mcpq.shared import answers, tracing
from mcpq.shared.errors import INTERNAL_ERROR, McpError, TaskNotFound, invalid_params
from mcpq.shared.jobs import Run
from mcpq.shared.logs import task_hash
from mcpq.shared.settings import Settings
from mcpq.shared.store import (
    Admission,
    Answered,
    AsyncTaskStore,
    Cancelled,
    Listed,
    NewTask,
    Outgoing,
    Position,
    Refused,
    Reply,
    Session,
    SessionStore,
    TaskListing,
    TaskRecord,
    TaskStatus,
    Watch,
    task_ref,
)
from mcpq.shared.tools import Tool

log = logging.getLogger("mcpq.web")


def new_task_id() -> str:
    """A fresh taskId: URL-safe base64 of 256 random bits (the id is the bearer of the task),
    never with a leading ``-``, which a command line reads as an option (``mcpq task get -x…``
    failed for one id in 64). Such a draw is drawn again rather than altered, so every id that
    can come out is as likely as any other (entropy 255.98 bits)."""
    while True:
        task_id = secrets.token_urlsafe(32)
        if not task_id.startswith("-"):
            return task_id


@dataclass(frozen=True)
class Once:
    """A task-creating ``requestState``: its id and expiry (epoch ms). The create marks it
    used until then, in the same script, so a replay creates no second task."""

    jti: str
    expires_ms: int


@dataclass(frozen=True)
class Created:
    """A task that is persisted and whose first run is enqueued (or left to the sweeper)."""

    task_id: str
    created_ms: int
    ttl_ms: int | None
    poll_ms: int

    @property
    def expires_ms(self) -> int | None:
        return None if self.ttl_ms is None else self.created_ms + self.ttl_ms


class TaskService:
    def __init__(
        self,
        settings: Settings,
        store: AsyncTaskStore,
        listing: TaskListing,
        sessions: SessionStore,
        producer: Producer,
        rate_refusals: RateRefusals | None = None,
    ) -> None:
        self.settings, self.producer = settings, producer
        self._store, self._listing, self._sessions = store, listing, sessions
        self._unclaimed_ms = int(settings.unclaimed_after_s * 1000)
        self._session_ttl_ms = int(settings.session_ttl_s * 1000)
        #: Principals this process saw refused by the rate limit, until when: the tool gate
        #: asks it before a call costs anything (``mcpq.frontend.calls.gate``).
        self.rate_refusals = rate_refusals if rate_refusals is not None else RateRefusals()

    # -- create ------------------------------------------------------------------------------------
    async def create(
        self,
        owner: str,
        tool: Tool,
        arguments: dict[str, Any],
        caps: dict[str, Any],
        pre: dict[str, Any],
        *,
        sync: bool = False,
        request_id: str = "",
        ttl_ms: int | None = None,
        listed_in: str | None = None,
        once: Once | None = None,
    ) -> Created:
        """Persist the task, then enqueue its run: only then may anyone learn its id.

        A synchronous call's task is hidden (``sync``): its own short TTL, the default poll
        interval, and its id never leaves this process. ``ttl_ms``: the client's wish (2025-11-25
        ``task.ttl``), granted up to the tool's own TTL. ``listed_in``: the ``tasks/list`` scope
        that shows it (2025-11-25).
        """
        s = self.settings
        task_id = new_task_id()
        ref = task_ref(task_id)
        tool_ttl = tool.ttl(s.default_ttl_ms)
        if not sync and ttl_ms is not None:
            ttl_ms = ttl_ms if tool_ttl is None else min(ttl_ms, tool_ttl)
        else:
            ttl_ms = s.sync_ttl_ms if sync else tool_ttl
        poll_ms = s.poll_interval_ms if sync else tool.poll_interval_ms or s.poll_interval_ms
        queue = tool.queue or s.default_queue
        # The request's trace (empty when tracing is off): stored with the task, so every run
        # joins it, and sent with the first run.
        trace = tracing.current().carrier().get("traceparent", "")
        task = NewTask(
            ref, tool.name, queue, owner, arguments, caps, ttl_ms, poll_ms, pre, sync, trace
        )
        run = Run(tool.name, ref, queue, request_id, trace=trace)
        # The message goes out in the create's own script, unless the task is listed: then its
        # listing must be in place before any run can report (see below).
        message = None if listed_in is not None else await self.producer.message(run)
        try:
            created_ms = await self._store.create(
                task,
                self._unclaimed_ms,
                self._admission(owner, sync, once),
                message,
                int(s.requeue_unstarted_s * 1000),
            )
        except Refused as exc:
            if exc.limit == "replayed":
                raise invalid_params("Invalid params: requestState was already used") from None
            web_metrics.LIMIT_REJECTIONS.labels(exc.limit).inc()
            if exc.limit == "rate":
                self.rate_refusals.remember(owner, exc.retry_ms)
            raise rate_limits.over_limit(exc.limit, exc.retry_ms) from None
        if created_ms is None:  # a 256-bit collision: never in practice, never silently
            raise McpError(INTERNAL_ERROR, "Could not create the task")
        if listed_in is not None:
            # NOTE: before the enqueue, so the task's changes reach the scope's channel from its
            # first run on (nothing runs a task that was never enqueued, but for the sweeper's
            # re-send after MCPQ_UNCLAIMED_AFTER_S).
            await self._listing.add(listed_in, ref, task_id, created_ms, ttl_ms)
        if message is None:
            await self.enqueue(run)
        transition = {"task": task_hash(ref), "tool": tool.name, "transition": "created"}
        log.info("task created", extra=transition)
        return Created(task_id, created_ms, ttl_ms, poll_ms)

    def _admission(self, owner: str, sync: bool, once: Once | None) -> Admission:
        """The principal's limits for this create (checked with it, in one script)."""
        s = self.settings
        # Key names carry a hash of the principal, never the principal itself.
        key = hashlib.sha256(owner.encode()).hexdigest()[:24]
        once_id, once_ttl = "", 0
        if once is not None:
            # The marker outlives the state by a margin: the clocks of web and Redis differ.
            once_id = once.jti
            once_ttl = max(1, once.expires_ms - int(time.time() * 1000)) + 60_000
        return Admission(
            key,
            kind="sync" if sync else "tasks",
            max_open=s.max_sync_calls if sync else s.max_open_tasks,
            rate_per_s=s.create_rate,
            burst=max(1, s.create_burst),
            once=once_id,
            once_ttl_ms=once_ttl,
        )

    async def enqueue(self, run: Run) -> None:
        """Publish a run, then give it ``MCPQ_REQUEUE_UNSTARTED_S`` on the unclaimed watch list
        to be started.

        NOTE: the task is already on that list with the short "must be enqueued" deadline
        (``create``/``answer`` put it there, in the same script as the state change). If
        publishing fails, or this process dies right here, that deadline stands and the
        workers' sweeper enqueues the run: nothing is lost between persisting and publishing.
        """
        try:
            await self.producer.enqueue(run)
        except Exception as exc:  # the broker is down; recovery is the sweeper's job
            log.warning("enqueue failed (%s); the sweeper will retry", type(exc).__name__)
            return
        await self._store.mark_enqueued(run.ref, int(self.settings.requeue_unstarted_s * 1000))

    # -- a task by its id --------------------------------------------------------------------------
    async def get(
        self, owner: str, task_id: str, *, watching: bool = False, call: bool = False
    ) -> tuple[TaskRecord, dict[str, Any]]:
        """The task and its outstanding input requests. ``watching``: the caller follows the
        task's changes (:meth:`watch` with ``mark=False``); ``call``: with the call's own
        fields (arguments...) too (see ``AsyncTaskStore.get``)."""
        found = await self._store.get(task_ref(task_id), owner, watching=watching, call=call)
        tracing.current().join_task(found[0].ref, found[0].trace)  # this request is about it
        return found

    async def logs(self, task_id: str, after: int, upto: int) -> list[Any]:
        """A synchronous call's log messages after number ``after`` up to ``upto`` (read from
        its record, which :meth:`get` gave its owner)."""
        return await self._store.logs(task_ref(task_id), after, upto)

    async def answer(
        self, owner: str, task_id: str, responses: dict[str, Any], request_id: str = ""
    ) -> Answered:
        """Store answers (``tasks/update``, an MRTR retry of a running call): :meth:`_answer`."""
        return await self._answer(owner, task_ref(task_id), responses, request_id)

    async def cancel(self, owner: str, task_id: str, message: str) -> Cancelled:
        return await self._cancel(owner, task_ref(task_id), message)

    async def _answer(
        self, owner: str, ref: str, responses: dict[str, Any], request_id: str
    ) -> Answered:
        """Store answers; when they were the last ones a parked task waited for, enqueue its
        run again (``RESUME``: no worker holds it).

        Only answers to outstanding requests go on, each checked against its request first
        (``mcpq.shared.answers.accept``): a bad one is -32602 and nothing is stored, so the task
        stays ``input_required``. Answers to other keys are ignored, as the spec wants."""
        try:
            record, outstanding = await self._store.get(ref, owner)
        except TaskNotFound:
            return Answered(Reply.NOTFOUND)
        tracing.current().join_task(ref, record.trace)
        s = self.settings
        mine = answers.accept(outstanding, responses, s.max_answers, s.max_answer_bytes)
        if not mine:
            return Answered(Reply.IGNORED)
        answered = await self._store.answer(ref, owner, mine, self._unclaimed_ms)
        if answered.reply is not Reply.NOTFOUND:
            log.info(
                "answers stored",
                extra={"task": task_hash(ref), "transition": answered.reply.lower()},
            )
        if answered.reply is Reply.RESUME:
            queue = answered.queue or self.settings.default_queue
            # The answering request's trace: the resumed run's span links to it.
            trace = tracing.current().carrier().get("traceparent", "")
            resumed = Run(answered.tool, ref, queue, request_id, trace=trace)
            if trace:  # the run's parent, the create's (read above): the worker needs no read
                resumed = replace(resumed, task_trace=record.trace)
            await self.enqueue(resumed)
        return answered

    async def _cancel(self, owner: str, ref: str, message: str) -> Cancelled:
        """Cancel the task, then revoke its queued run so it never starts. The store is the
        truth: once it says ``cancelled`` a running tool sees it at its next context call, so
        a revoke that fails is only logged."""
        cancelled = await self._store.cancel(ref, owner, message)
        if cancelled.reply is not Reply.NOTFOUND:
            tracing.current().join_task(ref, cancelled.trace)
        if cancelled.reply is Reply.CANCELLED:
            transition = {"task": task_hash(ref), "transition": TaskStatus.CANCELLED.value}
            log.info("task cancelled", extra=transition)
            try:
                await self.producer.revoke(ref)
            except Exception as exc:
                log.warning("revoke failed: %s", type(exc).__name__)
        return cancelled

    # -- following tasks ---------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def watch(
        self, task_ids: Sequence[str], *, mark: bool = True
    ) -> AsyncIterator[TaskWatch]:
        """The changes of tasks ``task_ids``, as their ids (see ``AsyncTaskStore.watch``:
        subscribe first, read second; ``mark=False`` when the caller's first read marks)."""
        ids = {task_ref(task_id): task_id for task_id in task_ids}
        async with self._store.watch(list(ids), mark=mark) as watch:
            yield TaskWatch(watch, ids)

    @contextlib.asynccontextmanager
    async def watch_listing(self, scope: str) -> AsyncIterator[Watch]:
        """The changes of the tasks of a ``tasks/list`` scope, each as the listing entry that
        :meth:`listed` reads."""
        async with self._store.watch([], [scope]) as watch:
            yield watch

    async def listed(self, scope: str, entry: str, owner: str) -> Listed | None:
        return await self._listing.listed(scope, entry, owner)

    async def list_page(
        self, scope: str, owner: str, after: Position | None, size: int
    ) -> tuple[list[Listed], Position | None]:
        return await self._listing.page(scope, owner, after, size)

    # -- what a 2025-era session's maps point at ---------------------------------------------------
    async def remember_call(self, session: Session, request_id: int | str, task_id: str) -> None:
        """A synchronous call in flight, by its JSON-RPC id: ``notifications/cancelled`` names
        it (on any replica), :meth:`cancel_call` finds its task."""
        ref = task_ref(task_id)
        await self._sessions.put_call(session.sref, str(request_id), ref, self._session_ttl_ms)

    async def cancel_call(self, session: Session, request_id: int | str, message: str) -> None:
        ref = await self._sessions.find_call(session.sref, str(request_id))
        if ref is not None:
            await self._cancel(session.principal, ref, message)

    async def ask_client(self, session: Session, task_id: str, key: str) -> str:
        """The id of a server→client request for the task's input ``key``: the client's
        response to it (:meth:`deliver`, any replica) answers that key."""
        out_id = f"mcpq-{secrets.token_urlsafe(12)}"
        target = Outgoing(task_ref(task_id), key)
        await self._sessions.put_outgoing(session.sref, out_id, target, self._session_ttl_ms)
        return out_id

    async def deliver(
        self, session: Session, out_id: str, result: Any, error: Any, request_id: str = ""
    ) -> McpError | None:
        """The client's response to a server→client request: its ``result`` answers the input
        request (checked as any answer: a refused one is returned, and may be sent again); an
        ``error`` means the client will not answer, and the run cannot go on (cancelled)."""
        target = await self._sessions.take_outgoing(session.sref, out_id)
        if target is None:
            return None  # answered already, or expired with the session
        if isinstance(result, dict):
            try:
                await self._answer(session.principal, target.ref, {target.key: result}, request_id)
            except McpError as exc:
                ttl_ms = self._session_ttl_ms
                await self._sessions.put_outgoing(session.sref, out_id, target, ttl_ms)
                return exc
            return None
        text = str(error.get("message", "")) if isinstance(error, dict) else ""
        reason = f"the client refused the input request: {text[:200]}"
        await self._cancel(session.principal, target.ref, reason)
        return None


class TaskWatch:
    """The changes of watched tasks, each as the id it was watched by."""

    def __init__(self, watch: Watch, ids: dict[str, str]) -> None:
        self._watch, self._ids = watch, ids

    async def next(self, timeout_s: float) -> str | None:
        """The id of the next changed task, or ``None`` when ``timeout_s`` passed quietly."""
        ref = await self._watch.next(timeout_s)
        return None if ref is None else self._ids.get(ref)
