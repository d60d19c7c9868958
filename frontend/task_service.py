"""Task operations of the web tier, each written once: create, answer, cancel, enqueue, read,
watch, and ``tasks/list``'s lookups.

The method handlers (``tools/call``, ``tasks/*``) and the synchronous-call path call these; none
of them talks to the store or the producer for a task operation on its own (this module alone
holds the store's task and listing faces). Every operation is on behalf of an owner (the
principal): another principal's task reads and writes as unknown.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from frontend import limits, metrics
from frontend.producer import Producer
from shared import answers
from shared.errors import INTERNAL_ERROR, McpError, TaskNotFound, invalid_params
from shared.jobs import Run
from shared.limits import LimitExceeded
from shared.logs import task_hash
from shared.settings import Settings
from shared.store import (
    Admission,
    Answered,
    AsyncTaskStore,
    Cancelled,
    Listed,
    NewTask,
    Position,
    Refused,
    Reply,
    TaskListing,
    TaskRecord,
    TaskStatus,
    Watch,
    task_ref,
)
from shared.tools import Tool

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
    ref: str
    created_ms: int
    ttl_ms: int | None
    poll_ms: int


class TaskService:
    def __init__(
        self, settings: Settings, store: AsyncTaskStore, listing: TaskListing, producer: Producer
    ) -> None:
        self.settings, self.producer = settings, producer
        self._store, self._listing = store, listing
        self._unclaimed_ms = int(settings.unclaimed_after_s * 1000)
        #: Principals this process saw refused by the rate limit, until when (monotonic).
        self._rate_refused: dict[str, float] = {}

    def rate_gate(self, owner: str) -> None:
        """Refuse a create at once, without Redis, while this process knows the principal's
        bucket is empty: ``create.lua`` said when its next token comes, and other replicas'
        creates can only push that later. A flooding client then costs this process little,
        which is what keeps other principals' requests fast."""
        until = self._rate_refused.get(owner)
        if until is None:
            return
        left_ms = int((until - time.monotonic()) * 1000)
        if left_ms <= 0:
            del self._rate_refused[owner]
            return
        metrics.LIMIT_REJECTIONS.labels("rate").inc()
        raise limits.over_limit("rate", left_ms)

    def _remember_refusal(self, owner: str, retry_ms: int) -> None:
        if len(self._rate_refused) >= 10_000:  # bounded: drop the ones that have passed
            now = time.monotonic()
            self._rate_refused = {k: v for k, v in self._rate_refused.items() if v > now}
        if len(self._rate_refused) < 10_000:
            self._rate_refused[owner] = time.monotonic() + retry_ms / 1000

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
        self.rate_gate(owner)
        task_id = new_task_id()
        ref = task_ref(task_id)
        tool_ttl = tool.ttl(s.default_ttl_ms)
        if not sync and ttl_ms is not None:
            ttl_ms = ttl_ms if tool_ttl is None else min(ttl_ms, tool_ttl)
        else:
            ttl_ms = s.sync_ttl_ms if sync else tool_ttl
        poll_ms = s.poll_interval_ms if sync else tool.poll_interval_ms or s.poll_interval_ms
        queue = tool.queue or s.default_queue
        task = NewTask(ref, tool.name, queue, owner, arguments, caps, ttl_ms, poll_ms, pre, sync)
        run = Run(tool.name, ref, queue, request_id)
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
            metrics.LIMIT_REJECTIONS.labels(exc.limit).inc()
            if exc.limit == "rate":
                self._remember_refusal(owner, exc.retry_ms)
            raise limits.over_limit(exc.limit, exc.retry_ms) from None
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
        return Created(task_id, ref, created_ms, ttl_ms, poll_ms)

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

    async def get(
        self, owner: str, ref: str, *, watching: bool = False, call: bool = False
    ) -> tuple[TaskRecord, dict[str, Any]]:
        """``watching``: the caller follows the task's changes; ``call``: with the call's own
        fields (arguments...) too (see ``AsyncTaskStore.get``)."""
        return await self._store.get(ref, owner, watching=watching, call=call)

    def watch(
        self, refs: Sequence[str] = (), scopes: Sequence[str] = (), *, mark: bool = True
    ) -> AbstractAsyncContextManager[Watch]:
        """Follow the changes of tasks ``refs`` and of the tasks of listing ``scopes`` for the
        block (``AsyncTaskStore.watch``: subscribed before the caller reads them)."""
        return self._store.watch(refs, scopes, mark=mark)

    async def listed(self, scope: str, ref: str, owner: str) -> Listed | None:
        """Task ``ref`` with its id, if it is in ``tasks/list`` scope ``scope`` and ``owner``'s."""
        return await self._listing.listed(scope, ref, owner)

    async def list_page(
        self, scope: str, owner: str, after: Position | None, size: int
    ) -> tuple[list[Listed], Position | None]:
        """A page of ``tasks/list`` (``TaskListing.page``)."""
        return await self._listing.page(scope, owner, after, size)

    async def answer(
        self, owner: str, ref: str, responses: dict[str, Any], request_id: str = ""
    ) -> Answered:
        """Store answers; when they were the last ones a parked task waited for, enqueue its
        run again (``RESUME``: no worker holds it).

        Only answers to outstanding requests go on, each checked against its request first
        (``shared.answers``): a bad one is -32602 and nothing is stored, so the task stays
        ``input_required``. Answers to other keys are ignored, as the spec wants, before Lua.
        """
        try:
            s = self.settings
            answers.check_sizes(responses, s.max_answers, s.max_answer_bytes)
        except LimitExceeded as exc:
            raise invalid_params(f"Invalid params: {exc}") from None
        try:
            _, outstanding = await self._store.get(ref, owner)
        except TaskNotFound:
            return Answered(Reply.NOTFOUND)
        mine = {key: value for key, value in responses.items() if key in outstanding}
        for key, value in mine.items():
            if (why := answers.problem(outstanding[key], value)) is not None:
                raise invalid_params(f"Invalid params: inputResponses[{key!r}]: {why}")
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
            await self.enqueue(Run(answered.tool, ref, queue, request_id))
        return answered

    async def cancel(self, owner: str, ref: str, message: str) -> Cancelled:
        """Cancel the task, then revoke its queued run so it never starts. The store is the
        truth: once it says ``cancelled`` a running tool sees it at its next context call, so
        a revoke that fails is only logged."""
        cancelled = await self._store.cancel(ref, owner, message)
        if cancelled.reply is Reply.CANCELLED:
            transition = {"task": task_hash(ref), "transition": TaskStatus.CANCELLED.value}
            log.info("task cancelled", extra=transition)
            try:
                await self.producer.revoke(ref)
            except Exception as exc:
                log.warning("revoke failed: %s", type(exc).__name__)
        return cancelled
