"""Operator access to tasks (``mcpq tasks``): list tasks, show one, cancel some.

This reads the store directly, never through MCP: an operator is not the task's principal, and
the spec has no method that lists tasks. It shows tasks by their ``ref`` (a hash of the
``taskId``); the ``taskId`` is a bearer token and nothing here reads or prints it (the only copy
Redis holds, a ``tasks/list`` index of the 2025-11-25 wire, is never touched).

A listing of unfinished tasks only (``--state working`` and/or ``input_required``) walks each
shard's ``active`` index (unfinished tasks by ``createdAt``) and merges the shards into one
order, ``(createdAt, ref)``; a page ends with a cursor naming its last task, so tasks created
while an operator pages through never shift a page. ``--older-than`` is a bound on the index's
score, so old tasks cost no more to find than young ones.

Finished tasks leave that index when they end, and no other index holds them (one would cost
every task Redis commands on the hot path): a listing that includes a finished state, or names
no state, walks the task records themselves with ``SCAN`` (``admin_scan``), in storage order,
not by age; its cursor is the walk's position (``scan.…``). ``--older-than`` means the same in
both walks: created longer ago than that (a finished task's age too counts from its creation,
as the age column does; its finish time is ``updatedMs``). A ref prefix is resolved on the
index only, so a finished task is shown by its full ref.

Payloads (status messages, arguments, results, input requests) are opened with this process's
``MCPQ_DATA_KEYS``; one that does not open is shown as unreadable rather than failing the whole
command (an operator may run it without the deployment's data keys).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from mcpq.shared.sealing import DataKeyError
from mcpq.shared.settings import Settings
from mcpq.shared.store import client_calls
from mcpq.shared.store.admin_scan import ScanCursorError, ScanPosition, scan_refs, walk
from mcpq.shared.store.admin_views import (
    AdminError,
    Page,
    Position,
    TaskDetail,
    TaskFilter,
    TaskSummary,
)
from mcpq.shared.store.call_types import PipelineCall, Queue
from mcpq.shared.store.client_calls import Cancelled
from mcpq.shared.store.clients import payloads as payloads_of
from mcpq.shared.store.clients import store_keys, sync_client
from mcpq.shared.store.keyspace import Keys, Shard
from mcpq.shared.store.payloads import TASK_FIELDS, TEXT_FIELDS, Payloads, UnreadablePayload
from mcpq.shared.store.redis_errors import store_errors
from mcpq.shared.store.states import Reply, TaskStatus
from mcpq.shared.store.sync import TaskStore

#: What a payload that does not open with this process's data keys shows instead.
UNREADABLE = "(sealed: not readable with this MCPQ_DATA_KEYS)"
#: The status message an operator's cancel leaves (a client's says "Cancelled by client").
CANCEL_MESSAGE = "Cancelled by an operator"
#: The fields a listing reads of each task: never its payloads but the status message.
_LIST_FIELDS = ("status", "tool", "owner", "created_ms", "updated_ms", "parked", "runs", "msg")
#: Index entries read per shard and round trip.
_BATCH = 200
_REF = re.compile(r"[0-9a-f]{32}")
_REF_PREFIX = re.compile(r"[0-9a-f]{6,32}")


class TaskAdmin:
    """The operator's reads and cancels, on a :class:`TaskStore` (whose error mapping and
    scripts they share)."""

    def __init__(
        self, store: TaskStore, keys: Keys, payloads: Payloads, client: redis.Redis
    ) -> None:
        self._store = store
        self._keys = keys
        self._payloads = payloads
        #: The store's client, for what its pipelines cannot do on a Redis Cluster (redis-py
        #: refuses keyless commands there): ``SCAN`` one node, ``TIME``.
        self._client = client

    # -- listing -------------------------------------------------------------------------------
    def now_ms(self) -> int:
        """Redis's clock: the one every script stamps ``createdAt`` with (on a cluster, one
        node's: the nodes' clocks differ by no more than their hosts' do)."""
        with store_errors():
            seconds, micros = self._client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def list_tasks(self, which: TaskFilter, limit: int, cursor: str | None = None) -> Page:
        """Up to ``limit`` tasks matching ``which``, after ``cursor``: oldest first when
        ``which`` names unfinished states only (the ``active`` index), else in storage order
        (a ``SCAN`` of the task records: :mod:`mcpq.shared.store.admin_scan`)."""
        if limit < 1:
            raise AdminError(f"a page holds at least one task, not {limit}")
        if cursor and _other_walks(cursor, which.scans):
            raise AdminError(
                "this cursor belongs to a listing of other states: give the --state options "
                "of the listing that printed it"
            )
        if which.scans:
            return self._list_scanned(which, limit, cursor)
        after = Position.parse(cursor) if cursor else None
        now = self.now_ms()
        # createdAt is the index's score: "older than" is an upper bound on it.
        high = now - which.older_than_ms if which.older_than_ms > 0 else None
        found: list[TaskSummary] = []
        entries = self._walk(after, high)
        # One more than a page: whether another page exists is known without an empty last page.
        while len(found) <= limit:
            chunk = [entry for _, entry in zip(range(_BATCH), entries, strict=False)]
            if not chunk:
                break
            for task in self._summaries([ref for _, ref in chunk]):
                if task is not None and which.matches(task, now):
                    found.append(task)
        page = found[:limit]
        more = len(found) > limit
        return Page(page, str(Position(page[-1].created_ms, page[-1].ref)) if more else None, now)

    def _list_scanned(self, which: TaskFilter, limit: int, cursor: str | None) -> Page:
        try:
            start = ScanPosition.parse(cursor) if cursor else ScanPosition()
        except ScanCursorError:
            raise AdminError(f"not a cursor of mcpq tasks list: {cursor!r}") from None
        if start.shard >= len(self._shards):
            raise AdminError(
                f"cursor {cursor!r} names shard {start.shard}, and this store has "
                f"{len(self._shards)} (MCPQ_STORE_SHARDS)"
            )
        now = self.now_ms()

        def step(shard: Shard, at: int) -> tuple[int, list[str]]:
            return scan_refs(self._client, self._keys, shard, at)

        def matching(refs: list[str]) -> list[TaskSummary]:
            # One pipelined round trip of HMGETs per SCAN batch; a task that expired since the
            # SCAN reads as None and is left out.
            summaries = self._summaries(refs) if refs else []
            return [t for t in summaries if t is not None and which.matches(t, now)]

        found = walk(self._shards, start, limit, step, matching)
        return Page(found.tasks, str(found.next) if found.next else None, now)

    def _walk(self, after: Position | None, high: int | None) -> Iterator[tuple[int, str]]:
        """Every shard's ``active`` entries after ``after`` (up to score ``high``), merged into
        one ``(createdAt, ref)`` order: the order Redis keeps within a shard (score, then
        member), so a cursor means the same thing on every shard."""
        return heapq.merge(*(self._shard_entries(s.active, after, high) for s in self._shards))

    @property
    def _shards(self) -> tuple[Shard, ...]:
        return self._keys.all_shards

    def _shard_entries(
        self, index: str, after: Position | None, high: int | None
    ) -> Iterator[tuple[int, str]]:
        low = after.created_ms if after is not None else None
        offset = 0
        while True:
            batch = self._store.pipeline(_index_window(index, low, high, offset, _BATCH))
            for created, ref in batch:
                # Same createdAt as the cursor: Redis orders members by ref, so "after" is
                # (score, ref) order; an entry at or before the cursor was on an earlier page.
                if after is None or (created, ref) > (after.created_ms, after.ref):
                    yield created, ref
            if len(batch) < _BATCH:
                return
            # Offsets, not a moving lower bound: a run of equal scores longer than a batch
            # would otherwise be read again forever.
            offset += _BATCH

    def _summaries(self, refs: Sequence[str]) -> list[TaskSummary | None]:
        """The listing fields of each task (``None``: no such record any more, it expired)."""
        commands: list[Queue] = [_hmget(self._keys.task(ref), _LIST_FIELDS) for ref in refs]

        def parse(replies: list[Any]) -> list[TaskSummary | None]:
            return [self._summary(ref, values) for ref, values in zip(refs, replies, strict=True)]

        return self._store.pipeline(PipelineCall(commands, parse))

    def _summary(self, ref: str, values: list[str | None]) -> TaskSummary | None:
        h = dict(zip(_LIST_FIELDS, values, strict=True))
        if not h["status"]:
            return None
        return TaskSummary(
            ref=ref,
            status=TaskStatus(h["status"]),
            tool=h["tool"] or "",
            owner=h["owner"] or "",
            created_ms=int(h["created_ms"] or 0),
            updated_ms=int(h["updated_ms"] or 0),
            parked=h["parked"] == "1",
            runs=int(h["runs"] or 0),
            message=self._open(ref, "msg", h["msg"] or ""),
        )

    def _open(self, ref: str, name: str, raw: str) -> Any:
        """A task field, opened if it is a payload; ``UNREADABLE`` if it does not open."""
        if name not in TASK_FIELDS or not raw:
            return raw
        key = self._keys.task(ref)
        try:
            if name in TEXT_FIELDS:
                return self._payloads.open_text(raw, key, name)
            return self._payloads.load(raw, key, name)
        except UnreadablePayload:
            return UNREADABLE

    # -- one task ------------------------------------------------------------------------------
    def resolve(self, ref: str) -> str:
        """The full ref of ``ref``: itself when it is one, else the one unfinished task whose ref
        starts with it (logs show 12 hex digits of it). Raises :class:`AdminError` otherwise."""
        ref = ref.strip().lower()
        if _REF.fullmatch(ref):
            return ref
        if not _REF_PREFIX.fullmatch(ref):
            raise AdminError(f"not a task ref (32 hex digits, or the first 6 or more): {ref!r}")
        # A walk of the unfinished tasks' index, a batch per round trip: finished tasks are
        # not indexed, and a prefix cannot be looked up any other way.
        walk = heapq.merge(*(self._shard_entries(s.active, None, None) for s in self._shards))
        matches = sorted({r for _, r in walk if r.startswith(ref)})
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AdminError(f"{len(matches)} unfinished tasks have refs starting {ref}: give more")
        raise AdminError(
            f"no unfinished task has a ref starting {ref} (a finished one needs its full ref)"
        )

    def show(self, ref: str) -> TaskDetail | None:
        """Every field of the task ``ref`` and its outstanding input requests; ``None`` when no
        such task is stored (never was, or expired)."""
        task_key, inputs_key = self._keys.task(ref), self._keys.inputs(ref)
        commands: list[Queue] = [lambda p: p.hgetall(task_key), lambda p: p.hgetall(inputs_key)]
        stored, inputs = self._store.pipeline(PipelineCall(commands, lambda replies: replies))
        if not stored:
            return None
        opened = {name: self._open(ref, name, raw) for name, raw in sorted(stored.items())}
        requests: dict[str, Any] = {}
        for name, raw in sorted(inputs.items()):
            try:
                requests[name] = self._payloads.load(raw, inputs_key, name)
            except UnreadablePayload:
                requests[name] = UNREADABLE
        return TaskDetail(ref, opened, requests, self.now_ms())

    def cancel(self, ref: str) -> Cancelled:
        """Cancel the task as its owner would (``cancel.lua``: the same transition as
        ``tasks/cancel``, which wakes and stops its run); the caller revokes its queued Celery
        message. NOTFOUND when no such task is stored."""
        # The owner never changes once a task exists, and the script compares it again: a task
        # that expires between the two round trips reads as NOTFOUND, never as someone else's.
        owner = self._store.pipeline(
            PipelineCall([_hget(self._keys.task(ref), "owner")], lambda replies: replies[0])
        )
        if owner is None:
            return Cancelled(Reply.NOTFOUND)
        cancel = client_calls.cancel(self._keys, ref, str(owner), *self._message(ref))
        return self._store.run(cancel)

    def _message(self, ref: str) -> tuple[str, Payloads]:
        """The cancel's status message and the payloads that seal it. Without data keys
        (``MCPQ_DATA_KEYS`` unset here) nothing can be sealed: the task is cancelled without a
        message (an empty message is stored as it is, sealed or not)."""
        try:
            self._payloads.field(ref, "msg", CANCEL_MESSAGE)
        except DataKeyError:
            return "", Payloads(None, self._keys)
        return CANCEL_MESSAGE, self._payloads


