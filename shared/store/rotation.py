"""``mcpq keys rotate-data``: every sealed payload of the deployment re-encrypted under the
current key (the first of ``MCPQ_DATA_KEYS``), so the older keys can then be dropped.

It walks the store's keys with ``SCAN`` (a batch at a time: Redis serves traffic in between),
reads each hash that holds payloads (tasks, their inputs, answers and steps, sessions), seals
again every value not under the current key (plain values written before encryption too) and
writes them back with ``reseal.lua``: each only if it is still the value that was read, so a
concurrent write (a run finishing, a client answering) always wins over the walk. Safe while the
deployment serves traffic, and re-runnable: a second walk finds nothing left to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import redis

from mcpq.shared.sealing import Unsealable
from mcpq.shared.store.call_types import ScriptCall
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import SESSION_FIELDS, TASK_FIELDS, Payloads

#: Hashes below a task whose every value is a payload.
_TASK_HASHES = (":in", ":ans", ":steps")


@dataclass
class Rotation:
    """What a walk did: task hashes seen, values re-encrypted, values skipped because they
    changed meanwhile, values that do not open with any configured key (left as they are)."""

    tasks: int = 0
    resealed: int = 0
    changed: int = 0
    unreadable: int = 0

    def summary(self) -> str:
        line = (
            f"{self.tasks} tasks seen, {self.resealed} values re-encrypted, "
            f"{self.changed} skipped because they changed meanwhile"
        )
        if self.unreadable:
            line += f", {self.unreadable} sealed with a key MCPQ_DATA_KEYS does not hold"
        return line


def _glob(text: str) -> str:
    """``text`` as a literal SCAN pattern (the prefix's braces are glob syntax)."""
    return "".join(f"[{c}]" if c in "[]{}*?\\" else c for c in text)


def sealed_fields(keys: Keys, key: str) -> tuple[str, ...] | None:
    """Which fields of the hash at ``key`` hold payloads: ``()`` for all of them, ``None`` for
    a key that holds none."""
    prefixes = [(shard.task_prefix, TASK_FIELDS) for shard in keys.all_shards]
    for prefix, fields in [*prefixes, (keys.session(""), SESSION_FIELDS)]:
        if key.startswith(prefix):
            rest = key[len(prefix) :]
            if ":" not in rest:
                return fields
            if fields is TASK_FIELDS and rest[rest.index(":") :] in _TASK_HASHES:
                return ()
    return None


def scan(client: redis.Redis, keys: Keys, batch: int) -> Iterator[list[str]]:
    """The store's payload-holding keys (tasks and what hangs off them, sessions), in batches:
    every shard's (``scan_iter``: every primary's, on a cluster)."""
    prefixes = [shard.task_prefix for shard in keys.all_shards] + [keys.session("")]
    for prefix in prefixes:
        found: list[str] = []
        for key in client.scan_iter(match=_glob(prefix) + "*", count=batch):
            found.append(str(key))
            if len(found) >= batch:
                yield found
                found = []
        if found:
            yield found


def _reseal_call(key: str, triples: list[str]) -> ScriptCall[int]:
    return ScriptCall("reseal", [key], triples, int)


def plan(
    payloads: Payloads, keys: Keys, stored: dict[str, dict[str, str]], report: Rotation
) -> list[ScriptCall[int]]:
    """The compare-and-set writes for the hashes ``stored`` (key -> fields as read)."""
    writes = []
    for key, h in stored.items():
        wanted = sealed_fields(keys, key)
        if wanted is None:
            continue
        if wanted == TASK_FIELDS:
            report.tasks += 1
        triples: list[str] = []
        for name, raw in h.items():
            if wanted and name not in wanted:
                continue
            try:
                new = payloads.reseal(raw, key, name)
            except Unsealable:
                report.unreadable += 1
                continue
            if new is not None:
                triples += [name, raw, new]
        if triples:
            writes.append(_reseal_call(key, triples))
    return writes
