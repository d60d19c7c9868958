"""Wake-ups for runs waiting on their task, many runs to one Redis connection.

A waiting run (``ctx.ask`` until its answers come, ``ctx.sleep`` until a cancel) must learn at
once when its task changes. Blocking each run in its own ``BLPOP`` holds one pooled connection
per waiting run, which caps a process at its pool size (100 with redis-py 8) and costs Redis a
client each. Instead one listener thread per process holds one pub/sub connection and subscribes
to the channel of every task a run of this process holds (``<task key>:ev``; the scripts publish
on it in the same step as each change: answers, cancel, finish); each waiting run sleeps on a
``threading.Event`` of its own.

Ordering (why no change is missed): a run subscribes when it starts (``watch``) and waits for
the subscription to be confirmed (``Watch.ready``) before it reads the state it will wait on;
a change published after the confirmation sets its event, and an event set before ``wait`` makes
``wait`` return at once. Callers always read the state again after a wake-up, so a spurious
wake-up (several changes, or a reconnection, which wakes everyone) costs one read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from shared.store.keys import Keys

log = logging.getLogger("mcpq.worker")

LISTEN_SLICE_S = 0.05
"""How long the listener blocks in one read before it applies new (un)subscriptions: the
longest a new run waits for its subscription to be confirmed."""


class Watch:
    """One run's view of its task's channel."""

    def __init__(self, hub: Wakeups, channel: str) -> None:
        self._hub, self.channel = hub, channel
        self.changed = threading.Event()

    def ready(self, timeout_s: float = 2.0) -> bool:
        """Until the subscription is confirmed (changes after this wake the run)."""
        return self._hub.confirmed(self.channel, timeout_s)

    def wait(self, timeout_s: float) -> bool:
        """Sleep until the task changes or ``timeout_s`` passes; ``True`` if it changed."""
        if timeout_s <= 0:
            return False
        woke = self.changed.wait(timeout_s)
        self.changed.clear()
        return woke


class Wakeups:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client, self._keys = client, keys
        self._lock = threading.Lock()
        self._watches: dict[str, set[Watch]] = {}
        self._confirmed: dict[str, threading.Event] = {}
        self._to_subscribe: set[str] = set()
        self._to_unsubscribe: set[str] = set()
        self._work = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, ref: str) -> Iterator[Watch]:
        """Subscribe for the duration of a run (several runs of one task in one process share
        the subscription)."""
        channel = self._keys.events(ref)
        watch = Watch(self, channel)
        with self._lock:
            watches = self._watches.setdefault(channel, set())
            if not watches:
                self._confirmed[channel] = threading.Event()
                self._to_unsubscribe.discard(channel)
                self._to_subscribe.add(channel)
            watches.add(watch)
            self._start()
        self._work.set()
        try:
            yield watch
        finally:
            with self._lock:
                watches.discard(watch)
                if not watches:
                    del self._watches[channel]
                    self._confirmed.pop(channel, None)
                    self._to_subscribe.discard(channel)
                    self._to_unsubscribe.add(channel)
            self._work.set()

    def confirmed(self, channel: str, timeout_s: float) -> bool:
        with self._lock:
            event = self._confirmed.get(channel)
        return event is not None and event.wait(timeout_s)

    @property
    def watching(self) -> int:
        with self._lock:
            return len(self._watches)

    # -- the listener --------------------------------------------------------------------------
    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._listen, name="mcpq-wakeups", daemon=True)
            self._thread.start()

    def _listen(self) -> None:
        pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
        while True:
            try:
                self._apply(pubsub)
                if not pubsub.subscribed:
                    self._work.wait(1.0)
                    self._work.clear()
                    continue
                message = pubsub.get_message(timeout=LISTEN_SLICE_S)
                if message is not None:
                    self._deliver(message)
            except Exception:  # Redis away: wake everyone (they read again), then reconnect
                log.warning("wake-up listener lost Redis; resubscribing", exc_info=True)
                self._wake_all()
                time.sleep(0.5)
                pubsub = self._reconnect(pubsub)

    def _apply(self, pubsub: Any) -> None:
        """(Un)subscribe on this thread only: the connection is read here, so it is written
        here too."""
        with self._lock:
            subscribe, unsubscribe = list(self._to_subscribe), list(self._to_unsubscribe)
            self._to_subscribe.clear()
            self._to_unsubscribe.clear()
        if subscribe:
            pubsub.subscribe(*subscribe)
        if unsubscribe and pubsub.subscribed:
            pubsub.unsubscribe(*unsubscribe)

    def _deliver(self, message: dict[str, Any]) -> None:
        channel = message.get("channel")
        if isinstance(channel, bytes):
            channel = channel.decode()
        with self._lock:
            if message.get("type") == "subscribe":
                event = self._confirmed.get(str(channel))
                if event is not None:
                    event.set()
                return
            watches = list(self._watches.get(str(channel), ()))
        for watch in watches:
            watch.changed.set()

    def _wake_all(self) -> None:
        with self._lock:
            watches = [w for group in self._watches.values() for w in group]
        for watch in watches:
            watch.changed.set()

    def _reconnect(self, old: Any) -> Any:
        with contextlib.suppress(Exception):  # already broken: nothing to clean up
            old.close()
        with self._lock:
            channels = list(self._watches)
            for channel in channels:
                self._confirmed[channel] = threading.Event()
            self._to_subscribe = set(channels)
            self._to_unsubscribe.clear()
        return self._client.pubsub()  # type: ignore[no-untyped-call]
