"""``create_worker_app``: the composition root of the workers, as ``frontend.app.create_app`` is
the web tier's.

It builds mcpq's Celery app (:class:`WorkerApp`) from the settings and a tool registry (given by
the caller, or loaded from ``MCPQ_TOOLS``): one Celery task per tool, named after the tool (so
Flower shows tool runs by name), each taking the task's storage ``ref``; JSON-only
serialisation (``mcpq.shared.celery_config``); the worker's signal handlers. What a worker process's
runs share (the store, the wake-ups, the lease keeper, the report flusher) is built by the app
on the process's first run (:meth:`WorkerApp.run_deps`), and held by it.

Importing this module builds nothing. ``mcpq worker`` (``mcpq.workers.main``) calls the factory;
``mcpq.workers.entry`` holds the app built from the environment for the ``celery -A`` command lines
(Flower).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from celery import Celery, Task, signals
from celery.exceptions import CPendingDeprecationWarning, Ignore

from mcpq.shared import logs, redis_tls, tracing
from mcpq.shared.celery_config import broker_is_amqp, broker_is_store, celery_config
from mcpq.shared.jobs import Run, read_run
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.shared.store import open_store
from mcpq.shared.store.clients import store_keys, sync_client
from mcpq.shared.store.wakeups import Wakeups
from mcpq.workers import amqp_transport, broker_watch, run_loop, run_metrics, solo
from mcpq.workers.heartbeat import LeaseKeeper
from mcpq.workers.io_pool import current_slot
from mcpq.workers.outcomes import RunOutcome
from mcpq.workers.redis_transport import TRANSPORT
from mcpq.workers.reports import ReportFlusher
from mcpq.workers.runner import RunControl, RunDeps, run_task
from mcpq.workers.sweeper import Sweeper, start_sweeper

log = logging.getLogger("mcpq.worker")

#: Outcomes whose job ends with Celery's ``Ignore``: the MCP state its custom event showed
#: (``cancelled``, ``parked``) stays, which Celery would overwrite with SUCCESS; an abandoned
#: run's job was answered when it was let go of (``mcpq.workers.io_pool``).
_NOT_A_SUCCESS = frozenset({RunOutcome.CANCELLED, RunOutcome.PARKED, RunOutcome.ABANDONED})


class WorkerApp(Celery):
    """mcpq's Celery app, with what its worker processes need: the settings, the tools, and per
    process the dependencies of its runs."""

    def __init__(self, settings: Settings, registry: Registry) -> None:
        super().__init__("mcpq")
        self.settings = settings
        self.registry = registry
        self._deps: tuple[int, RunDeps] | None = None
        #: The node's sweeper, once the worker is ready (``_SignalHandlers.start_sweeper``).
        self.sweeper: Sweeper | None = None
        self._deps_lock = threading.Lock()  # a threads pool builds them from many threads at once
        self._signal_handlers: _SignalHandlers | None = None  # set by create_worker_app

    def run_deps(self) -> RunDeps:
        """This process's dependencies, built on its first run: after the fork, as Redis
        connections must not cross one (a prefork child builds its own)."""
        with self._deps_lock:
            if self._deps is None or self._deps[0] != os.getpid():
                self._deps = (os.getpid(), build_run_deps(self.settings, self.registry))
            return self._deps[1]

    def hand_back_runs(self) -> None:
        """The io pool stops (``workers.io_pool``): its runs are threads of this process; hand them
        back and let go of them (a prefork child hands its own run back on SIGTERM)."""
        if self.sweeper is not None:
            self.sweeper.stop()  # first: see Sweeper.stop
        deps = self._deps
        if deps is not None and deps[0] == os.getpid():
            handed = deps[1].leases.hand_back_all() + solo.stop_children()
            if (loop := run_loop.current()) is not None:
                loop.stop()  # its runs were handed back above: they write nothing more
            if handed:
                log.info("handed %d runs back", handed)


def create_worker_app(settings: Settings, registry: Registry | None = None) -> WorkerApp:
    """mcpq's Celery app for ``settings``, one Celery task per tool of ``registry`` (by default
    the modules of ``MCPQ_TOOLS``)."""
    tools = registry if registry is not None else Registry.from_modules(settings.tools)
    app = WorkerApp(settings, tools)
    app.conf.update(celery_config(settings))
    if broker_is_store(settings):
        # kombu's Redis transport without its Redis-side ack emulation (recovery is the
        # store's), its reconnects on the event loop guarded (mcpq.workers.event_loop_guard).
        app.conf.broker_transport = TRANSPORT
    elif broker_is_amqp(settings):
        # kombu's py-amqp transport (acks, redelivery and prefetch are the broker's), its
        # reconnects on the event loop guarded as the Redis one's. Any other broker URL gets
        # kombu's own transport for it.
        app.conf.broker_transport = amqp_transport.transport_for(settings.broker_url)
    # Broker reconnects bounded by MCPQ_BROKER_WAIT_S, then exit 3 (mcpq.workers.broker_watch).
    app.conf.worker_consumer = "mcpq.workers.broker_watch:BoundedConsumer"
    for tool in app.registry.tools.values():
        _register_job(app, tool.name)
    _connect_signals(app)
    return app


def build_run_deps(settings: Settings, registry: Registry, *, min_peers: int = 0) -> RunDeps:
    """One process's run dependencies (``min_peers``: see ``LeaseKeeper``; ``workers.solo``)."""
    store = open_store(settings)
    # Waiting runs (ctx.ask, ctx.sleep) share one pub/sub connection per process.
    wakeups = Wakeups(sync_client(settings), store_keys(settings))
    leases = LeaseKeeper(store, settings.lease_s, settings.cancel_grace_s, min_peers=min_peers)
    reports = ReportFlusher(settings.report_delay_ms / 1000)
    return RunDeps(settings, store, registry, leases, wakeups, reports)


