"""One run of a tool: claim, call, finish. Everything a Celery job does, without Celery.

Outcomes map to the spec: a returned value or an exception inside the tool is ``completed``
(the latter with ``isError: true``); a :class:`shared.errors.ProtocolError` is ``failed`` with a
JSON-RPC ``error``. Every terminal write is fenced by the run's generation.

Only a ``ToolError``'s text (written for the model) reaches the client; any other exception
reaches it as a generic text with a random error id, and the worker logs the traceback with that
id (no arguments, no taskId), because an exception's text can carry internals.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcpq.shared import tracing
from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import (
    INTERNAL_ERROR,
    ProtocolError,
    StoreUnavailable,
    TaskCancelled,
    ToolError,
    new_error_id,
    rpc_error,
    tool_crash_text,
)
from mcpq.shared.jobs import Run
from mcpq.shared.logs import task_hash
from mcpq.shared.registry import Registry
from mcpq.shared.results import call_tool_result, error_result
from mcpq.shared.settings import Settings
from mcpq.shared.store import Reply, TaskRecord, TaskStatus, TaskStore
from mcpq.shared.store.wakeups import Wakeups, Watch
from mcpq.shared.tools import Tool
from mcpq.workers import solo
from mcpq.workers.async_context import AsyncRunContext
from mcpq.workers.context import RunContext
from mcpq.workers.execution import RunAbandoned, ToolCall
from mcpq.workers.heartbeat import KeptRun, LeaseKeeper, Watchdog
from mcpq.workers.interrupts import RunParked, RunSuperseded
from mcpq.workers.outcomes import RunOutcome
from mcpq.workers.reports import ReportFlusher

log = logging.getLogger("mcpq.worker")


@dataclass
class RunDeps:
    settings: Settings
    store: TaskStore
    registry: Registry
    #: The process's lease keeper (one thread renews every run's lease).
    leases: LeaseKeeper
    #: The process's shared wake-ups (one connection for every waiting run).
    wakeups: Wakeups
    #: The process's writer of late status reports (``mcpq.workers.reports``).
    reports: ReportFlusher | None = None


@dataclass(frozen=True)
class RunControl:
    """What the job system lends a run: showing a state, and how a run that ignores its cancel
    is stopped: ``terminate`` kills the process it runs in (prefork: one job per process), or
    is ``None`` when the process runs other jobs too (threads): then the tool gets
    ``TaskCancelled`` raised in its thread and ``let_go`` frees the job's slot
    (``mcpq.workers.execution``, ``mcpq.workers.io_pool``)."""

    terminate: Callable[[], None] | None
    on_state: Callable[[str], None]
    let_go: Callable[[], bool] | None = None


def _outcome(
    fn: Callable[[], Any], tool: str, max_result_bytes: int
) -> tuple[TaskStatus, dict[str, Any], str]:
    try:
        result = call_tool_result(fn()).dump()
        # Bounded before it reaches Redis: an oversized result is the tool's error, named.
        check_bytes("the tool's result", result, max_result_bytes, "MCPQ_MAX_RESULT_BYTES")
        return TaskStatus.COMPLETED, result, ""
    except LimitExceeded as exc:
        return TaskStatus.COMPLETED, error_result(str(exc)).dump(), ""
    except ToolError as exc:
        return TaskStatus.COMPLETED, error_result(str(exc)).dump(), ""
    except StoreUnavailable:  # not the tool's fault: the run fails and is recovered by lease
        raise
    except ProtocolError as exc:
        return TaskStatus.FAILED, exc.to_error(), exc.message
    except Exception:
        error_id = new_error_id()
        log.exception("tool %s raised", tool, extra={"tool": tool, "error_id": error_id})
        return TaskStatus.COMPLETED, error_result(tool_crash_text(tool, error_id)).dump(), ""


class _Ending:
    """The run's one "run ended" line: written when the job returns, or earlier, when an io
    run is let go of (its thread may stay in the tool long after; the line says when the run
    ended for the task and the pool)."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._started = time.perf_counter()
        self._lock = threading.Lock()
        self._logged = False

    def log(self, outcome: RunOutcome) -> None:
        with self._lock:
            if self._logged:
                return
            self._logged = True
        if not log.isEnabledFor(logging.INFO):  # the fields cost a hash per run: only if logged
            return
        fields = {
            "task": task_hash(self._run.ref),
            "tool": self._run.tool,
            "transition": outcome.value,
            "request_id": self._run.request_id,
            "latency_ms": round((time.perf_counter() - self._started) * 1000, 2),
        }
        log.info("run ended", extra=fields)


