"""The task store's operations as data: which script, which KEYS and ARGV, how to read the reply.

The synchronous store (workers) and the asyncio store (web) both execute these, so the
KEYS/ARGV contract of every script is written once, here, beside nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared import jsonutil
from shared.keys import Keys

T = TypeVar("T")
Arg = str | int | float


@dataclass(frozen=True)
class ScriptCall(Generic[T]):
    script: str
    keys: Sequence[str]
    args: Sequence[Arg]
    parse: Callable[[Any], T]


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
class Claim:
    """The reply of ``claim``: status ``OK`` with the task and its delivered answers."""

    status: str
    gen: int = 0
    task: dict[str, str] | None = None
    answers: dict[str, str] | None = None


@dataclass(frozen=True)
class InputPoll:
    """The reply of ``request_input``: answers known so far and how many are missing."""

    status: str
    missing: int = 0
    answers: dict[str, Any] | None = None


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def _flatten(pairs: dict[str, str]) -> list[str]:
    return [item for kv in pairs.items() for item in kv]


def _first(reply: Any) -> str:
    return str(reply[0]) if isinstance(reply, list) else str(reply)


def create(k: Keys, t: NewTask, unclaimed_ms: int) -> ScriptCall[int | None]:
    fields = {
        "tool": t.tool,
        "queue": t.queue,
        "owner": t.owner,
        "args": jsonutil.dumps(t.arguments),
        "caps": jsonutil.dumps(t.caps),
        "pre": jsonutil.dumps(t.pre or {}),
        "sync": "1" if t.sync else "0",
        "poll_ms": str(t.poll_ms),
        "ttl_ms": "" if t.ttl_ms is None else str(t.ttl_ms),
    }
    ttl = "" if t.ttl_ms is None else str(t.ttl_ms)
    return ScriptCall(
        "create",
        [k.task(t.ref), k.unclaimed, k.active, k.expiry, k.stats],
        [t.ref, ttl, unclaimed_ms, *_flatten(fields)],
        lambda r: int(r[1]) if int(r[0]) == 1 else None,
    )


def mark_enqueued(k: Keys, ref: str, start_within_ms: int) -> ScriptCall[int]:
    return ScriptCall("mark_enqueued", [k.task(ref), k.unclaimed], [ref, start_within_ms], int)


def _parse_claim(reply: list[Any]) -> Claim:
    if reply[0] != "OK":
        return Claim(str(reply[0]))
    return Claim("OK", int(reply[1]), _pairs(reply[2]), _pairs(reply[3]))


def claim(k: Keys, ref: str, lease_ms: int) -> ScriptCall[Claim]:
    keys = [k.task(ref), k.answers(ref), k.leases, k.unclaimed]
    return ScriptCall("claim", keys, [ref, lease_ms], _parse_claim)


def renew(k: Keys, ref: str, gen: int, lease_ms: int) -> ScriptCall[str]:
    return ScriptCall("renew", [k.task(ref), k.leases], [ref, gen, lease_ms], _first)


def report(k: Keys, ref: str, gen: int, message: str) -> ScriptCall[str]:
    return ScriptCall("report", [k.task(ref)], [gen, message], _first)


def _parse_poll(reply: list[Any]) -> InputPoll:
    if reply[0] != "OK":
        return InputPoll(str(reply[0]))
    answers = {key: jsonutil.loads(v) for key, v in _pairs(reply[2:]).items()}
    return InputPoll("OK", int(reply[1]), answers)


def request_input(k: Keys, ref: str, gen: int, requests: dict[str, Any]) -> ScriptCall[InputPoll]:
    flat = [x for key, req in requests.items() for x in (key, jsonutil.dumps(req))]
    keys = [k.task(ref), k.inputs(ref), k.answers(ref), k.done(ref), k.stats]
    return ScriptCall("request_input", keys, [gen, *flat], _parse_poll)


def answer(
    k: Keys, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int
) -> ScriptCall[list[str]]:
    flat = [x for key, value in answers.items() for x in (key, jsonutil.dumps(value))]
    keys = [k.task(ref), k.inputs(ref), k.answers(ref), k.wake(ref), k.unclaimed, k.stats]
    return ScriptCall(
        "answer", keys, [owner, ref, unclaimed_ms, *flat], lambda r: [str(x) for x in r]
    )


def park(k: Keys, ref: str, gen: int) -> ScriptCall[str]:
    keys = [k.task(ref), k.inputs(ref), k.leases, k.stats]
    return ScriptCall("park", keys, [ref, gen], _first)


def finish(
    k: Keys, ref: str, gen: int, status: str, payload: dict[str, Any], message: str
) -> ScriptCall[str]:
    field = "result" if status == "completed" else "error"
    keys = [k.task(ref), k.inputs(ref), k.wake(ref), k.done(ref), k.leases, k.unclaimed]
    keys += [k.active, k.expiry, k.stats]
    args: list[Arg] = [ref, gen, status, field, jsonutil.dumps(payload), message]
    return ScriptCall("finish", keys, args, _first)


def cancel(k: Keys, ref: str, owner: str, message: str) -> ScriptCall[tuple[str, bool]]:
    keys = [k.task(ref), k.inputs(ref), k.wake(ref), k.done(ref), k.leases, k.unclaimed]
    keys += [k.active, k.expiry, k.stats]
    return ScriptCall(
        "cancel", keys, [owner, ref, message], lambda r: (str(r[0]), len(r) > 1 and r[1] == 1)
    )


def release(k: Keys, ref: str, gen: int) -> ScriptCall[str]:
    return ScriptCall("release", [k.task(ref), k.leases, k.unclaimed], [ref, gen], _first)


def save_step(k: Keys, ref: str, gen: int, name: str, value: Any) -> ScriptCall[tuple[str, Any]]:
    def parse(r: list[str]) -> tuple[str, Any]:
        return (r[0], jsonutil.loads(r[1]) if r[0] == "OK" else None)

    args: list[Arg] = [gen, name, jsonutil.dumps(value)]
    return ScriptCall("save_step", [k.task(ref), k.steps(ref)], args, parse)


def sweep(k: Keys, unclaimed_ms: int, batch: int) -> ScriptCall[list[tuple[str, str, str]]]:
    def parse(r: list[str]) -> list[tuple[str, str, str]]:
        return [(r[i], r[i + 1], r[i + 2]) for i in range(0, len(r), 3)]

    keys = [k.leases, k.unclaimed, k.active, k.expiry]
    return ScriptCall("sweep", keys, [k.task_prefix, unclaimed_ms, batch], parse)