class _JobHooks:
    """What a job lends its run: the state events, the pool process's kill, the metrics of its
    end. Methods of one small object, not closures: a run on the run loop keeps them for as
    long as it waits (10,000 runs, each with closures and their cells)."""

    __slots__ = ("_app", "_job_id", "_started", "_tool", "hostname")

    def __init__(self, app: WorkerApp, tool: str, job_id: str, hostname: str | None) -> None:
        self._app, self._tool, self._job_id, self.hostname = app, tool, job_id, hostname
        self._started = time.perf_counter()

    def terminate(self) -> None:
        self._app.control.revoke(self._job_id, terminate=True, signal="SIGKILL")

    def on_state(self, state: str) -> None:
        # Not self.send_event: Celery keeps the request per thread; this sends the state of
        # this job whichever thread reports it. In the consumer's process (an io pool) it
        # goes out as Celery's own task events do, through the consumer's dispatcher and
        # only while task events are on: a dispatcher of its own each time (a producer, a
        # channel, a Redis client) cost a run about a millisecond for an event nobody asked
        # for, and retried without bound through a broker outage.
        if broker_watch.has_consumer():
            if (dispatcher := broker_watch.task_event_dispatcher()) is not None:
                dispatcher.send(f"task-{state}", uuid=self._job_id)
            return
        with self._app.events.default_dispatcher(hostname=self.hostname) as own:
            own.send(f"task-{state}", uuid=self._job_id, retry=True)

    def ended(self, outcome: RunOutcome) -> None:
        run_metrics.record(self._tool, outcome, time.perf_counter() - self._started)


def _register_job(app: WorkerApp, tool_name: str) -> None:
    async_runs = app.settings.async_runs if app.registry.tools[tool_name].is_async else 0

    def job(self: Task[Any, Any], ref: str) -> str:
        run = read_run(tool_name, [ref], vars(self.request))
        hooks = _JobHooks(app, tool_name, str(self.request.id), self.request.hostname)

        # A prefork pool process runs its job on its main thread, one at a time: a run that
        # ignores its cancel may be stopped by killing the process. An io pool runs many jobs
        # in one process: never kill it; the job's slot is let go of instead (mcpq.workers.io_pool).
        slot = current_slot()
        alone = slot is None and threading.current_thread() is threading.main_thread()
        control = RunControl(
            hooks.terminate if alone else None,
            hooks.on_state,
            let_go=None if slot is None else slot.let_go,
        )
        # An io pool's async def tool waits on the process's run loop, holding no thread
        # (MCPQ_ASYNC_RUNS: mcpq.workers.run_loop); its run ends after this job does.
        loop = (
            run_loop.run_loop(async_runs, app.settings.loop_stall_s)
            if async_runs and slot is not None
            else None
        )

        traced = tracing.current()
        if traced.on:
            delivery = self.request.delivery_info or {}
            described = _described(run, delivery, slot is None, hooks.hostname)
            outcome = _traced_run(app, traced, run, control, alone, described, loop, hooks.ended)
        else:  # off: not even the span's attributes are made
            deps = app.run_deps()
            outcome = run_task(deps, run, control, alone=alone, loop=loop, on_end=hooks.ended)
        if outcome is not RunOutcome.DETACHED:
            hooks.ended(outcome)
        if outcome in _NOT_A_SUCCESS:
            raise Ignore()
        return outcome.value

    job.__name__ = f"run_{tool_name}"
    # shared=False: Celery would otherwise add this task to every app finalized later in the
    # process (its "shared task" list), bound to this app's dependencies.
    app.task(name=tool_name, bind=True, acks_late=True, ignore_result=True, shared=False)(job)


def _described(
    run: Run, delivery: Mapping[str, Any], prefork: bool, hostname: str | None
) -> dict[str, str | int | float | bool]:
    """A run span's attributes: what identifies it (the task's ref and the tool's name, never the
    taskId), the queue it came from, and where it ran (the io pool, many runs a process, or a
    prefork child; the worker's node name)."""
    return {
        "gen_ai.tool.name": run.tool,
        "mcpq.task.ref": run.ref,
        "messaging.destination.name": str(delivery.get("routing_key") or ""),
        "mcpq.worker.pool": "prefork" if prefork else "io",
        "mcpq.worker.name": str(hostname or ""),
    }


