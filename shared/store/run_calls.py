"""A worker's run as store calls: claim, renew, report, ask for input, park, finish, release,
save a step; and its recovery: the sweeper's sweep and the lock it holds. Every write but the
claim is fenced by the run's generation (``_prelude.lua``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcpq.shared.store.call_types import Arg, ScriptCall, as_dict, reply_code
from mcpq.shared.store.keyspace import Keys, Shard
from mcpq.shared.store.payloads import PLAIN, Payloads, UnreadablePayload
from mcpq.shared.store.records import TaskRecord
from mcpq.shared.store.states import Reply, TaskStatus


@dataclass(frozen=True)
class Claim:
    """``claim``: OK with the run's generation, the task and its delivered answers; else why not
    (GONE, TERMINAL, BUSY, PARKED). ``answers`` are as stored (sealed: a run reads them opened
    through ``request_input``). ``unreadable``: claimed (``gen`` holds), but the task's payloads
    do not open with this process's ``MCPQ_DATA_KEYS`` (``record`` is ``None``)."""

    reply: Reply
    gen: int = 0
    record: TaskRecord | None = None
    answers: dict[str, str] | None = None
    unreadable: bool = False


@dataclass(frozen=True)
class Renewal:
    """``renew``: OK (lease extended) or TERMINAL with the task's status; GONE, SUPERSEDED or
    PARKED (the run let go of the task) with none."""

    reply: Reply
    status: TaskStatus | None = None


@dataclass(frozen=True)
class InputPoll:
    """``request_input``: the answers known so far and how many are still missing."""

    reply: Reply
    missing: int = 0
    answers: dict[str, Any] | None = None


@dataclass(frozen=True)
class Due:
    """A run the sweeper must enqueue again, or (``poisoned``) a task it must fail instead:
    its runs lost their worker ``MCPQ_MAX_RUNS`` times. ``gen``: the generation found, which
    fences that failure (a run that claimed the task since wins)."""

    ref: str
    tool: str
    queue: str
    poisoned: bool = False
    gen: int = dataclasses.field(default=0, compare=False)


def _parse_claim(ref: str, payloads: Payloads) -> Callable[[list[Any]], Claim]:
    def parse(reply: list[Any]) -> Claim:
        if reply[0] != Reply.OK:
            return Claim(reply_code(reply))
        gen = int(reply[1])
        try:
            record = TaskRecord.from_hash(ref, as_dict(reply[2]), payloads)
        except UnreadablePayload:
            # The claim happened (this run holds the lease until it expires): the runner
            # leaves it to expire unrun, a lost run that MCPQ_MAX_RUNS bounds (workers/runner.py).
            return Claim(Reply.OK, gen, unreadable=True)
        return Claim(Reply.OK, gen, record, as_dict(reply[3]))

    return parse


def claim(
    k: Keys,
    ref: str,
    lease_ms: int,
    payloads: Payloads = PLAIN,
    *,
    max_lost: int = 0,
    peers: int = 0,
    excuse_ms: int = 0,
    alone: bool = True,
) -> ScriptCall[Claim]:
    """``max_lost``: a task whose runs lost their worker that often is not run again
    (POISONED; the sweeper fails it); 0: no limit. ``peers``: the other runs the claiming
    process holds; ``alone``: nothing else will run in the run's process (a task that must run
    alone answers SOLO otherwise);
    ``excuse_ms``: when the claiming process last found the store unreachable (``judge_loss``
    in ``_prelude.lua``)."""
    shard = k.at(ref)
    keys = [k.task(ref), k.answers(ref), shard.leases, shard.unclaimed]
    args: list[Arg] = [ref, lease_ms, max_lost, peers, excuse_ms, 1 if alone else 0]
    return ScriptCall("claim", keys, args, _parse_claim(ref, payloads))


def lost_alone(k: Keys, ref: str) -> ScriptCall[bool]:
    return ScriptCall("lost_alone", [k.task(ref)], [], lambda r: int(r) == 1)


def _parse_renewal(reply: list[Any]) -> Renewal:
    # NOTE: a round parses one of these per held run, twice a second: 10,000 runs made the
    # enums' own lookups (``Reply(...)``, ``TaskStatus(...)``) a tenth of the keeper's time.
    # The common answers come from a table; anything else takes the enums' way (and error).
    known = _RENEWALS.get((reply[0], reply[1]) if len(reply) > 1 else (reply[0], None))
    if known is not None:
        return known
    return Renewal(reply_code(reply), TaskStatus(reply[1]) if len(reply) > 1 else None)