def run_task(
    deps: RunDeps,
    run: Run,
    control: RunControl,
    *,
    alone: bool = False,
    on_claim: Callable[[int], None] | None = None,
) -> RunOutcome:
    """Run the task's tool once; returns what happened (a log and metrics label), and logs it.
    ``alone``: nothing else runs in this process (a prefork pool process, a run of its own);
    otherwise a task that must run alone is run in a child process (``mcpq.workers.solo``).
    ``on_claim``: told the task's run count once this run holds it (its span's attempt)."""
    ending = _Ending(run)
    outcome = _run(deps, run.ref, control, ending, alone, on_claim)
    if outcome is RunOutcome.SOLO:
        # The child logs its own run's end.
        solo.run_alone(deps.store.lost_alone, run, deps.settings.solo_concurrency)
        return outcome
    ending.log(outcome)
    return outcome


def _run(
    deps: RunDeps,
    ref: str,
    control: RunControl,
    ending: _Ending,
    alone: bool,
    on_claim: Callable[[int], None] | None = None,
) -> RunOutcome:
    s, store = deps.settings, deps.store
    # What a loss of this run would say about its tool depends on what else its process
    # holds (judge_loss in _prelude.lua): the claim records it, each renewal updates it. A
    # process that takes other jobs (an io pool) may be joined by more runs at once, so its
    # claim says "not alone" until a renewal finds it alone: a host that dies right after a
    # burst of claims is no evidence against the first of them.
    peers = max(deps.leases.peers(), 0 if alone else 1)
    claim = store.claim(ref, int(s.lease_s * 1000), peers, alone=alone)
    if claim.unreadable:
        # Its payloads do not open with this process's MCPQ_DATA_KEYS (logged by the store,
        # with the key id). This worker may be the one misconfigured (a rolling deploy that has
        # not reached it): the claim is left to expire, unrun, so the sweeper sends the run
        # again and a worker holding the key takes it; a key nobody holds ends the task failed
        # after MCPQ_MAX_RUNS such claims, like any run that keeps losing its worker.
        return RunOutcome.UNREADABLE
    if claim.reply is not Reply.OK or claim.record is None:
        return RunOutcome.not_started(claim.reply)
    record, gen = claim.record, claim.gen
    if on_claim is not None:
        on_claim(record.runs)
    tool = deps.registry.get(record.tool)
    if tool is None:
        message = f"Unknown tool on this worker: {record.tool}"
        store.finish(ref, gen, TaskStatus.FAILED, rpc_error(INTERNAL_ERROR, message), message)
        return RunOutcome.FAILED
    # The run's watch: it subscribes when the tool first waits (ctx.ask, ctx.sleep).
    with deps.wakeups.watch(ref) as watch:
        return _execute(deps, ref, record, gen, tool, control, watch, ending)


