"""The task store as the integration tests drive it: the real synchronous store, plus the web
tier's transitions run synchronously and handles for white-box assertions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis

from mcpq.shared.store import Answered, Cancelled, Keys, TaskStore, calls
from mcpq.shared.store.wakeups import Watch


class WhiteBoxStore(TaskStore):
    """The workers' store, plus what only tests need: the web tier's transitions run
    synchronously (the web itself runs them on the asyncio store), a record read, and handles
    on the raw client and the key schema for white-box assertions."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__(client, keys)
        self.redis, self.keys = client, keys

    def answer(self, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int) -> Answered:
        return self.run(calls.answer(self.keys, ref, owner, answers, unclaimed_ms))

    def cancel(self, ref: str, owner: str, message: str = "Cancelled by client") -> Cancelled:
        return self.run(calls.cancel(self.keys, ref, owner, message))

    def mark_watched(self, *refs: str) -> int:
        """What a watcher does once subscribed (``AsyncTaskStore.watch``): the tasks' changes
        are published from now on. How many were marked."""
        return sum(self.run(call) for call in calls.mark_watched(self.keys, refs))

    def read(self, ref: str, owner: str, *, watching: bool = False, call: bool = False) -> Any:
        """``tasks/get``'s script, as the web runs it (``AsyncTaskStore.get``)."""
        return self.run(calls.read(self.keys, ref, owner, watching=watching, call=call))


class _AlwaysConfirmed:
    def subscribe(self, watch: Watch) -> None:
        pass

    def confirmed(self, channel: str, timeout_s: float) -> bool:
        return True


def quiet_watch() -> Watch:
    """A run's watch on which nothing ever happens (an answer or a cancel never comes): for
    tests of a context's own behaviour. Its waits last their whole timeout."""
    return Watch(_AlwaysConfirmed(), "quiet")  # type: ignore[arg-type]


def field(store: WhiteBoxStore, ref: str, name: str) -> str | None:
    """One field of the task hash, as stored."""
    value = store.redis.hget(store.keys.task(ref), name)
    return None if value is None else str(value)


def in_index(store: WhiteBoxStore, index: str, ref: str) -> float | None:
    """The task's score in a global index (``None``: not in it)."""
    score = store.redis.zscore(index, ref)
    return None if score is None else float(score)


@contextlib.contextmanager
def heard(store: WhiteBoxStore, ref: str, *, mark: bool = True) -> Iterator[list[str]]:
    """What the scripts publish on task ``ref``'s change channel while the block runs
    (subscribed before it). ``mark``: then marked watched, as a watcher does once subscribed
    (``AsyncTaskStore.watch``): changes are published from then on."""
    pubsub = store.redis.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(store.keys.events(ref))
    assert pubsub.get_message(timeout=1.0) is None  # consumes the subscribe confirmation
    if mark:
        store.mark_watched(ref)
    messages: list[str] = []
    try:
        yield messages
        while (message := pubsub.get_message(timeout=0.2)) is not None:
            messages.append(message["data"])
    finally:
        pubsub.close()