def _traced_run(
    app: WorkerApp,
    traced: tracing.Tracing,
    run: Run,
    control: RunControl,
    alone: bool,
    attributes: dict[str, str | int | float | bool],
    loop: run_loop.RunLoop | None,
    ended: Callable[[RunOutcome], None],
) -> RunOutcome:
    """The run inside its span: a child of the span of the request that created the task (its
    context stored with the task), linked to the request that sent this run (the message's, when
    another: an answer). A run handed to the run loop ends its span when it ends there."""
    # The run's parent is the create's span: the message names it (its sender created the task,
    # or an answer's resume says which), unless the sender had no trace (the sweeper's replay):
    # then it is read from the task, one round trip only on that path.
    created = run.task_trace or run.trace
    if not created:
        created = app.run_deps().store.trace_of(run.ref)
    with traced.run_span(f"run {run.tool}", attributes, created, run.trace) as span:
        # Kept open from the start when a loop may take the run: it may end there before
        # run_task returns here.
        kept = span.keep_open() if loop is not None else None

        def on_end(outcome: RunOutcome) -> None:
            span.set("mcpq.run.outcome", outcome.value)
            if kept is not None:
                kept.end()
            ended(outcome)

        outcome = run_task(
            app.run_deps(), run, control, alone=alone, on_claim=_attempt(span), loop=loop,
            on_end=on_end,
        )  # fmt: skip
        if outcome is not RunOutcome.DETACHED:
            span.set("mcpq.run.outcome", outcome.value)
            if kept is not None:
                kept.end()
    return outcome


def _attempt(span: tracing.Span) -> Callable[[int], None]:
    """The run's attempt number (the task's ``runs`` after its claim), on its span."""

    def claimed(runs: int) -> None:
        span.set("mcpq.run.attempt", runs)

    return claimed


class _NoBackendNoise(logging.Filter):
    """We run without a result backend on purpose; Celery warns about it on every revoke."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to mark task")


def _connect_signals(app: WorkerApp) -> None:
    control_log = logging.getLogger("celery.worker.control")
    if not any(isinstance(f, _NoBackendNoise) for f in control_log.filters):
        control_log.addFilter(_NoBackendNoise())
    app._signal_handlers = _SignalHandlers(app)


class _SignalHandlers:
    """The app's handlers of Celery's signals. Celery holds receivers weakly, and the app holds
    these: they live as long as the app does."""

    def __init__(self, app: WorkerApp) -> None:
        self._app = app
        signals.after_setup_logger.connect(self.log_format)
        signals.after_setup_task_logger.connect(self.log_format)
        signals.celeryd_after_setup.connect(self.warn_unverified_tls)
        signals.celeryd_after_setup.connect(self.quiet_connection_loss_warning)
        signals.worker_ready.connect(self.start_sweeper)
        # Tracing per process: the main one (an io pool's runs), and each prefork child after
        # its fork (the exporter's thread does not survive one). Off: nothing is imported.
        signals.worker_init.connect(self.configure_tracing)
        signals.worker_process_init.connect(self.configure_tracing)

    def log_format(self, logger: logging.Logger, **_: Any) -> None:
        """Celery's own lines and mcpq's share one format (JSON lines unless
        MCPQ_LOG_FORMAT=text)."""
        settings = self._app.settings
        formatter = logs.TextFormatter() if settings.log_format == "text" else logs.JsonFormatter()
        for handler in logger.handlers:
            handler.setFormatter(formatter)
        logging.getLogger("mcpq").setLevel(settings.log_level.upper())

    def configure_tracing(self, **_: Any) -> None:
        tracing.configure("worker")

    def warn_unverified_tls(self, **_: Any) -> None:
        """Once per worker node (its main process, logging set up, before it connects)."""
        if warning := redis_tls.startup_warning(self._app.settings):
            log.warning(warning)

    def quiet_connection_loss_warning(self, **_: Any) -> None:
        """Celery warns, with a paragraph, at every loss of the broker that a future version
        will cancel running tasks then; mcpq turns that off on purpose
        (``worker_cancel_long_running_tasks_on_connection_loss``: recovery is the store's), so
        the warning says nothing. Added here, after Celery's logging set-up, which puts its
        own "always show" filter for the category in front of any added before."""
        warnings.filterwarnings(
            "ignore",
            category=CPendingDeprecationWarning,
            module=r"celery\.worker\.consumer\.consumer",
        )

    def start_sweeper(self, sender: Any = None, **_: Any) -> None:
        """The worker node is ready: its sweeper (and heartbeat) thread, its run_metrics."""
        node = str(getattr(sender, "hostname", "") or os.getpid())
        self._app.sweeper = start_sweeper(self._app, self._app.settings, node)
        run_metrics.serve(self._app.settings)
