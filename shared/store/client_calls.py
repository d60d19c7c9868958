"""A client's calls on its task, as store calls: the read of ``tasks/get`` and a watcher's marks
(see ``publish`` in ``lua/_prelude.lua``), answers (``tasks/update``) and a cancel."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcpq.shared.store.call_types import PipelineCall, Queue, ScriptCall, as_dict, reply_code
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import PLAIN, Payloads, UnreadablePayload
from mcpq.shared.store.records import LOG_KEEP, POLL_FIELDS
from mcpq.shared.store.states import Reply


@dataclass(frozen=True)
class Answered:
    """``answer``: NOTFOUND, IGNORED, PARTIAL, WOKEN, or RESUME with where to enqueue the run."""

    reply: Reply
    tool: str = ""
    queue: str = ""


@dataclass(frozen=True)
class Cancelled:
    """``cancel``: CANCELLED (``running``: a worker held a live lease), TERMINAL or NOTFOUND."""

    reply: Reply
    running: bool = False
    #: The create's traceparent (empty when untraced): the cancelling request's span links to it.
    trace: str = ""


def read(
    k: Keys, ref: str, owner: str, *, watching: bool = False, call: bool = False
) -> ScriptCall[tuple[dict[str, str], dict[str, str]] | None]:
    """The task's fields and its outstanding inputs, or ``None`` (unknown, or not ``owner``'s:
    the script does not tell them apart, in its reply or its work). ``watching``: the caller
    is subscribed to the task's changes (``AsyncTaskStore.watch``); from this read on they are
    pushed to it (see ``publish`` in ``lua/_prelude.lua``). ``call``: the call's own fields
    too (arguments, capabilities, pre-answers); a poll leaves them in Redis."""

    def parse(r: list[list[str]]) -> tuple[dict[str, str], dict[str, str]] | None:
        return (as_dict(r[0]), as_dict(r[1])) if r else None

    args = [owner, "1" if watching else "", "1" if call else "", *(() if call else POLL_FIELDS)]
    return ScriptCall("read", [k.task(ref), k.inputs(ref)], args, parse)


def mark_watched(k: Keys, refs: Sequence[str]) -> list[ScriptCall[int]]:
    """Mark tasks ``refs`` watched (their changes are pushed from now on): one script per shard,
    since a script touches the keys of one slot. A ref whose task is gone is skipped."""
    by_shard: dict[int, list[str]] = {}
    for ref in refs:
        by_shard.setdefault(k.at(ref).index, []).append(k.task(ref))
    return [ScriptCall("watch", keys, [], int) for keys in by_shard.values()]


def _parse_answered(reply: list[Any]) -> Answered:
    return Answered(reply_code(reply), *(str(x) for x in reply[1:3]))


def answer(
    k: Keys,
    ref: str,
    owner: str,
    answers: dict[str, Any],
    unclaimed_ms: int,
    payloads: Payloads = PLAIN,
) -> ScriptCall[Answered]:
    # Sealed for the answers hash: answer.lua stores each value as it is (HSET by key), and
    # request_input.lua hands it back to the run, which opens it.
    flat = payloads.dump_entries(k.answers(ref), answers)
    shard = k.at(ref)
    keys = [k.task(ref), k.inputs(ref), k.answers(ref), k.wake(ref), shard.unclaimed, shard.stats]
    return ScriptCall("answer", keys, [owner, ref, unclaimed_ms, *flat], _parse_answered)


def _parse_cancelled(reply: list[Any]) -> Cancelled:
    running = len(reply) > 1 and int(reply[1]) == 1
    return Cancelled(reply_code(reply), running, str(reply[2]) if len(reply) > 2 else "")


def cancel(
    k: Keys, ref: str, owner: str, message: str, payloads: Payloads = PLAIN
) -> ScriptCall[Cancelled]:
    shard = k.at(ref)
    keys = [k.task(ref), k.inputs(ref), k.wake(ref), shard.unclaimed]
    keys += [shard.active, shard.stats]
    sealed = payloads.field(ref, "msg", message)
    return ScriptCall("cancel", keys, [owner, ref, sealed], _parse_cancelled)


def read_logs(
    k: Keys, ref: str, after: int, upto: int, payloads: Payloads = PLAIN
) -> PipelineCall[list[Any]]:
    """A synchronous call's log messages numbered ``after`` + 1 to ``upto`` that its task still
    keeps (``records.LOG_KEEP``), opened, in order; one that does not open (sealed under a key
    since retired) is left out: a log line is not worth failing a call's stream for."""
    first = max(after + 1, upto - LOG_KEEP + 1)
    key, names = k.task(ref), [f"log:{n}" for n in range(first, upto + 1)]

    def parse(replies: list[Any]) -> list[Any]:
        opened = []
        for raw in replies[0]:
            if raw:
                with contextlib.suppress(UnreadablePayload):
                    opened.append(payloads.load(raw, key, "log"))
        return opened

    commands: list[Queue] = [lambda p: p.hmget(key, names)]
    return PipelineCall(commands, parse)
