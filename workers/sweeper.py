"""The recovery sweeper: re-enqueues runs whose lease expired (a dead worker), tasks that were
persisted but never enqueued (a web process that died in between), and enqueued runs no worker
started (a worker killed after taking the message). A task whose runs lost their worker
``MCPQ_MAX_RUNS`` times (a tool that kills the process running it) is failed instead: re-run, it
would take down a worker per lease until its TTL, forever without one.

It runs as a thread inside every worker's main process; a Redis lock lets one sweep at a time
across the whole deployment, so no extra process type is needed. Duplicates it might cause are
harmless: ``claim`` answers BUSY/PARKED/TERMINAL to any run that must not start.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import Celery

from mcpq.shared.celery_config import publish_options
from mcpq.shared.errors import INTERNAL_ERROR, StoreUnavailable, rpc_error
from mcpq.shared.jobs import Run, send_run
from mcpq.shared.logs import task_hash
from mcpq.shared.settings import Settings
from mcpq.shared.store import Due, Reply, TaskStatus, TaskStore, open_store

log = logging.getLogger("mcpq.sweeper")

#: Runs re-sent per sweep, at most (each sweep holds the deployment-wide lock briefly).
BATCH = 100


def poisoned_message(tool: str, max_runs: int) -> str:
    """The status message (and error message) of a task failed for its lost runs."""
    return f"Tool {tool} was stopped after {max_runs} runs that lost their worker (MCPQ_MAX_RUNS)"


def _fail_poisoned(store: TaskStore, item: Due) -> bool:
    """Fail a poisoned task, shown like any failed run (``error`` and ``statusMessage``).
    Fenced by the generation the sweep found: if a run claimed the task since (a stale
    duplicate message), that run goes on, and is counted if it loses its worker too. Once the
    task is terminal, a straggling run's writes answer TERMINAL and its renewal stops it."""
    message = poisoned_message(item.tool, store.max_runs)
    error = rpc_error(INTERNAL_ERROR, message)
    reply = store.finish(item.ref, item.gen, TaskStatus.FAILED, error, message, poisoned=True)
    if reply is not Reply.OK:
        return False
    log.warning(
        "task failed: its runs kept losing their worker (MCPQ_MAX_RUNS)",
        extra={"task": task_hash(item.ref), "tool": item.tool, "transition": "failed"},
    )
    return True


def sweep_once(app: Celery, store: TaskStore, settings: Settings) -> int:
    """One sweep under the deployment-wide lock; returns how many runs were enqueued again."""
    # NOTE: the lock only has to outlive one sweep (it is released right after); its TTL bounds
    # how long a worker killed mid-sweep delays the next one.
    lock_ms = int(max(settings.sweep_interval_s * 2, 1.0) * 1000)
    with store.lock("sweeper", lock_ms) as held:
        if not held:
            return 0
        # sweep.lua re-arms each due task on the unclaimed list before we publish, so a
        # message lost here (broker down, this process killed) is found again next time.
        due = store.sweep(
            int(settings.unclaimed_after_s * 1000), BATCH, lease_ms=int(settings.lease_s * 1000)
        )
        for item in due:
            if item.poisoned:
                # Not sent again; a sweeper that dies before this finds it again (re-armed).
                _fail_poisoned(store, item)
                continue
            # recovery: a Celery id of its own, never dropped for a cancel a failover undid.
            run = Run(item.tool, item.ref, item.queue or settings.default_queue, recovery=True)
            # On RabbitMQ: confirmed, and bounded (publish_options), so a silent broker fails
            # this sweep (the task stays re-armed) instead of holding the sweeper forever.
            send_run(app, run, **publish_options(settings))
            store.mark_enqueued(item.ref, int(settings.requeue_unstarted_s * 1000))
    sent = sum(1 for item in due if not item.poisoned)
    if sent:
        log.warning("sweeper re-enqueued %d run(s)", sent)
    return sent


def sweep_due(app: Celery, store: TaskStore, settings: Settings, stop: threading.Event) -> int:
    """Sweeps one after another while each sends something, for a few intervals at most;
    returns how many runs were sent again.

    NOTE: a lost worker may have held 10,000 runs on its run loop; at one batch per interval
    they would wait four minutes to be sent again. Back to back, they go at the broker's pace,
    the lock still taken and let go for each batch, so another worker's sweep may interleave.
    (Not "while the batch was full": a sharded store gives each shard its share of the batch,
    and one shard running dry would stop the others' sweeps with their runs still due.)"""
    budget = time.monotonic() + max(settings.sweep_interval_s, 1.0) * 5
    sent = total = sweep_once(app, store, settings)
    while sent > 0 and time.monotonic() < budget and not stop.is_set():
        sent = sweep_once(app, store, settings)
        total += sent
    return total


def _loop(app: Celery, settings: Settings, node: str, stop: threading.Event) -> None:
    store = open_store(settings)
    while True:
        try:
            store.beat_worker(node)
            sweep_due(app, store, settings, stop)
        except StoreUnavailable:
            log.warning("sweep failed: task store unavailable")
        except Exception as exc:  # e.g. the broker is down: this thread must outlive it
            log.warning("sweep failed: %s", type(exc).__name__)
        if stop.wait(settings.sweep_interval_s):
            return


class Sweeper:
    """A worker node's sweeper thread, and how to stop it."""

    def __init__(self, app: Celery, settings: Settings, node: str) -> None:
        self._stop = threading.Event()
        args = (app, settings, node, self._stop)
        self._thread = threading.Thread(target=_loop, args=args, name="mcpq-sweeper", daemon=True)
        self._thread.start()

    def stop(self, wait_s: float = 5.0) -> None:
        """No more sweeps; returns once a sweep under way is over (or after ``wait_s``).

        NOTE: a stopping worker stops its sweeper before it hands its runs back: the runs it
        releases are due at once, and a sweep of its own would send them through a consumer
        that is shutting down, where kombu may find no route for them (they would then wait
        ``MCPQ_REQUEUE_UNSTARTED_S`` for the next send instead of going on at once)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(wait_s)


def start_sweeper(app: Celery, settings: Settings, node: str) -> Sweeper:
    """Start the sweeper (and the worker heartbeat) thread of this worker node."""
    return Sweeper(app, settings, node)
