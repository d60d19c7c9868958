"""``tasks/list`` (the 2025-11-25 wire): a scope's tasks, oldest first, one page at a time.

A scope is an index of the tasks one principal (or one anonymous session) created over that
wire, with their taskIds. Pages are cut by a cursor naming the last entry shown
(``createdAt`` and ref), so a task created while a client pages through never shifts a page.
Entries whose task has expired leave the index when a page finds them. :class:`TaskListing` is
the web tier's face on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpq.shared.store.call_types import PipelineCall, Queue, ScriptCall
from mcpq.shared.store.clock import RedisClock
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.plans import Plan, ScriptPlans
from mcpq.shared.store.records import TaskRecord

if TYPE_CHECKING:
    from mcpq.shared.store.async_driver import AsyncDriver

#: Entries read per page beyond the page size, to step over tasks that are gone.
_SLACK = 50


@dataclass(frozen=True)
class Listed:
    task_id: str
    record: TaskRecord


@dataclass(frozen=True)
class Position:
    """Where a page ended: the last entry shown."""

    created_ms: int
    ref: str


def add(
    k: Keys, scope: str, ref: str, task_id: str, created_ms: int, ttl_ms: int | None
) -> ScriptCall[None]:
    return ScriptCall(
        "list_add",
        [k.listing(scope), k.listing_ids(scope), k.task(ref)],
        [ref, task_id, created_ms, "" if ttl_ms is None else ttl_ms, k.listing_events(scope)],
        lambda reply: None,
    )


def window(
    k: Keys, scope: str, after: Position | None, size: int
) -> PipelineCall[list[tuple[str, int]]]:
    """Candidate entries after ``after`` (ref, createdAt), in index order."""
    low = "-inf" if after is None else str(after.created_ms)
    key = k.listing(scope)

    def parse(replies: list[Any]) -> list[tuple[str, int]]:
        found = [(str(ref), int(score)) for ref, score in replies[0]]
        if after is None:
            return found
        # Same createdAt: Redis orders members by ref, so "after" is (score, ref) order.
        return [(r, s) for r, s in found if (s, r) > (after.created_ms, after.ref)]

    def command(p: Any) -> Any:
        return p.zrangebyscore(key, low, "+inf", start=0, num=size + _SLACK, withscores=True)

    return PipelineCall([command], parse)


def _hgetall(key: str) -> Queue:
    return lambda p: p.hgetall(key)


def read(
    k: Keys, scope: str, refs: list[str], payloads: Payloads = PLAIN
) -> PipelineCall[tuple[list[Listed], list[str]]]:
    """The tasks and ids of ``refs`` in order, and the refs whose task is gone."""
    ids_key = k.listing_ids(scope)
    commands: list[Queue] = [lambda p: p.hmget(ids_key, refs)] if refs else []
    commands += [_hgetall(k.task(ref)) for ref in refs]

    def parse(replies: list[Any]) -> tuple[list[Listed], list[str]]:
        if not refs:
            return [], []
        ids, hashes = replies[0], replies[1:]
        listed, gone = [], []
        for ref, task_id, h in zip(refs, ids, hashes, strict=True):
            if h and task_id:
                listed.append(Listed(str(task_id), TaskRecord.from_hash(ref, h, payloads)))
            else:
                gone.append(ref)
        return listed, gone

    return PipelineCall(commands, parse)


def forget(k: Keys, scope: str, refs: list[str]) -> PipelineCall[None]:
    commands: list[Queue] = [
        lambda p: p.zrem(k.listing(scope), *refs),
        lambda p: p.hdel(k.listing_ids(scope), *refs),
    ]
    return PipelineCall(commands if refs else [], lambda replies: None)


def read_page(
    k: Keys, scope: str, owner: str, after: Position | None, size: int, payloads: Payloads = PLAIN
) -> Plan[tuple[list[Listed], Position | None]]:
    """Up to ``size`` live tasks of ``scope`` after ``after``, and the position to go on from
    (``None`` at the end). Entries whose task is gone are dropped on the way."""
    found_page: list[Listed] = []
    while len(found_page) < size:
        candidates = yield window(k, scope, after, size)
        if not candidates:
            return found_page, None
        refs = [ref for ref, _ in candidates]
        found, gone = yield read(k, scope, refs, payloads)
        if gone:
            yield forget(k, scope, gone)
        for item in found:
            if item.record.owner == owner and len(found_page) < size:
                found_page.append(item)
        last = found_page[-1].record if len(found_page) == size else None
        if last is not None:
            return found_page, Position(last.created_ms, last.ref)
        ref, created = candidates[-1]
        after = Position(created, ref)
    return found_page, None


class TaskListing:
    """The ``tasks/list`` scopes: a task listed when created, one task looked up, a page."""

    def __init__(self, io: AsyncDriver, keys: Keys, payloads: Payloads = PLAIN) -> None:
        self._io, self._keys, self._payloads = io, keys, payloads
        self._scripts = ScriptPlans(RedisClock())  # (its one script does not read the clock)

    async def add(
        self, scope: str, ref: str, task_id: str, created_ms: int, ttl_ms: int | None
    ) -> None:
        call = add(self._keys, scope, ref, task_id, created_ms, ttl_ms)
        await self._io.drive(self._scripts.run(call))

    async def listed(self, scope: str, ref: str, owner: str) -> Listed | None:
        """One task of a listing scope with its id, or ``None`` when it is gone or not there."""
        found, _ = await self._io.pipeline(read(self._keys, scope, [ref], self._payloads))
        return found[0] if found and found[0].record.owner == owner else None

    async def page(
        self, scope: str, owner: str, after: Position | None, size: int
    ) -> tuple[list[Listed], Position | None]:
        """See :func:`read_page`."""
        plan = read_page(self._keys, scope, owner, after, size, self._payloads)
        return await self._io.drive(plan)
