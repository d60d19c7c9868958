"""The walk behind ``mcpq tasks list`` when finished tasks are asked for: every task record,
found with ``SCAN``.

Finished tasks are in no index (they leave ``active`` when they end), and none is added for
them: an index entry would cost every task a Redis command on its create and finish, the hot
path. So a listing that includes a finished state reads the records themselves: one ``SCAN``
walk per shard, shard after shard, on the node that holds the shard's slot (a Redis Cluster's
primary of it; the one server otherwise), with ``MATCH`` on the shard's task keys
(``<tag>:t:<32 hex>``: not the ``:in``/``:ans``/``:steps`` hashes hanging off them) and
``TYPE hash``. Each batch's listing fields are read with ``HMGET`` in one pipelined round trip.
Nothing is written: a walk costs reads only, a batch per round trip, so Redis serves traffic in
between.

Order: ``SCAN`` has none, so such a listing comes in storage order (shard, then hash-table
order), not by age. Within a batch, tasks are taken in ``ref`` order, which lets a page end in
the middle of a batch: its cursor names the shard, the ``SCAN`` cursor the batch was read from,
the cursor that batch ended on and the last ref shown. The next page reads that batch again and
skips the refs up to that one, provided the batch ends on the same cursor (the keyspace did not
change under it); if it does not, the batch is taken whole, so a task may be listed twice but
none that lived through the walk is missed (``SCAN``'s own guarantee: at least once).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import redis.cluster

from mcpq.shared.store.keyspace import Keys, Shard
from mcpq.shared.store.redis_errors import store_errors

#: ``SCAN``'s COUNT: keys a node looks at per call (a hint; Redis walks whole buckets). A page
#: that resumes inside a batch reads it again with the same COUNT, so this is part of what a
#: cursor means: changing it only costs a repeated or re-read batch on a page in flight.
SCAN_COUNT = 300
_SCAN_CURSOR = re.compile(r"scan\.(\d{1,5})\.(\d{1,20})(?:\.(\d{1,20})\.([0-9a-f]{32}))?")
_HEX32 = "[0-9a-f]" * 32


class ScanCursorError(ValueError):
    """Text that is not a cursor of a scanning listing."""


@dataclass(frozen=True)
class ScanPosition:
    """Where a scanning listing goes on: shard ``shard``'s ``SCAN`` from ``cursor``. When a page
    ended inside that batch, ``end`` is the cursor the batch ended on and ``after`` the last ref
    shown of it. As text: ``scan.<shard>.<cursor>[.<end>.<after>]``."""

    shard: int = 0
    cursor: int = 0
    end: int = 0
    after: str = ""

    def __str__(self) -> str:
        base = f"scan.{self.shard}.{self.cursor}"
        return f"{base}.{self.end}.{self.after}" if self.after else base

    @classmethod
    def parse(cls, text: str) -> ScanPosition:
        found = _SCAN_CURSOR.fullmatch(text.strip())
        if found is None:
            raise ScanCursorError(text)
        shard, cursor, end, after = found.groups()
        return cls(int(shard), int(cursor), int(end or 0), after or "")


def _literal(text: str) -> str:
    """``text`` as a literal ``MATCH`` pattern (a shard tag's braces, a prefix's ``*``)."""
    return "".join(f"[{c}]" if c in "[]{}*?\\" else c for c in text)


def task_pattern(shard: Shard) -> str:
    """``MATCH`` for the task hashes of ``shard`` and nothing else: exactly 32 hex digits after
    the prefix, so ``<tag>:t:<ref>:in`` (and ``:ans``, ``:steps``) never match."""
    return _literal(shard.task_prefix) + _HEX32


def scan_refs(client: redis.Redis, keys: Keys, shard: Shard, cursor: int) -> tuple[int, list[str]]:
    """One ``SCAN`` step over ``shard``'s task hashes: the next cursor (0: the shard is done)
    and the refs of this batch, sorted and without repeats."""
    match = task_pattern(shard)
    with store_errors():
        if isinstance(client, redis.cluster.RedisCluster):
            # SCAN names no key: redis-py would send it to every primary. A shard's tasks live
            # in its tag's slot, so on the one node that serves that slot (asked per step: a
            # failover or a resharding moves it).
            node = client.get_node_from_key(shard.active)
            cluster: Any = client
            cursors, found = cluster.scan(
                cursor, match=match, count=SCAN_COUNT, _type="hash", target_nodes=node
            )
            nxt = int(cursors[node.name])
        else:
            nxt, found = client.scan(cursor, match=match, count=SCAN_COUNT, _type="hash")
    refs = set()
    for key in found:
        ref = Keys.ref_of(str(key))
        if keys.task(ref) == key:  # the shard a ref hashes to: anything else is not a task
            refs.add(ref)
    return int(nxt), sorted(refs)


@dataclass(frozen=True)
class Found:
    """A page of a scanning walk: the tasks (summaries of the caller's type) and where the next
    page starts (``None``: the walk is done)."""

    tasks: list[Any]
    next: ScanPosition | None


def walk(
    shards: Sequence[Shard],
    start: ScanPosition,
    limit: int,
    step: Callable[[Shard, int], tuple[int, list[str]]],
    matching: Callable[[list[str]], list[Any]],
) -> Found:
    """Up to ``limit`` tasks from ``start`` on: ``step`` is one ``SCAN`` step of a shard,
    ``matching`` the tasks of a batch's refs that pass the filter, in the refs' order (each
    with a ``ref``). The walk reads on until it finds one task beyond the page, so a page
    whose cursor is not ``None`` is followed by a page that is not empty (while the store does
    not change), as the index listing's pages are."""
    found: list[Any] = []
    shard, cursor = start.shard, start.cursor
    resuming = bool(start.after)
    while shard < len(shards):
        nxt, refs = step(shards[shard], cursor)
        if resuming:
            resuming = False
            # The batch the last page ended in: the same batch only if it ends where it did.
            # Otherwise the keyspace changed under it, and it is read whole (a repeat, never a
            # miss).
            if nxt == start.end:
                refs = [ref for ref in refs if ref > start.after]
        for taken, task in enumerate(matching(refs)):
            if len(found) == limit:
                # ``task`` opens the next page: it resumes in this batch, after the last task
                # shown if that one came from this batch too (``taken`` of it were shown).
                if taken:
                    return Found(found, ScanPosition(shard, cursor, nxt, found[-1].ref))
                return Found(found, ScanPosition(shard, cursor))
            found.append(task)
        cursor = nxt
        if cursor == 0:
            shard += 1
    return Found(found, None)
