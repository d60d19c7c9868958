"""Creating a task as store calls: the create script with its admission (the principal's quotas,
rate and single-use ``requestState``), and a sharded store's admission on the principal's home
shard. The order of the steps (admitted first, created second, on a sharded store) is
``task_plans.TaskPlans.create``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcpq.shared.jobs import Message
from mcpq.shared.store.call_types import Arg, PipelineCall, Queue, ScriptCall, as_dict, flatten
from mcpq.shared.store.keyspace import Keys, Shard
from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.states import TERMINAL, TaskStatus


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
    #: The creating request's W3C ``traceparent`` (``mcpq.shared.tracing``; empty when off):
    #: every run of the task, however it was sent, joins that trace.
    trace: str = ""


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
    (else the caller does, once it is created: ``mcpq.shared.store.tally``).

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
    if t.trace:  # only when tracing is on: an untraced task stores nothing more
        fields["trace"] = t.trace
    ttl = "" if t.ttl_ms is None else str(t.ttl_ms)
    a = admit or Admission("-")
    task, shard = k.task(t.ref), k.at(t.ref)
    keys = [task, shard.unclaimed, shard.active]
    if k.shards == 1:
        keys += [k.quota(a.principal_key, a.kind), k.bucket(a.principal_key)]
        keys += [k.used_state(a.once or "-")]
    elif admit is not None:
        raise ValueError("a sharded store admits a create first (create_calls.admit)")
    else:
        # Unused (every limit is off), but named: a cluster routes a script by its keys, and
        # these must hash to the task's slot. (The task key itself, never written as such.)
        keys += [task, task, task]
    keys += [message.key if message else task, shard.stats]
    limits: list[str | int | float] = [a.max_open, repr(float(a.rate_per_s)), a.burst]
    limits.append(a.once_ttl_ms if a.once else 0)
    send: list[str | int | float] = [message.body if message else "", start_within_ms, t.tool]
    send.append("1" if count else "")
    argv: list[str | int | float] = [t.ref, ttl, unclaimed_ms, *limits, *send, *flatten(fields)]
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
            members = {ref: int(float(score)) for ref, score in as_dict(flat).items()}
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
