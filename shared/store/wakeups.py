"""Wake-ups for runs waiting on their task, many runs to one Redis connection.

A waiting run (``ctx.ask`` until its answers come, ``ctx.sleep`` until a cancel) must learn at
once when its task changes. Blocking each run in its own ``BLPOP`` holds one pooled connection
per waiting run, which caps a process at its pool size (100 with redis-py 8) and costs Redis a
client each. Instead one listener thread per process holds one pub/sub connection and subscribes
to the wake channel of every task a run of this process holds (``<task key>:wake``;
``answer.lua`` and ``cancel.lua`` publish on it in the same step as the change); each waiting run
sleeps on a flag of its own (``mcpq.shared.flag``: an event made at its first wait).

Ordering (why no change is missed): a run subscribes when it first means to wait
(``Watch.ready``, not at ``watch``: most runs never wait, and a subscription is two commands) and
waits for the subscription to be confirmed before it reads the state it will wait on;
a change published after the confirmation sets its event, and an event set before ``wait`` makes
``wait`` return at once. Callers always read the state again after a wake-up, so a spurious
wake-up (several changes, or a reconnection, which wakes everyone) costs one read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from mcpq.shared.flag import Flag
from mcpq.shared.store.keyspace import Keys

log = logging.getLogger("mcpq.store")


class Watch:
    """One run's view of its task's channel."""

    def __init__(self, hub: Wakeups, channel: str) -> None:
        self._hub, self.channel = hub, channel
        self.changed = Flag()
        self.subscribed = False
        #: Called (on the notifying thread) after every :meth:`notify`: how a run that waits on
        #: an event loop, not a thread, learns of it (``mcpq.workers.async_context``).
        self.on_notify: Callable[[], None] | None = None
        #: Called after ``on_notify``, whatever the run waits on: how a run on the run loop
        #: that awaits something else (an HTTP call) hears of its cancel at once.
        self.on_change: Callable[[], None] | None = None

    def notify(self) -> None:
        """The task changed (an answer, a cancel), or the run was interrupted: wake the run."""
        self.changed.set()
        listener = self.on_notify
        if listener is not None:
            listener()
        changed = self.on_change
        if changed is not None:
            changed()

    def subscribe(self) -> None:
        """Subscribe (the first time), without waiting for the confirmation."""
        if not self.subscribed:
            self._hub.subscribe(self)
            self.subscribed = True

    def ready(self, timeout_s: float = 2.0) -> bool:
        """Subscribe (the first time), and wait until the subscription is confirmed: changes
        after this wake the run. Call it before reading the state to wait on."""
        self.subscribe()
        return self._hub.confirmed(self.channel, timeout_s)

    def close(self) -> None:
        """The run ends: unsubscribe, if it subscribed (no I/O: the listener does it)."""
        if self.subscribed:
            self.subscribed = False
            self._hub._unsubscribe(self)

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
        self._confirmed: dict[str, Flag] = {}
        self._to_subscribe: set[str] = set()
        self._to_unsubscribe: set[str] = set()
        self._work = threading.Event()
        # A pipe that interrupts the listener's select(): (un)subscriptions apply at once.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, ref: str) -> Iterator[Watch]:
        """A run's watch of its task; it subscribes at its first ``ready`` and unsubscribes
        when the run ends (several runs of one task in one process share the subscription)."""
        watch = self.open(ref)
        try:
            yield watch
        finally:
            watch.close()

    def open(self, ref: str) -> Watch:
        """:meth:`watch` without the block, for a run that outlives the call that opens it (a
        run on the run loop); its holder calls ``close``."""
        # The wake channel, not the task's change channel: only an answer or a cancel wakes a
        # run (its own progress reports do not).
        return Watch(self, self._keys.wake(ref))

    def subscribe(self, watch: Watch) -> None:
        channel = watch.channel
        with self._lock:
            watches = self._watches.setdefault(channel, set())
            if not watches:
                self._confirmed[channel] = Flag()
                self._to_unsubscribe.discard(channel)
                self._to_subscribe.add(channel)
            watches.add(watch)
            self._start()
        self._poke()

    def _unsubscribe(self, watch: Watch) -> None:
        channel = watch.channel
        with self._lock:
            watches = self._watches.get(channel, set())
            watches.discard(watch)
            if not watches:
                self._watches.pop(channel, None)
                self._confirmed.pop(channel, None)
                self._to_subscribe.discard(channel)
                self._to_unsubscribe.add(channel)
        self._poke()

    def _poke(self) -> None:
        self._work.set()
        with contextlib.suppress(BlockingIOError):  # full: the listener is awake anyway
            os.write(self._wake_w, b"x")

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
                # Whatever redis-py has buffered first: select() cannot see its buffer.
                while (message := pubsub.get_message(timeout=0)) is not None:
                    self._deliver(message)
                # Then sleep until Redis sends something or a run wants a (un)subscription:
                # a new run must not wait for a time slice to be confirmed.
                sock = pubsub.connection._sock if pubsub.connection is not None else None
                if sock is None:
                    continue
                readable, _, _ = select.select([sock, self._wake_r], [], [], 1.0)
                if self._wake_r in readable:
                    os.read(self._wake_r, 4096)
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
            watch.notify()

    def _wake_all(self) -> None:
        with self._lock:
            watches = [w for group in self._watches.values() for w in group]
        for watch in watches:
            watch.notify()

    def _reconnect(self, old: Any) -> Any:
        with contextlib.suppress(Exception):  # already broken: nothing to clean up
            old.close()
        with self._lock:
            channels = list(self._watches)
            for channel in channels:
                self._confirmed[channel] = Flag()
            self._to_subscribe = set(channels)
            self._to_unsubscribe.clear()
        return self._client.pubsub()  # type: ignore[no-untyped-call]
