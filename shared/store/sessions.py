"""2025-era sessions (``Mcp-Session-Id``) and what hangs off them, as store calls.

A session is what a 2025-era client declared in ``initialize`` (protocol version, client
capabilities) plus who it is (principal) and its ``tasks/list`` scope. It lives in Redis so any
web replica serves any session, under the hash of its id (the id is a bearer, like a taskId),
with a sliding TTL renewed by every request. Two small maps hang off it, expiring with it: the
server→client requests in flight on its streams (where each answer goes) and its synchronous
calls in flight (what ``notifications/cancelled`` cancels); its resource subscriptions
(``resource_events``) expire and end with it too. :class:`SessionStore` is the web tier's face on
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpq.shared import jsonutil
from mcpq.shared.store.call_types import PipelineCall, Queue, ScriptCall
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.resource_events import session_digests

if TYPE_CHECKING:
    # (Not at run time: the records of this package load no redis-py: ``mcpq.shared.wire``.)
    from mcpq.shared.store.async_driver import AsyncDriver
    from mcpq.shared.store.plans import ScriptPlans


@dataclass(frozen=True)
class Session:
    """One 2025-era session, as ``initialize`` made it."""

    sref: str  # the storage ref of the session id (task_ref of it)
    version: str
    caps: dict[str, Any]
    principal: str
    scope: str  # the tasks/list scope of its tasks
    #: What ``logging/setLevel`` set: the least severe ``notifications/message`` its calls'
    #: streams carry ('' until then: every level).
    log_level: str = ""

    @classmethod
    def from_hash(cls, sref: str, h: dict[str, str], key: str, payloads: Payloads) -> Session:
        caps = payloads.load(h["caps"], key, "caps")
        level = h.get("log_level", "")
        return cls(sref, h["version"], caps, h["principal"], h["scope"], level)


@dataclass(frozen=True)
class Outgoing:
    """A server→client request in flight: the answer goes to task ``ref``, input ``key``."""

    ref: str
    key: str


def _keys(k: Keys, sref: str) -> tuple[str, ...]:
    """The session's hash first, then the maps that hang off it (slid and ended with it; its
    resource subscriptions too: ``resource_events``)."""
    return k.session(sref), k.session_out(sref), k.session_calls(sref), k.session_resources(sref)


def _pexpire(key: str, ttl_ms: int) -> Queue:
    return lambda p: p.pexpire(key, ttl_ms)


def open_session(
    k: Keys, session: Session, ttl_ms: int, payloads: Payloads = PLAIN
) -> PipelineCall[None]:
    key = k.session(session.sref)
    fields = {
        "version": session.version,
        # The client's declared capabilities: what it sent, so sealed like a task's `caps`.
        "caps": payloads.dump(session.caps, key, "caps"),
        "principal": session.principal,
        "scope": session.scope,
    }
    commands: list[Queue] = [
        lambda p: p.hset(key, mapping=fields),
        lambda p: p.pexpire(key, ttl_ms),
    ]
    return PipelineCall(commands, lambda replies: None)


def touch_session(
    k: Keys, sref: str, ttl_ms: int, payloads: Payloads = PLAIN
) -> PipelineCall[Session | None]:
    """The session, its TTL slid forward (all its keys), or ``None`` when unknown or expired."""
    keys = _keys(k, sref)
    commands: list[Queue] = [lambda p: p.hgetall(keys[0])]
    commands += [_pexpire(key, ttl_ms) for key in keys]

    def parse(replies: list[Any]) -> Session | None:
        return Session.from_hash(sref, replies[0], keys[0], payloads) if replies[0] else None

    return PipelineCall(commands, parse)


def set_log_level(k: Keys, sref: str, level: str) -> ScriptCall[bool]:
    """``logging/setLevel``: False when the session is gone."""
    return ScriptCall("set_level", [k.session(sref)], [level], lambda reply: int(reply) == 1)


def _unindex(index: str, sref: str) -> Queue:
    return lambda p: p.zrem(index, sref)


def end_session(k: Keys, sref: str, digests: Sequence[str] = ()) -> PipelineCall[bool]:
    """Delete the session and its maps, and take it out of the subscriber index of each
    resource it subscribed to (``digests``: read just before), so an update announced after
    its end neither counts nor publishes to it. A subscribe racing the end finds the session
    gone (``resource_subscribe.lua``); an entry it wrote first lapses with its TTL."""
    keys = _keys(k, sref)
    commands: list[Queue] = [lambda p: p.delete(*keys)]
    commands += [_unindex(k.resource_subscribers(digest), sref) for digest in digests]
    return PipelineCall(commands, lambda replies: int(replies[0]) > 0)


def put_outgoing(
    k: Keys, sref: str, out_id: str, target: Outgoing, ttl_ms: int
) -> PipelineCall[None]:
    key = k.session_out(sref)
    value = jsonutil.dumps({"ref": target.ref, "key": target.key})
    commands: list[Queue] = [lambda p: p.hset(key, out_id, value), lambda p: p.pexpire(key, ttl_ms)]
    return PipelineCall(commands, lambda replies: None)


def take_outgoing(k: Keys, sref: str, out_id: str) -> PipelineCall[Outgoing | None]:
    """Where the client's response to ``out_id`` goes; the entry is consumed. (Two racing
    copies of one response may both read it: the answer script keeps only the first.)"""
    key = k.session_out(sref)

    def parse(replies: list[Any]) -> Outgoing | None:
        if not replies[0]:
            return None
        found = jsonutil.loads(replies[0])
        return Outgoing(str(found["ref"]), str(found["key"]))

    return PipelineCall([lambda p: p.hget(key, out_id), lambda p: p.hdel(key, out_id)], parse)


def put_call(k: Keys, sref: str, request_id: str, ref: str, ttl_ms: int) -> PipelineCall[None]:
    key = k.session_calls(sref)
    commands: list[Queue] = [
        lambda p: p.hset(key, request_id, ref),
        lambda p: p.pexpire(key, ttl_ms),
    ]
    return PipelineCall(commands, lambda replies: None)


def drop_call(k: Keys, sref: str, request_id: str) -> PipelineCall[None]:
    key = k.session_calls(sref)
    return PipelineCall([lambda p: p.hdel(key, request_id)], lambda replies: None)


def find_call(k: Keys, sref: str, request_id: str) -> PipelineCall[str | None]:
    key = k.session_calls(sref)
    return PipelineCall([lambda p: p.hget(key, request_id)], lambda replies: replies[0] or None)


class SessionStore:
    """2025-era sessions and the two maps hanging off each (its server→client requests in
    flight, its synchronous calls in flight): one pipeline per call."""

    def __init__(
        self, io: AsyncDriver, keys: Keys, scripts: ScriptPlans, payloads: Payloads = PLAIN
    ) -> None:
        self._io, self._keys, self._payloads = io, keys, payloads
        self._scripts = scripts  # how its one script runs (the task store's: reload, clock)

    async def open(self, session: Session, ttl_ms: int) -> None:
        await self._io.pipeline(open_session(self._keys, session, ttl_ms, self._payloads))

    async def touch(self, sref: str, ttl_ms: int) -> Session | None:
        """The session, its TTL slid forward, or ``None`` when unknown or expired."""
        return await self._io.pipeline(touch_session(self._keys, sref, ttl_ms, self._payloads))

    async def end(self, sref: str) -> bool:
        """Whether there was such a session (it is gone now, and its maps and resource
        subscriptions with it)."""
        digests = await self._io.pipeline(session_digests(self._keys, sref))
        return await self._io.pipeline(end_session(self._keys, sref, digests))

    async def set_log_level(self, sref: str, level: str) -> bool:
        return await self._io.drive(self._scripts.run(set_log_level(self._keys, sref, level)))

    async def put_outgoing(self, sref: str, out_id: str, target: Outgoing, ttl_ms: int) -> None:
        await self._io.pipeline(put_outgoing(self._keys, sref, out_id, target, ttl_ms))

    async def take_outgoing(self, sref: str, out_id: str) -> Outgoing | None:
        return await self._io.pipeline(take_outgoing(self._keys, sref, out_id))

    async def put_call(self, sref: str, request_id: str, ref: str, ttl_ms: int) -> None:
        await self._io.pipeline(put_call(self._keys, sref, request_id, ref, ttl_ms))

    async def drop_call(self, sref: str, request_id: str) -> None:
        await self._io.pipeline(drop_call(self._keys, sref, request_id))

    async def find_call(self, sref: str, request_id: str) -> str | None:
        return await self._io.pipeline(find_call(self._keys, sref, request_id))