#: Every well-formed renewal answer, made once (``Renewal`` is frozen: shared safely).
_RENEWALS: dict[tuple[str, str | None], Renewal] = {
    (reply.value, status.value if status is not None else None): Renewal(reply, status)
    for reply in Reply
    for status in (None, *TaskStatus)
}


#: Runs renewed in one call of the script at most: 10,000 at once would hold Redis for tens of
#: milliseconds; a round sends its calls in one pipeline anyway.
RENEW_CHUNK = 500


def renew(k: Keys, ref: str, gen: int, lease_ms: int, peers: int = 0) -> ScriptCall[Renewal]:
    """``peers``: the other runs the renewing process holds (what a lapse of this lease would
    say about the tool: ``judge_loss`` in ``_prelude.lua``)."""
    one = renew_shard(k, [(ref, gen)], lease_ms, peers)
    return ScriptCall(one.script, one.keys, one.args, lambda reply: _parse_renewal(reply[0]))


def renew_shard(
    k: Keys, runs: Sequence[tuple[str, int]], lease_ms: int, peers: int = 0
) -> ScriptCall[list[Renewal]]:
    """Many runs of one shard (at most :data:`RENEW_CHUNK`), one renewal each, in their order."""
    shard = k.at(runs[0][0])
    prefix = shard.task_prefix  # (``k.task(ref)``, the shard looked up once: all are of it)
    keys = [shard.unclaimed]  # the due index: leases and start-by deadlines
    keys += [prefix + ref for ref, _ in runs]
    args: list[Arg] = [lease_ms, peers]
    for ref, gen in runs:
        args += (ref, gen)
    return ScriptCall("renew", keys, args, _parse_renewals)


def _parse_renewals(reply: list[Any]) -> list[Renewal]:
    return [_parse_renewal(r) for r in reply]


def report(
    k: Keys,
    ref: str,
    gen: int,
    message: str | None,
    payloads: Payloads = PLAIN,
    count: int = 1,
    at_ms: int | None = None,
    *,
    progress: float | None = None,
    total: float | None = None,
    logs: Sequence[Any] = (),
    first_log: int = 1,
) -> ScriptCall[Reply]:
    """``message`` None (``count`` then 0): no status, only ``logs`` (each a JSON value,
    sealed as the task's field ``log``; numbered from ``first_log``)."""
    if message is None:
        sealed, count = "", 0
    else:
        sealed = payloads.field(ref, "msg", message)
    at = "" if at_ms is None else at_ms
    numbers = [_number(progress), _number(total)]
    entries = [payloads.field(ref, "log", entry) for entry in logs]
    args: list[Arg] = [gen, sealed, count, at, *numbers, first_log, *entries]
    return ScriptCall("report", [k.task(ref)], args, reply_code)


