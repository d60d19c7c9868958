"""The Celery application: one Celery task per tool, named after the tool (so Flower shows tool
runs by name), each taking the task's storage ``ref``. JSON-only serialisation (see
``shared.celery_config``).

Run with ``mcpq worker`` (``python -m workers.main``: Celery's ``worker`` command).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from celery import Celery, Task, signals
from celery.exceptions import Ignore

from shared import logs, redis_tls
from shared.celery_config import broker_is_store, celery_config
from shared.jobs import read_run
from shared.settings import Settings
from shared.store import TaskStatus, open_store
from shared.store.clients import store_keys, sync_client
from shared.store.wakeups import Wakeups
from shared.tools import Registry
from workers import metrics
from workers.heartbeat import LeaseKeeper
from workers.pools import current_slot
from workers.reports import ReportFlusher
from workers.runner import PARKED, RunControl, RunDeps, run_task
from workers.transport import TRANSPORT

log = logging.getLogger("mcpq.worker")
settings = Settings.from_env()
app = Celery("mcpq")
app.conf.update(celery_config(settings))
if broker_is_store(settings):
    # kombu's Redis transport without its Redis-side ack emulation (recovery is the store's).
    # Any other broker gets kombu's own transport for its URL (RabbitMQ: py-amqp, where acks,
    # redelivery and prefetch are the broker's).
    app.conf.broker_transport = TRANSPORT
# Broker reconnects bounded by MCPQ_BROKER_WAIT_S, then exit 3 (workers.broker_watch).
app.conf.worker_consumer = "workers.broker_watch:BoundedConsumer"
registry = Registry.from_modules(settings.tools)

_deps: tuple[int, RunDeps] | None = None
_deps_lock = threading.Lock()  # a threads pool builds them from many threads at once


def deps() -> RunDeps:
    """Per-process dependencies, built after fork (Redis connections must not cross a fork)."""
    global _deps
    with _deps_lock:
        if _deps is None or _deps[0] != os.getpid():
            store = open_store(settings)
            # Waiting runs (ctx.ask, ctx.sleep) share one pub/sub connection per process.
            wakeups = Wakeups(sync_client(settings), store_keys(settings))
            leases = LeaseKeeper(store, settings.lease_s, settings.cancel_grace_s)
            reports = ReportFlusher(settings.report_delay_ms / 1000)
            _deps = (
                os.getpid(),
                RunDeps(settings, store, registry, leases, wakeups, reports),
            )
        return _deps[1]


def _make_job(tool_name: str) -> Any:
    def job(self: Task[Any, Any], ref: str) -> str:
        run = read_run(tool_name, [ref], vars(self.request))
        job_id = str(self.request.id)

        def terminate() -> None:
            app.control.revoke(job_id, terminate=True, signal="SIGKILL")

        hostname = self.request.hostname

        def on_state(state: str) -> None:
            # Not self.send_event: Celery keeps the request per thread; this sends the state of
            # this job whichever thread reports it.
            with app.events.default_dispatcher(hostname=hostname) as dispatcher:
                dispatcher.send(f"task-{state}", uuid=job_id, retry=True)

        # A prefork pool process runs its job on its main thread, one at a time: a run that
        # ignores its cancel may be stopped by killing the process. An io pool runs many jobs
        # in one process: never kill it; the job's slot is let go of instead (workers.pools).
        slot = current_slot()
        alone = slot is None and threading.current_thread() is threading.main_thread()
        control = RunControl(
            terminate if alone else None, on_state, let_go=None if slot is None else slot.let_go
        )
        started = time.perf_counter()
        outcome = run_task(deps(), run, control)
        metrics.record(tool_name, outcome, time.perf_counter() - started)
        if outcome in {TaskStatus.CANCELLED, PARKED, "abandoned"}:
            # Keep the MCP state its custom event showed; Celery would overwrite it with SUCCESS.
            raise Ignore()
        return outcome

    job.__name__ = f"run_{tool_name}"
    return app.task(name=tool_name, bind=True, acks_late=True, ignore_result=True)(job)


for _tool in registry.tools.values():
    _make_job(_tool.name)


class _NoBackendNoise(logging.Filter):
    """We run without a result backend on purpose; Celery warns about it on every revoke."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to mark task")


logging.getLogger("celery.worker.control").addFilter(_NoBackendNoise())


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _log_format(logger: logging.Logger, **_: Any) -> None:
    """Celery's own lines and mcpq's share one format (JSON lines unless MCPQ_LOG_FORMAT=text)."""
    formatter = logs.TextFormatter() if settings.log_format == "text" else logs.JsonFormatter()
    for handler in logger.handlers:
        handler.setFormatter(formatter)
    logging.getLogger("mcpq").setLevel(settings.log_level.upper())


def hand_back_runs() -> None:
    """The io pool stops (``workers.pools``): its runs are threads of this process; hand them
    back and let go of them (a prefork child hands its own run back on SIGTERM)."""
    if _deps is not None and _deps[0] == os.getpid():
        handed = _deps[1].leases.hand_back_all()
        if handed:
            log.info("handed %d runs back", handed)


@signals.celeryd_after_setup.connect
def _warn_unverified_tls(**_: Any) -> None:
    """Once per worker node (its main process, logging set up, before it connects)."""
    if warning := redis_tls.startup_warning(settings):
        log.warning(warning)


@signals.worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    from workers.sweeper import start_sweeper

    start_sweeper(app, settings, str(getattr(sender, "hostname", "") or os.getpid()))
    metrics.serve(settings)
