"""The script calls of a client's read of a task (``tasks/get``) and of a watcher's marks (see
``publish`` in ``lua/_prelude.lua``), built like every call in ``shared.store.calls``."""

from __future__ import annotations

from collections.abc import Sequence

from shared.store.calls import ScriptCall
from shared.store.keys import Keys
from shared.store.records import POLL_FIELDS


def read(
    k: Keys, ref: str, owner: str, *, watching: bool = False, call: bool = False
) -> ScriptCall[tuple[dict[str, str], dict[str, str]] | None]:
    """The task's fields and its outstanding inputs, or ``None`` (unknown, or not ``owner``'s:
    the script does not tell them apart, in its reply or its work). ``watching``: the caller
    is subscribed to the task's changes (``AsyncTaskStore.watch``); from this read on they are
    pushed to it (see ``publish`` in ``lua/_prelude.lua``). ``call``: the call's own fields
    too (arguments, capabilities, pre-answers); a poll leaves them in Redis."""

    def pairs(flat: list[str]) -> dict[str, str]:
        return dict(zip(flat[::2], flat[1::2], strict=True))

    def parse(r: list[list[str]]) -> tuple[dict[str, str], dict[str, str]] | None:
        return (pairs(r[0]), pairs(r[1])) if r else None

    args = [owner, "1" if watching else "", "1" if call else "", *(() if call else POLL_FIELDS)]
    return ScriptCall("read", [k.task(ref), k.inputs(ref)], args, parse)


def mark_watched(k: Keys, refs: Sequence[str]) -> list[ScriptCall[int]]:
    """Mark tasks ``refs`` watched (their changes are pushed from now on): one script per shard,
    since a script touches the keys of one slot. A ref whose task is gone is skipped."""
    by_shard: dict[int, list[str]] = {}
    for ref in refs:
        by_shard.setdefault(k.at(ref).index, []).append(k.task(ref))
    return [ScriptCall("watch", keys, [], int) for keys in by_shard.values()]