def _number(value: float | None) -> str:
    """A progress number for ARGV: ``repr`` round-trips a float exactly; '' for none."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _parse_poll(k: Keys, ref: str, payloads: Payloads) -> Callable[[list[Any]], InputPoll]:
    def parse(reply: list[Any]) -> InputPoll:
        if reply[0] != Reply.OK:
            return InputPoll(reply_code(reply))
        answers = payloads.load_entries(k.answers(ref), as_dict(reply[2:]))
        return InputPoll(Reply.OK, int(reply[1]), answers)

    return parse


def request_input(
    k: Keys, ref: str, gen: int, requests: dict[str, Any], payloads: Payloads = PLAIN
) -> ScriptCall[InputPoll]:
    # Every key the run asks for goes in, answered or not: the script answers the ones it has
    # (a replay is never asked twice) and adds only the missing ones. Each request is sealed
    # for the inputs hash, under its key; the script only stores it (HSETNX), never reads it.
    flat = payloads.dump_entries(k.inputs(ref), requests)
    keys = [k.task(ref), k.inputs(ref), k.answers(ref), k.at(ref).stats]
    return ScriptCall("request_input", keys, [gen, *flat], _parse_poll(k, ref, payloads))


def park(k: Keys, ref: str, gen: int) -> ScriptCall[Reply]:
    keys = [k.task(ref), k.inputs(ref), k.at(ref).unclaimed, k.at(ref).stats]
    return ScriptCall("park", keys, [ref, gen], reply_code)


def finish(
    k: Keys,
    ref: str,
    gen: int,
    status: TaskStatus,
    payload: dict[str, Any],
    message: str,
    payloads: Payloads = PLAIN,
    *,
    poisoned: bool = False,
    count: bool = True,
) -> ScriptCall[tuple[Reply, str]]:
    """The reply, and the task's tool when the caller counts the outcome (``count`` False:
    ``mcpq.shared.store.tally``; else ``''``, the script counts it). ``poisoned``: the sweeper fails
    a task whose runs kept losing their worker (also counted as ``poisoned:<tool>``)."""
    status = TaskStatus(status)
    if status not in {TaskStatus.COMPLETED, TaskStatus.FAILED}:
        raise ValueError(f"a run finishes completed or failed, not {status}")
    field = "result" if status is TaskStatus.COMPLETED else "error"
    shard = k.at(ref)
    keys = [k.task(ref), k.inputs(ref), k.wake(ref), shard.unclaimed]
    # The stats hash is always a script's last key: _prelude.lua's stat() writes KEYS[#KEYS].
    keys += [shard.active, shard.stats]
    sealed = payloads.field(ref, field, payload)
    args: list[Arg] = [ref, gen, status.value, field, sealed, payloads.field(ref, "msg", message)]
    args += ["poisoned" if poisoned else "", "1" if count else ""]

    def parse(reply: Any) -> tuple[Reply, str]:
        if isinstance(reply, list):  # {'OK', tool}: the caller counts
            return Reply(str(reply[0])), str(reply[1])
        return reply_code(reply), ""

    return ScriptCall("finish", keys, args, parse)


def release(k: Keys, ref: str, gen: int) -> ScriptCall[Reply]:
    shard = k.at(ref)
    return ScriptCall(
        "release", [k.task(ref), shard.leases, shard.unclaimed], [ref, gen], reply_code
    )


@dataclass(frozen=True)
class StepStart:
    """``begin_step``: OK with the memoized value (``found``) or leave to call ``fn`` (the run
    holds the task, its lease live); else why not (GONE, TERMINAL, SUPERSEDED)."""

    reply: Reply
    found: bool = False
    value: Any = None


def begin_step(
    k: Keys, ref: str, gen: int, name: str, lease_ms: int, payloads: Payloads = PLAIN
) -> ScriptCall[StepStart]:
    """The fenced read before a step's ``fn``: the memo, and proof the run still holds the task."""
    key = k.steps(ref)

    def parse(r: list[str]) -> StepStart:
        reply = reply_code(r)
        if reply is not Reply.OK:
            return StepStart(reply)
        if r[1] != "1":
            return StepStart(reply)
        return StepStart(reply, True, payloads.load(r[2], key, name))

    keys = [k.task(ref), key, k.at(ref).unclaimed]
    return ScriptCall("begin_step", keys, [ref, gen, name, lease_ms], parse)


def save_step(
    k: Keys, ref: str, gen: int, name: str, value: Any, payloads: Payloads = PLAIN
) -> ScriptCall[tuple[Reply, Any]]:
    key = k.steps(ref)

    def parse(r: list[str]) -> tuple[Reply, Any]:
        reply = reply_code(r)
        # The value stored first (HSETNX): maybe another run's, sealed under its own nonce.
        return (reply, payloads.load(r[1], key, name) if reply is Reply.OK else None)

    args: list[Arg] = [gen, name, payloads.dump(value, key, name)]
    return ScriptCall("save_step", [k.task(ref), k.steps(ref)], args, parse)


def sweep(
    shard: Shard,
    unclaimed_ms: int,
    batch: int,
    max_lost: int = 0,
    lease_ms: int = 0,
    excuse_ms: int = 0,
) -> ScriptCall[list[Due]]:
    """One shard's sweep (its indexes and, undeclared, its task hashes: all on its slot).
    ``max_lost``: lost runs after which a task is returned poisoned (0: never); ``lease_ms``,
    ``excuse_ms``: the deployment's lease, and when the sweeping process last found the store
    unreachable (what a lapsed lease says about its tool: ``judge_loss`` in ``_prelude.lua``)."""

    def parse(r: list[str]) -> list[Due]:
        return [
            Due(r[i], r[i + 1], r[i + 2], r[i + 4] == "1", int(r[i + 3] or 0))
            for i in range(0, len(r), 5)
        ]

    keys = [shard.leases, shard.unclaimed, shard.active, shard.expiry]
    args: list[Arg] = [shard.task_prefix, unclaimed_ms, batch, max_lost, lease_ms, excuse_ms]
    return ScriptCall("sweep", keys, args, parse)


def unlock(k: Keys, name: str, token: str) -> ScriptCall[bool]:
    return ScriptCall("unlock", [k.lock(name)], [token], lambda r: int(r) == 1)