def _execute(
    deps: RunDeps,
    ref: str,
    record: TaskRecord,
    gen: int,
    tool: Tool,
    control: RunControl,
    watch: Watch,
    ending: _Ending,
) -> RunOutcome:
    s, store = deps.settings, deps.store
    ctx = RunContext(
        store,
        ref,
        gen,
        record.pre,
        s.input_hold_s,
        control.on_state,
        None if record.sync else record.caps,  # a synchronous call checks them itself (MRTR)
        max_step_bytes=s.max_step_bytes,
        max_message_chars=s.max_message_chars,
        watch=watch,
        reports=deps.reports,
        lease_ms=int(s.lease_s * 1000),
        keep_logs=record.sync,  # only a synchronous call's stream sends its log messages
        tool=tool.name,
        resources=deps.registry.find_resource,
        trace=tracing.current().capture(),  # the run span's (made current by the job)
    )
    # An async tool awaits its context's waits, which run off its loop (mcpq.workers.async_context).
    view = AsyncRunContext(ctx) if tool.is_async else None
    call = ToolCall(lambda: tool.call(ctx if view is None else view, record.arguments))

    def on_cancel(reply: Reply) -> None:
        ctx.interrupt(reply)
        # An async tool's run ends as a sync one's would: cancelled, or superseded.
        call.interrupt(TaskCancelled if reply is Reply.TERMINAL else RunSuperseded)

    def stop() -> None:
        """The grace is over: the run is stopped, the way its pool allows."""
        if control.terminate is not None:
            control.terminate()
        elif call.abandon() and control.let_go is not None and control.let_go():
            ending.log(RunOutcome.ABANDONED)

    kept = KeptRun(ref, gen, on_cancel, stop, _watchdog(store, ref, gen, tool, ctx, s.max_run_s))
    completed = False
    try:
        with deps.leases.keep(kept):
            status, payload, message = _outcome(call.here, tool.name, s.max_result_bytes)
        completed = True
    except RunAbandoned:
        # The tool ignored its cancel (or its run limit) for the grace: the task already has
        # its final state, and the job was answered when it was let go of.
        return RunOutcome.ABANDONED
    except TaskCancelled:
        control.on_state(TaskStatus.CANCELLED)
        return RunOutcome.CANCELLED
    except RunParked:
        control.on_state(RunOutcome.PARKED)
        return RunOutcome.PARKED
    except RunSuperseded:
        return RunOutcome.SUPERSEDED
    except BaseException:  # SystemExit from billiard's SIGTERM handler, KeyboardInterrupt
        hand_back(store, ref, gen)
        raise
    finally:
        # However the run ends, its last write (the finish below, a cancel's, a newer run's)
        # sets the status message: a report still pending would only be refused or overwrite.
        # A synchronous call that completed keeps its last progress for flush_logs below.
        ctx.discard_report(keep=completed)
        if view is not None:
            view.close()
    # A synchronous call's log messages and last progress still pending are written first:
    # its stream sends what it reads before the result, and would never read them after it.
    ctx.flush_logs()
    # Fenced by `gen`: if the task was cancelled meanwhile, or a newer run took it over after
    # our lease lapsed, this result is discarded and the task keeps what it has.
    reply = store.finish(ref, gen, status, payload, message)
    if reply is not Reply.OK:
        return RunOutcome.discarded(reply)
    return RunOutcome.ended(status)


def _watchdog(
    store: TaskStore, ref: str, gen: int, tool: Tool, ctx: RunContext, default_limit_s: float
) -> Watchdog:
    limit_s = tool.run_limit_s(default_limit_s)

    def fail_stalled() -> None:
        message = (
            f"Tool {tool.name} was stopped: it ran for {limit_s:g} s without calling its "
            "context (max_run_s)"
        )
        store.finish(ref, gen, TaskStatus.FAILED, rpc_error(INTERNAL_ERROR, message), message)

    return Watchdog(ctx.busy_for, limit_s, fail_stalled)


def hand_back(store: TaskStore, ref: str, gen: int) -> None:
    """Release the run's lease so another worker takes the task at once: this process is being
    stopped (Heroku's SIGTERM reaches pool processes as SystemExit)."""
    try:
        store.release(ref, gen)
    except Exception:
        log.warning("could not hand back the run", exc_info=True)
