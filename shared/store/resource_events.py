"""What a deployment serves, changing: a resource's updates and a list's changes, as store calls.

- **A resource changed** (``app.resource_updated(uri)``, from a tool on a worker, a web process
  or any process that reaches the store): ``resource_updated.lua`` publishes once on the
  resource's channel, which the ``subscriptions/listen`` streams that named it hear, and once on
  the channel of each 2025-era session subscribed to it (``resources/subscribe``), which that
  session's GET stream hears, on whichever replica it is open.
- **A 2025-era session's subscriptions** are its own: a hash beside the session (URI digest ->
  the URI, sealed like its caps), slid and ended with it, and an entry in the resource's
  subscriber index (``resource_subscribe.lua``, one step with the hash), kept while the
  session's GET stream streams (``resource_refresh.lua``).
- **A list changed** (``tools``, ``prompts``, ``resources``): each web process, as it starts,
  says what it serves as a digest per list; ``lists_changed.lua`` stores each digest that
  differs from the stored one and announces that list's change, once per change, on one channel
  every replica's listeners hear (a rolling deploy that adds a tool module).

NOTE: no URI is a key, a channel or a message, and none reaches a log: they name the URI's
digest (:func:`uri_digest`), and each stream maps it back to the URIs its own client named (a
listen stream holds them; a GET stream reads its session's hash). Messages published while a web
process's watch connection is down are lost (``async_wakeups``): an update only says "read it
again".

:class:`ResourceEvents` is the web tier's face; ``announce`` is any process's (the synchronous
store, one per process, built from the environment on first use).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mcpq.shared.store.call_types import PipelineCall, Queue, ScriptCall
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import PLAIN, Payloads

if TYPE_CHECKING:
    # (Not at run time: the web's modules are the web's, and any process announces through
    # ``announce``, which loads the synchronous store.)
    from mcpq.shared.store.async_driver import AsyncDriver
    from mcpq.shared.store.async_wakeups import AsyncWakeups, AsyncWatch
    from mcpq.shared.store.plans import ScriptPlans

#: The lists whose changes are announced, as the ``list_changed`` notifications name them.
LIST_NAMES = ("tools", "prompts", "resources")
#: The messages on the channels: a resource's digest, a list's name.
RESOURCE_MESSAGE, LIST_MESSAGE = "res:", "list:"
#: The most resources one 2025-era session may subscribe to at once.
MAX_SESSION_SUBSCRIPTIONS = 100


def uri_digest(uri: str) -> str:
    """What Redis holds of a resource's URI (keys, channels, messages): 128 bits of its
    SHA-256. Not a secret (a guessed URI can be checked against it), but no URI in plain text
    in a key listing, a ``MONITOR`` or a log."""
    return hashlib.sha256(uri.encode()).hexdigest()[:32]


# -- the calls ------------------------------------------------------------------------------------
def subscribe(
    k: Keys, sref: str, uri: str, ttl_ms: int, payloads: Payloads = PLAIN
) -> ScriptCall[int]:
    """1: subscribed (again); 0: the session is gone; -1: it holds too many subscriptions."""
    digest, key = uri_digest(uri), k.session_resources(sref)
    return ScriptCall(
        "resource_subscribe",
        [k.session(sref), key, k.resource_subscribers(digest)],
        [
            digest,
            payloads.dump(uri, key, digest),  # bound to this session's hash and this field
            sref,
            ttl_ms,
            MAX_SESSION_SUBSCRIPTIONS,
        ],
        int,
    )


def unsubscribe(k: Keys, sref: str, uri: str) -> PipelineCall[None]:
    """No condition: an unknown subscription (or session) is nothing to remove."""
    digest = uri_digest(uri)
    key, index = k.session_resources(sref), k.resource_subscribers(digest)
    commands: list[Queue] = [lambda p: p.hdel(key, digest), lambda p: p.zrem(index, sref)]
    return PipelineCall(commands, lambda replies: None)


def session_digests(k: Keys, sref: str) -> PipelineCall[list[str]]:
    key = k.session_resources(sref)
    return PipelineCall([lambda p: p.hkeys(key)], lambda replies: [str(d) for d in replies[0]])


def refresh(k: Keys, sref: str, digests: Sequence[str], ttl_ms: int) -> ScriptCall[bool]:
    """The session back in the subscriber index of each of ``digests`` for a session TTL."""
    keys = [k.session(sref), *(k.resource_subscribers(d) for d in digests)]
    return ScriptCall("resource_refresh", keys, [sref, ttl_ms], lambda reply: int(reply) == 1)


def subscribed_uri(
    k: Keys, sref: str, digest: str, payloads: Payloads = PLAIN
) -> PipelineCall[str | None]:
    """The URI the session subscribed to under ``digest``; ``None`` once it unsubscribed."""
    key = k.session_resources(sref)

    def parse(replies: list[Any]) -> str | None:
        raw = replies[0]
        return None if not raw else str(payloads.load(raw, key, digest))

    return PipelineCall([lambda p: p.hget(key, digest)], parse)


def updated(k: Keys, uri: str) -> ScriptCall[int]:
    """How many subscribed sessions were told (the listen streams are not counted)."""
    digest = uri_digest(uri)
    # The script names each session's channel as this prefix, its sref and ':ev': exactly
    # ``Keys.session_events`` (a channel per subscriber, which no caller could list in ARGV).
    prefix = k.session("")
    return ScriptCall(
        "resource_updated",
        [k.resource_subscribers(digest)],
        [k.resource_events(digest), RESOURCE_MESSAGE + digest, prefix],
        int,
    )


def lists_changed(k: Keys, digests: dict[str, str]) -> ScriptCall[list[str]]:
    """The lists whose digest differs from the stored one (now stored, and announced)."""
    args: list[str] = [k.listing_changes]
    for name, digest in digests.items():
        if name not in LIST_NAMES:
            raise ValueError(f"no list {name!r}: one of {', '.join(LIST_NAMES)}")
        args += [name, digest]
    return ScriptCall("lists_changed", [k.listings], args, lambda reply: [str(n) for n in reply])


def list_changed(k: Keys, names: Iterable[str]) -> PipelineCall[None]:
    """Announce that lists changed without storing anything (a test's or an operator's nudge:
    listeners re-list; what each process serves is unchanged)."""
    channel, messages = k.listing_changes, []
    for name in names:
        if name not in LIST_NAMES:
            raise ValueError(f"no list {name!r}: one of {', '.join(LIST_NAMES)}")
        messages.append(LIST_MESSAGE + name)
    commands: list[Queue] = [_publish(channel, message) for message in messages]
    return PipelineCall(commands, lambda replies: None)


def _publish(channel: str, message: str) -> Queue:
    return lambda p: p.publish(channel, message)


# -- the web tier's face --------------------------------------------------------------------------
class ResourceEvents:
    """Resource subscriptions, their updates and list changes: the web tier's side (on the task
    store's client, clock and watch connection)."""

    def __init__(
        self,
        io: AsyncDriver,
        keys: Keys,
        scripts: ScriptPlans,
        payloads: Payloads,
        wakeups: AsyncWakeups,
    ) -> None:
        self._io, self._keys, self._scripts = io, keys, scripts
        self._payloads, self._wakeups = payloads, wakeups

    async def subscribe(self, sref: str, uri: str, ttl_ms: int) -> int:
        """See :func:`subscribe`."""
        call = subscribe(self._keys, sref, uri, ttl_ms, self._payloads)
        return await self._io.drive(self._scripts.run(call))

    async def unsubscribe(self, sref: str, uri: str) -> None:
        await self._io.pipeline(unsubscribe(self._keys, sref, uri))

    async def refresh(self, sref: str, ttl_ms: int) -> bool:
        """Keep a streaming session in the indexes of the resources it subscribed to (a GET
        stream's start and keep-alives); False when the session is gone (as far as its
        subscriptions tell: the caller touches the session itself)."""
        digests = await self._io.pipeline(session_digests(self._keys, sref))
        if not digests:
            return True  # nothing to keep (a session gone has none either: its keys went)
        call = refresh(self._keys, sref, digests, ttl_ms)
        return await self._io.drive(self._scripts.run(call))

    async def subscribed_uri(self, sref: str, digest: str) -> str | None:
        call = subscribed_uri(self._keys, sref, digest, self._payloads)
        return await self._io.pipeline(call)

    async def updated(self, uri: str) -> int:
        """Announce that ``uri`` changed (from the web tier's own event loop)."""
        return await self._io.drive(self._scripts.run(updated(self._keys, uri)))

    async def announce_lists(self, digests: dict[str, str]) -> list[str]:
        """What this process serves, by list: the lists that changed, announced."""
        call = lists_changed(self._keys, digests)
        return await self._io.drive(self._scripts.run(call))

    @contextlib.asynccontextmanager
    async def watch(
        self, uris: Iterable[str] = (), *, lists: bool = False, session: str | None = None
    ) -> AsyncIterator[AsyncWatch]:
        """The messages (``res:<digest>``, ``list:<name>``) of the updates of ``uris``, of the
        list changes (``lists``) and of a 2025-era session's subscriptions (``session``: its
        sref), on the process's one watch connection. Entered (subscriptions confirmed) before
        the caller answers, so nothing announced after its answer is missed."""
        channels = [self._keys.resource_events(uri_digest(uri)) for uri in uris]
        if lists:
            channels.append(self._keys.listing_changes)
        if session is not None:
            channels.append(self._keys.session_events(session))
        async with self._wakeups.watch(channels) as watch:
            yield watch
