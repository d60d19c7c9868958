"""The recovery sweeper: re-enqueues runs whose lease expired (a dead worker) and tasks that
were persisted but never enqueued (a web process that died in between).

It runs as a thread inside every worker's main process; a Redis lock lets one sweep at a time
across the whole deployment, so no extra process type is needed. Duplicates it might cause are
harmless: ``claim`` answers BUSY/PARKED/TERMINAL to any run that must not start.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

import redis
from celery import Celery

from shared.errors import StoreUnavailable
from shared.keys import Keys
from shared.redis_clients import sync_client
from shared.settings import Settings
from shared.store import TaskStore

log = logging.getLogger("mcpq.sweeper")


def sweep_once(app: Celery, store: TaskStore, settings: Settings, token: str) -> int:
    """One sweep under the lock; returns how many runs were enqueued again."""
    # NOTE: short, so a dead holder delays recovery by at most about two sweep intervals.
    lock_ms = int(max(settings.sweep_interval_s * 2, 1.0) * 1000)
    lock = store.keys.sweeper_lock
    held = store.redis.set(lock, token, nx=True, px=lock_ms) or store.redis.get(lock) == token
    if not held:
        return 0
    store.redis.pexpire(lock, lock_ms)
    due = store.sweep(int(settings.unclaimed_after_s * 1000))
    for ref, tool, queue in due:
        app.send_task(tool, args=[ref], task_id=ref, queue=queue or settings.default_queue)
        store.mark_enqueued(ref, int(settings.requeue_unstarted_s * 1000))
    if due:
        log.warning("sweeper re-enqueued %d run(s)", len(due))
    return len(due)


def _loop(app: Celery, settings: Settings, node: str, stop: threading.Event) -> None:
    store = TaskStore(sync_client(settings), Keys(settings.key_prefix))
    token = uuid.uuid4().hex
    while True:
        try:
            beat_worker(store, node)
            sweep_once(app, store, settings, token)
        except (StoreUnavailable, redis.RedisError, OSError) as exc:
            log.warning("sweep failed: %s", type(exc).__name__)
        if stop.wait(settings.sweep_interval_s):
            return


def beat_worker(store: TaskStore, node: str) -> None:
    """Record that this worker node is alive (``/readyz`` and ``mcpq status`` read it)."""
    now_ms = int(time.time() * 1000)
    pipe = store.redis.pipeline(transaction=False)
    pipe.zadd(store.keys.workers, {node: now_ms})
    pipe.zremrangebyscore(store.keys.workers, "-inf", now_ms - 24 * 3600 * 1000)
    pipe.execute()


def start_sweeper(app: Celery, settings: Settings, node: str) -> threading.Event:
    """Start the sweeper (and the worker heartbeat) thread of this worker node."""
    stop = threading.Event()
    args = (app, settings, node, stop)
    threading.Thread(target=_loop, args=args, name="mcpq-sweeper", daemon=True).start()
    return stop
