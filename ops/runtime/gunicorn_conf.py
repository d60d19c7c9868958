"""gunicorn configuration for the web tier, loaded with `-c python:mcpq.ops.runtime.gunicorn_conf`.

`mcpq web` passes `--bind` and `--workers` on the command line (command-line values override this
file); the defaults below make plain `gunicorn -c python:ops.runtime.gunicorn_conf` behave the
same. The worker class is uvicorn's (``ops.runtime.uvicorn_worker``): Falcon's ASGI app on an event
loop keeps serving while some requests wait (synchronous tool calls, SSE), which sync or gthread
workers cannot.
"""

from __future__ import annotations

import os
from typing import Any

from mcpq.shared.settings import Settings

_settings = Settings.from_env()

wsgi_app = "mcpq.frontend.entry:app"
bind = [f"0.0.0.0:{_settings.port}"]
workers = _settings.web_concurrency
# uvicorn's worker on httptools, with a bounded request head and deadlines for slow clients
# (MCPQ_MAX_HEADER_BYTES, MCPQ_MAX_HEADERS, MCPQ_HEADER_TIMEOUT_S, MCPQ_BODY_TIMEOUT_S).
worker_class = "mcpq.ops.runtime.uvicorn_worker.McpqUvicornWorker"

# Heroku sends SIGKILL 30 s after SIGTERM: finish in-flight requests well before that.
graceful_timeout = 25
# Seconds a worker may miss its heartbeat before the master restarts it (the event loop must
# never block this long; blocking work such as Celery's producer runs in a thread pool).
timeout = 30
keepalive = 5
# gunicorn's and uvicorn's own lines (boot, worker start, shutdown) follow MCPQ_LOG_LEVEL too.
loglevel = _settings.log_level.lower()

# NOTE(gunicorn>=25): the runtime control socket defaults to one fixed path per user, which
# concurrent instances (dev, tests, several web formations) would fight over. We do not use
# `gunicornc`, so it is off.
control_socket_disable = True

# The heartbeat file is touched every second; keep it in memory where /dev/shm exists (containers).
# (gunicorn's own advice for Docker; the file is private to the worker, so S108 does not apply.)
if os.path.isdir("/dev/shm"):  # noqa: S108
    worker_tmp_dir = "/dev/shm"  # noqa: S108

#: Modules each worker would import only after the fork, imported by the master too so that
#: their pages are shared like the app's (about 2 MiB of every worker): uvicorn's event loop and
#: lifespan, the parts of Celery the producer loads on first use, the codec a host name needs.
#: Modules only: nothing here creates a loop, a client or a thread.
_POST_FORK_MODULES = (
    "uvloop",
    "uvicorn.loops.uvloop",
    "uvicorn.lifespan.on",
    "celery.app.amqp",
    "celery.app.events",
    "celery.app.routes",
    "celery.app.task",
    "celery.backends.base",
    "celery.fixups.django",
    "celery.loaders.app",
    "kombu.mixins",
    "encodings.idna",
)


def on_starting(server: Any) -> None:
    """Refuse a configuration that cannot be right (``ops.runtime.preflight``) in one line, also
    when gunicorn is started without ``mcpq web``."""
    import contextlib
    import gc
    import importlib

    from mcpq.ops.runtime.preflight import bind_host, web_problem

    problem = web_problem(_settings, [bind_host(b) for b in server.cfg.bind])
    if problem:
        raise SystemExit(f"mcpq web: {problem}")
    import logging

    from mcpq.shared import logs, redis_tls

    # Here, in the master: one line per web server, not one per gunicorn worker.
    if warning := redis_tls.startup_warning(_settings):
        logs.configure(_settings.log_format, _settings.log_level)
        logging.getLogger("mcpq.web").warning(warning)
    from mcpq.ops.runtime.uvicorn_worker import host_warning

    if warning := host_warning(_settings, list(server.cfg.bind)):
        logs.configure(_settings.log_format, _settings.log_level)
        logging.getLogger("mcpq.web").warning(warning)
    # The app's modules (Falcon, Celery, kombu, redis-py, pydantic, jsonschema, cryptography …)
    # are imported once here, in the master: forked workers share those pages instead of each
    # holding its own copy. Nothing is built here (no client, pool or thread: `preload_app` stays
    # off and each worker creates the app after fork), so nothing crosses the fork.
    import mcpq.frontend.app  # noqa: F401

    if "oauth" in _settings.auth:
        # The app imports OAuth's modules (httpx, PyJWT) only when it is configured (each
        # worker would then import them after the fork): here too, so they are shared alike.
        importlib.import_module("mcpq.frontend.auth.oauth")

    for name in _POST_FORK_MODULES:
        # Only memory is at stake: a module a newer release moved must not stop the server
        # (a unit test imports each, so the list does not go stale unnoticed).
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    # What the master holds now is never collected in a worker: without this, a worker's GC
    # writes to every inherited object's header and so copies the shared pages anyway (the
    # pattern CPython's gc.freeze documentation describes for forking servers).
    gc.collect()
    gc.freeze()


def post_fork(server: Any, worker: Any) -> None:
    """Runs in each worker right after fork.

    Placeholder: reset anything inherited from the master that must not be shared across
    processes (Redis connection pools, thread pools, RNG state). Today the app is created after
    fork (`preload_app` is off; the master only imports its modules), so each worker builds its
    own clients and there is nothing to do.
    """


def child_exit(server: Any, worker: Any) -> None:
    """A worker exited: drop its live gauges from the prometheus multiprocess directory."""
    if _settings.prometheus_multiproc_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
