"""The task store's operations as data: which script, which KEYS and ARGV, how to read the reply.

The synchronous store (workers) and the asyncio store (web) both execute these, so the
KEYS/ARGV contract of every script is written once, here, beside nothing else. Replies become
typed values here too (:class:`~shared.store.states.Reply`, records): the one edge where Lua's
strings are read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared.jobs import Message
from shared.store.keys import Keys, Shard
from shared.store.payloads import PLAIN, Payloads, UnreadablePayload
from shared.store.records import TaskRecord
from shared.store.states import TERMINAL, Reply, TaskStatus

T = TypeVar("T")
Arg = str | int | float


@dataclass(frozen=True)
class ScriptCall(Generic[T]):
    """One Lua script run: its name, KEYS, ARGV and the parser of its reply."""

    script: str
    keys: Sequence[str]
    args: Sequence[Arg]
    parse: Callable[[Any], T]


Queue = Callable[[Any], Any]
"""One command queued on a pipeline (redis-py's sync and asyncio pipelines queue alike)."""


@dataclass(frozen=True)
class PipelineCall(Generic[T]):
    """Plain (non-script) commands as data: one pipeline, no transaction, and how to read its
    replies. For reads, and for writes that need no condition (the worker heartbeat)."""

    commands: Sequence[Queue]
    parse: Callable[[list[Any]], T]


@dataclass(frozen=True)
class NewTask:
    """What the web tier persists when it creates a task."""

    ref: str
    tool: str
    queue: str
    owner: str
    arguments: dict[str, Any]
    caps: dict[str, Any]
    ttl_ms: int | None
    poll_ms: int
    pre: dict[str, Any] | None = None
    sync: bool = False


@dataclass(frozen=True)
class Admission:
    """What a create must pass besides "the id is new": the principal's quotas and, when a
    task-creating ``requestState`` led to it, that state's single use.

    ``principal_key``: a short hash of the principal (key names never hold the principal
    itself); ``kind``: ``tasks`` or ``sync`` (which set ``max_open`` bounds); 0 turns a limit
    off. ``once``: the state's id, marked used for ``once_ttl_ms`` (its remaining life)."""

    principal_key: str
    kind: str = "tasks"
    max_open: int = 0
    rate_per_s: float = 0.0
    burst: int = 0
    once: str = ""
    once_ttl_ms: int = 0


class Refused(Exception):
    """``create`` was refused: ``limit`` is ``tasks``, ``sync`` or ``rate`` (retry after
    ``retry_ms``), or ``replayed`` (the single-use state was used already)."""

    def __init__(self, limit: str, retry_ms: int = 0) -> None:
        super().__init__(limit)
        self.limit, self.retry_ms = limit, retry_ms


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


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def _flatten(pairs: dict[str, str]) -> list[str]:
    return [item for kv in pairs.items() for item in kv]


def _reply(reply: Any) -> Reply:
    """A script's code, whether it answered a bare string or a table led by one."""
    return Reply(str(reply[0]) if isinstance(reply, list) else str(reply))


def _parse_created(kind: str) -> Callable[[list[Any]], int | None]:
    def parse(reply: list[Any]) -> int | None:
        code = reply[0]
        if code in ("QUOTA", b"QUOTA"):
            raise Refused(kind, int(reply[1]))
        if code in ("RATE", b"RATE"):
            raise Refused("rate", int(reply[1]))
        if code in ("REPLAYED", b"REPLAYED"):
            raise Refused("replayed")
        return int(reply[1]) if int(code) == 1 else None

    return parse


def create(
    k: Keys,
    t: NewTask,
    unclaimed_ms: int,
    admit: Admission | None = None,
    message: Message | None = None,
    start_within_ms: int = 0,
    payloads: Payloads = PLAIN,
    *,
    count: bool = True,
) -> ScriptCall[int | None]:
    """``message``: the run's broker message, pushed in the same script (the broker is this
    Redis); the run must then start within ``start_within_ms``. ``None``: the caller sends it
    and calls :func:`mark_enqueued`. ``count``: the script counts the create in the stats hash
    (else the caller does, once it is created: ``shared.store.tally``).

    A sharded store (``Keys.shards`` > 1) admits a create with :func:`admit` first, on the
    principal's home shard; ``admit`` must be ``None`` here then (this script, on the task's
    shard, cannot touch the principal's keys)."""
    fields = {
        "queue": t.queue,
        "owner": t.owner,
        "args": payloads.field(t.ref, "args", t.arguments),
        "caps": payloads.field(t.ref, "caps", t.caps),
        "pre": payloads.field(t.ref, "pre", t.pre or {}),
        "sync": "1" if t.sync else "0",
        "poll_ms": str(t.poll_ms),
        "ttl_ms": "" if t.ttl_ms is None else str(t.ttl_ms),
    }
    ttl = "" if t.ttl_ms is None else str(t.ttl_ms)
    a = admit or Admission("-")
    task, shard = k.task(t.ref), k.at(t.ref)
    keys = [task, shard.unclaimed, shard.active]
    if k.shards == 1:
        keys += [k.quota(a.principal_key, a.kind), k.bucket(a.principal_key)]
        keys += [k.used_state(a.once or "-")]
    elif admit is not None:
        raise ValueError("a sharded store admits a create first (calls.admit)")
    else:
        # Unused (every limit is off), but named: a cluster routes a script by its keys, and
        # these must hash to the task's slot. (The task key itself, never written as such.)
        keys += [task, task, task]
    keys += [message.key if message else task, shard.stats]
    limits: list[str | int | float] = [a.max_open, repr(float(a.rate_per_s)), a.burst]
    limits.append(a.once_ttl_ms if a.once else 0)
    send: list[str | int | float] = [message.body if message else "", start_within_ms, t.tool]
    send.append("1" if count else "")
    argv: list[str | int | float] = [t.ref, ttl, unclaimed_ms, *limits, *send, *_flatten(fields)]
    return ScriptCall("create", keys, argv, _parse_created(a.kind))


@dataclass(frozen=True)
class Full:
    """``admit`` found the principal's quota set full: its members (ref -> when admitted, on
    Redis's clock) and Redis's ``now``, for the caller to find the ones whose task ended."""

    members: dict[str, int]
    now_ms: int


def _parse_admitted(kind: str) -> Callable[[list[Any]], Full | None]:
    def parse(reply: list[Any]) -> Full | None:
        code = str(reply[0])
        if code == "FULL":
            flat = [str(x) for x in reply[2:]]
            members = {ref: int(float(score)) for ref, score in _pairs(flat).items()}
            return Full(members, int(reply[1]))
        if code == "QUOTA":
            raise Refused(kind, int(reply[1]))
        if code == "RATE":
            raise Refused("rate", int(reply[1]))
        if code == "REPLAYED":
            raise Refused("replayed")
        return None

    return parse


ADMIT_GRACE_MS = 10_000
"""A quota member whose task does not exist (yet) is dropped only once admitted this long ago:
a sharded create admits on one shard, then creates on another, and a racing create of the same
principal must not drop the member in between (it would undercount, never wrongly refuse)."""


def admit(
    k: Keys, ref: str, a: Admission, ended: Sequence[str] = (), *, may_ask: bool = True
) -> ScriptCall[Full | None]:
    """A sharded store's admission of task ``ref`` (``lua/admit.lua``), on the principal's home
    shard, before :func:`create` on the task's: ``None`` when admitted (its token spent, its
    state marked used, ``ref`` counted), :class:`Full` when the quota set is full and
    ``may_ask`` (the caller drops ``ended`` members and asks again), else :class:`Refused`."""
    home: Shard = k.home(a.principal_key)
    keys = [home.quota(a.principal_key, a.kind), home.bucket(a.principal_key)]
    keys.append(home.used_state(a.once or "-"))
    args: list[Arg] = [ref, a.max_open, repr(float(a.rate_per_s)), a.burst]
    args += [a.once_ttl_ms if a.once else 0, 1 if may_ask else 0, *ended]
    return ScriptCall("admit", keys, args, _parse_admitted(a.kind))


def ended_members(full: Full, statuses: Sequence[str | None]) -> list[str]:
    """The members of a full quota set whose task ended (``statuses``: each member's task
    status in ``full.members`` order, ``None`` where the task does not exist)."""
    gone = []
    for (ref, admitted_ms), status in zip(full.members.items(), statuses, strict=True):
        if status is None:
            if admitted_ms < full.now_ms - ADMIT_GRACE_MS:
                gone.append(ref)
        elif TaskStatus(status) in TERMINAL:
            gone.append(ref)
    return gone


def statuses(k: Keys, refs: Sequence[str]) -> PipelineCall[list[str | None]]:
    """The status of each task ``refs`` (``None``: it does not exist), on whichever shard."""
    commands: list[Queue] = [_hget_status(k.task(ref)) for ref in refs]
    return PipelineCall(commands, lambda replies: [None if r is None else str(r) for r in replies])


def _hget_status(key: str) -> Queue:
    return lambda p: p.hget(key, "status")


def mark_enqueued(k: Keys, ref: str, start_within_ms: int) -> ScriptCall[bool]:
    keys = [k.task(ref), k.at(ref).unclaimed]
    return ScriptCall("mark_enqueued", keys, [ref, start_within_ms], lambda r: int(r) == 1)


def _parse_claim(ref: str, payloads: Payloads) -> Callable[[list[Any]], Claim]:
    def parse(reply: list[Any]) -> Claim:
        if reply[0] != Reply.OK:
            return Claim(_reply(reply))
        gen = int(reply[1])
        try:
            record = TaskRecord.from_hash(ref, _pairs(reply[2]), payloads)
        except UnreadablePayload:
            # The claim happened (this run holds the lease until it expires): the runner
            # leaves it to expire unrun, a lost run that MCPQ_MAX_RUNS bounds (workers/runner.py).
            return Claim(Reply.OK, gen, unreadable=True)
        return Claim(Reply.OK, gen, record, _pairs(reply[3]))

    return parse


def claim(
    k: Keys, ref: str, lease_ms: int, payloads: Payloads = PLAIN, *, max_lost: int = 0
) -> ScriptCall[Claim]:
    """``max_lost``: a task whose runs lost their worker that often is not run again
    (POISONED; the sweeper fails it); 0: no limit."""
    shard = k.at(ref)
    keys = [k.task(ref), k.answers(ref), shard.leases, shard.unclaimed]
    args: list[Arg] = [ref, lease_ms, max_lost]
    return ScriptCall("claim", keys, args, _parse_claim(ref, payloads))


def _parse_renewal(reply: list[Any]) -> Renewal:
    return Renewal(_reply(reply), TaskStatus(reply[1]) if len(reply) > 1 else None)


def renew(k: Keys, ref: str, gen: int, lease_ms: int) -> ScriptCall[Renewal]:
    keys = [k.task(ref), k.at(ref).unclaimed]  # the due index: leases and start-by deadlines
    return ScriptCall("renew", keys, [ref, gen, lease_ms], _parse_renewal)


def report(
    k: Keys,
    ref: str,
    gen: int,
    message: str,
    payloads: Payloads = PLAIN,
    count: int = 1,
    at_ms: int | None = None,
) -> ScriptCall[Reply]:
    sealed = payloads.field(ref, "msg", message)
    at = "" if at_ms is None else at_ms
    return ScriptCall("report", [k.task(ref)], [gen, sealed, count, at], _reply)


def _parse_poll(k: Keys, ref: str, payloads: Payloads) -> Callable[[list[Any]], InputPoll]:
    def parse(reply: list[Any]) -> InputPoll:
        if reply[0] != Reply.OK:
            return InputPoll(_reply(reply))
        answers = payloads.load_entries(k.answers(ref), _pairs(reply[2:]))
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


def _parse_answered(reply: list[Any]) -> Answered:
    return Answered(_reply(reply), *(str(x) for x in reply[1:3]))


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


def park(k: Keys, ref: str, gen: int) -> ScriptCall[Reply]:
    keys = [k.task(ref), k.inputs(ref), k.at(ref).unclaimed, k.at(ref).stats]
    return ScriptCall("park", keys, [ref, gen], _reply)


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
    ``shared.store.tally``; else ``''``, the script counts it). ``poisoned``: the sweeper fails
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
        return _reply(reply), ""

    return ScriptCall("finish", keys, args, parse)


