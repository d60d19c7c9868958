"""The parts of a run both ways of running it share (``mcpq.workers.runner``: on the job's
thread; ``mcpq.workers.detached``: on the process's run loop): what a run is lent, how a tool's
return or raise becomes the task's outcome, how the result is written, the run's one "run
ended" line, and the hand-back of a stopping process."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import (
    ProtocolError,
    StoreUnavailable,
    TaskCancelled,
    ToolError,
    new_error_id,
    tool_crash_text,
)
from mcpq.shared.jobs import Run
from mcpq.shared.logs import task_hash
from mcpq.shared.registry import Registry
from mcpq.shared.results import call_tool_result, error_result
from mcpq.shared.settings import Settings
from mcpq.shared.store import Reply, TaskStatus, TaskStore
from mcpq.shared.store.wakeups import Wakeups
from mcpq.shared.tools import Tool
from mcpq.workers.async_context import AsyncRunContext
from mcpq.workers.context import RunContext
from mcpq.workers.execution import RunAbandoned, ToolCall
from mcpq.workers.heartbeat import KeptRun, LeaseKeeper
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


def outcome_of(
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


class Ending:
    """The run's one "run ended" line: written when the job returns, or earlier, when an io
    run is let go of (its thread may stay in the tool long after; the line says when the run
    ended for the task and the pool)."""

    __slots__ = ("_lock", "_logged", "_run", "_started")

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


@dataclass(slots=True)
class Prepared:
    """A claimed run, ready to call: its context, the view an async tool gets, the call, and
    what the lease keeper holds of it."""

    tool: Tool
    ctx: RunContext
    view: AsyncRunContext | None
    call: ToolCall
    kept: KeptRun


def conclude(
    store: TaskStore,
    ctx: RunContext,
    ref: str,
    gen: int,
    status: TaskStatus,
    payload: dict[str, Any],
    message: str,
) -> RunOutcome:
    """The run's result written: what it must write first, then its finish."""
    # A synchronous call's log messages and last progress still pending are written first:
    # its stream sends what it reads before the result, and would never read them after it.
    ctx.flush_logs()
    # Fenced by `gen`: if the task was cancelled meanwhile, or a newer run took it over after
    # our lease lapsed, this result is discarded and the task keeps what it has.
    reply = store.finish(ref, gen, status, payload, message)
    if reply is not Reply.OK:
        return RunOutcome.discarded(reply)
    return RunOutcome.ended(status)


def hand_back(store: TaskStore, ref: str, gen: int) -> None:
    """Release the run's lease so another worker takes the task at once: this process is being
    stopped (Heroku's SIGTERM reaches pool processes as SystemExit)."""
    try:
        store.release(ref, gen)
    except Exception:
        log.warning("could not hand back the run", exc_info=True)


def interrupted(exc: BaseException, control: RunControl) -> RunOutcome | None:
    """The outcome of a run its tool did not end (``None``: ``exc`` is no such end, the run
    must hand its task back and fail):

    - abandoned: the tool ignored its cancel (or its run limit) for the grace; the task already
      has its final state, and the job was answered when it was let go of;
    - cancelled, parked (shown as the job's state), superseded."""
    if isinstance(exc, RunAbandoned):
        return RunOutcome.ABANDONED
    if isinstance(exc, TaskCancelled):
        control.on_state(TaskStatus.CANCELLED)
        return RunOutcome.CANCELLED
    if isinstance(exc, RunParked):
        control.on_state(RunOutcome.PARKED)
        return RunOutcome.PARKED
    if isinstance(exc, RunSuperseded):
        return RunOutcome.SUPERSEDED
    return None
