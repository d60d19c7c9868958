"""``mcpq worker`` reaches its broker, and the task store's Redis when that is another server,
before it execs Celery.

Celery left alone retries an unreachable broker forever, with growing waits and no hint of
what to check. Here the worker keeps trying for ``MCPQ_BROKER_WAIT_S`` (a broker that comes up
a little after the worker, as in a Procfile formation, is waited for), saying once that it
waits; then it stops with one line on stderr naming the URL (password hidden) and the variable
it came from, and exit status :data:`EXIT_UNREACHABLE`, so the platform restarts it. Once
running, the worker bounds its reconnects the same way (``mcpq.workers.broker_watch``).

Each attempt connects as the worker will: the broker through a Celery app configured by
``mcpq.shared.celery_config`` (its URL, TLS and transport options; Sentinel, RabbitMQ alike), the
store through ``mcpq.shared.store.clients.sync_client``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from mcpq.shared.celery_config import (
    broker_is_store,
    broker_origin,
    celery_config,
    connection_problem,
    unreachable,
)
from mcpq.shared.redis_urls import redact_url
from mcpq.shared.settings import Settings

#: ``mcpq worker``'s exit status when its broker or store stayed unreachable (documented in
#: docs/operations.md); 1 and 2 are Python's and argparse's.
EXIT_UNREACHABLE = 3

#: Pause between attempts: doubling from the first, up to the last (bounded by the deadline).
FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 5.0


@dataclass(frozen=True)
class Target:
    """A server the worker needs: what it is, its URL as configured, the variable it came
    from, and one connection attempt (raises when the server cannot be reached)."""

    what: str
    url: str
    setting: str
    attempt: Callable[[], None]


def _broker_attempt(settings: Settings) -> Callable[[], None]:
    from celery import Celery

    app = Celery("mcpq-broker-probe", set_as_current=False)
    app.conf.update(celery_config(settings))

    def attempt() -> None:
        # A fresh connection per attempt, closed after: kombu's own retry loop is not used
        # (its waits grow to 30 s and could overrun MCPQ_BROKER_WAIT_S by that much).
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=0)

    return attempt


def _store_attempt(settings: Settings) -> None:
    from mcpq.shared.store.clients import sync_client

    client = sync_client(settings)
    try:
        client.ping()
    finally:
        client.close()


def targets(settings: Settings) -> list[Target]:
    """The broker, then the task store's Redis unless it is the broker."""
    url, setting = broker_origin(settings)
    found = [Target("the broker", url, setting, _broker_attempt(settings))]
    if not broker_is_store(settings):
        found.append(
            Target(
                "the task store", settings.redis_url, "REDIS_URL", lambda: _store_attempt(settings)
            )
        )
    return found


def wait_for_services(
    settings: Settings,
    *,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    found: list[Target] | None = None,
) -> int:
    """0 once every target answered within ``MCPQ_BROKER_WAIT_S`` (one deadline for all);
    else :data:`EXIT_UNREACHABLE` after one line on ``out`` (stderr). At most one line says
    that it waits, however many attempts fail."""
    err = sys.stderr if out is None else out
    wait_s = settings.broker_wait_s
    deadline = clock() + wait_s
    said_waiting = False
    for target in targets(settings) if found is None else found:
        pause = FIRST_PAUSE_S
        while True:
            try:
                target.attempt()
                break
            # Whatever stops an attempt (refused, timed out, TLS, a wrong password, no
            # primary from the sentinels) stops the worker alike: retried, then reported.
            except Exception as exc:
                remaining = deadline - clock()
                if remaining <= 0:
                    line = unreachable(target.what, target.url, target.setting, wait_s, exc)
                    print(f"mcpq worker: {line}", file=err, flush=True)
                    return EXIT_UNREACHABLE
                if not said_waiting:
                    said_waiting = True
                    print(
                        f"mcpq worker: waiting up to {wait_s:g} s for {target.what} at "
                        f"{redact_url(target.url)} ({connection_problem(exc, target.url)})",
                        file=err,
                        flush=True,
                    )
                sleep(min(pause, remaining))
                pause = min(pause * 2, MAX_PAUSE_S)
    return 0