def _parse_cancelled(reply: list[Any]) -> Cancelled:
    return Cancelled(_reply(reply), len(reply) > 1 and int(reply[1]) == 1)


def cancel(
    k: Keys, ref: str, owner: str, message: str, payloads: Payloads = PLAIN
) -> ScriptCall[Cancelled]:
    shard = k.at(ref)
    keys = [k.task(ref), k.inputs(ref), k.wake(ref), shard.unclaimed]
    keys += [shard.active, shard.stats]
    sealed = payloads.field(ref, "msg", message)
    return ScriptCall("cancel", keys, [owner, ref, sealed], _parse_cancelled)


def release(k: Keys, ref: str, gen: int) -> ScriptCall[Reply]:
    shard = k.at(ref)
    return ScriptCall("release", [k.task(ref), shard.leases, shard.unclaimed], [ref, gen], _reply)


def save_step(
    k: Keys, ref: str, gen: int, name: str, value: Any, payloads: Payloads = PLAIN
) -> ScriptCall[tuple[Reply, Any]]:
    key = k.steps(ref)

    def parse(r: list[str]) -> tuple[Reply, Any]:
        reply = _reply(r)
        # The value stored first (HSETNX): maybe another run's, sealed under its own nonce.
        return (reply, payloads.load(r[1], key, name) if reply is Reply.OK else None)

    args: list[Arg] = [gen, name, payloads.dump(value, key, name)]
    return ScriptCall("save_step", [k.task(ref), k.steps(ref)], args, parse)


def sweep(shard: Shard, unclaimed_ms: int, batch: int, max_lost: int = 0) -> ScriptCall[list[Due]]:
    """One shard's sweep (its indexes and, undeclared, its task hashes: all on its slot).
    ``max_lost``: lost runs after which a task is returned poisoned (0: never)."""

    def parse(r: list[str]) -> list[Due]:
        return [
            Due(r[i], r[i + 1], r[i + 2], r[i + 4] == "1", int(r[i + 3] or 0))
            for i in range(0, len(r), 5)
        ]

    keys = [shard.leases, shard.unclaimed, shard.active, shard.expiry]
    args: list[Arg] = [shard.task_prefix, unclaimed_ms, batch, max_lost]
    return ScriptCall("sweep", keys, args, parse)


def unlock(k: Keys, name: str, token: str) -> ScriptCall[bool]:
    return ScriptCall("unlock", [k.lock(name)], [token], lambda r: int(r) == 1)
