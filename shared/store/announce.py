"""Any process's side of ``resource_events``: announcing that a resource changed (or that lists
changed) on the synchronous store, the caller's or this process's own (built from the
environment on first use: ``REDIS_URL``, ``MCPQ_KEY_PREFIX``...). What ``app.resource_updated``
runs, from a tool on a worker, a web process or a script.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from mcpq.shared.settings import Settings
from mcpq.shared.store.clients import store_keys, sync_client
from mcpq.shared.store.resource_events import list_changed, updated
from mcpq.shared.store.sync import TaskStore

_process_lock = threading.Lock()
_process_store: tuple[int, TaskStore] | None = None


def process_store() -> TaskStore:
    """This process's store for announcements, built from the environment on first use: a
    client of its own, no tally, nothing sealed (an announcement carries no payload). A forked
    child builds its own (a client is not shared across a fork)."""
    global _process_store
    with _process_lock:
        if _process_store is None or _process_store[0] != os.getpid():
            settings = Settings.from_env()
            store = TaskStore(sync_client(settings), store_keys(settings))
            _process_store = (os.getpid(), store)
        return _process_store[1]


def announce_updated(uri: str, store: TaskStore | None = None) -> int:
    """Announce that the resource at ``uri`` changed, on ``store`` (default: this process's,
    :func:`process_store`): how many subscribed 2025-era sessions were told (listen streams are
    not counted). Raises ``StoreUnavailable`` when Redis cannot be reached."""
    target = store if store is not None else process_store()
    return target.run(updated(target.plans.keys, uri))


def announce_list_changed(names: Iterable[str], store: TaskStore | None = None) -> None:
    """Tell every listener that lists ``names`` changed, storing nothing
    (``resource_events.list_changed``)."""
    target = store if store is not None else process_store()
    target.pipeline(list_changed(target.plans.keys, names))