def _other_walks(cursor: str, scans: bool) -> bool:
    """Whether ``cursor`` is a well-formed cursor of the other walk (a listing's cursor handed
    to one with other ``--state`` options): said as such rather than "not a cursor"."""
    if scans:
        return Position.is_cursor(cursor)
    try:
        ScanPosition.parse(cursor)
    except ScanCursorError:
        return False
    return True


def _index_window(
    index: str, low: int | None, high: int | None, offset: int, size: int
) -> PipelineCall[list[tuple[int, str]]]:
    def command(p: Any) -> Any:
        lo = "-inf" if low is None else str(low)
        hi = "+inf" if high is None else str(high)
        return p.zrangebyscore(index, lo, hi, start=offset, num=size, withscores=True)

    return PipelineCall(
        [command], lambda replies: [(int(score), str(ref)) for ref, score in replies[0]]
    )


def _hmget(key: str, names: Sequence[str]) -> Queue:
    return lambda p: p.hmget(key, list(names))


def _hget(key: str, name: str) -> Queue:
    return lambda p: p.hget(key, name)


def open_admin(settings: Settings) -> TaskAdmin:
    """The operator's access to the store of ``settings`` (``REDIS_URL``, ``MCPQ_STORE_SHARDS``,
    ``MCPQ_DATA_KEYS``). Raises ``DataKeyError`` when ``MCPQ_DATA_KEYS`` is malformed."""
    keys, payloads = store_keys(settings), payloads_of(settings)
    client = sync_client(settings)
    store = TaskStore(client, keys, payloads, max_runs=settings.max_runs)
    return TaskAdmin(store, keys, payloads, client)
