"""One run of a tool: claim, call, finish. Everything a Celery job does, without Celery.

Outcomes map to the spec: a returned value or an exception inside the tool is ``completed``
(the latter with ``isError: true``); a :class:`shared.errors.ProtocolError` is ``failed`` with a
JSON-RPC ``error``. Every terminal write is fenced by the run's generation.

Only a ``ToolError``'s text (written for the model) reaches the client; any other exception
reaches it as a generic text with a random error id, and the worker logs the traceback with that
id (no arguments, no taskId), because an exception's text can carry internals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial

from mcpq.shared import tracing
from mcpq.shared.errors import INTERNAL_ERROR, TaskCancelled, rpc_error
from mcpq.shared.jobs import Run
from mcpq.shared.store import Reply, TaskRecord, TaskStatus, TaskStore
from mcpq.shared.store.wakeups import Watch
from mcpq.shared.tools import Tool
from mcpq.workers import solo
from mcpq.workers.async_context import AsyncRunContext
from mcpq.workers.context import RunContext
from mcpq.workers.detached import detach
from mcpq.workers.execution import ToolCall
from mcpq.workers.heartbeat import KeptRun, Watchdog
from mcpq.workers.interrupts import RunSuperseded
from mcpq.workers.outcomes import RunOutcome
from mcpq.workers.run_loop import RunLoop
from mcpq.workers.run_parts import (
    Ending,
    Prepared,
    RunControl,
    RunDeps,
    conclude,
    hand_back,
    interrupted,
    outcome_of,
)

__all__ = ["RunControl", "RunDeps", "hand_back", "run_task"]


def run_task(
    deps: RunDeps,
    run: Run,
    control: RunControl,
    *,
    alone: bool = False,
    on_claim: Callable[[int], None] | None = None,
    loop: RunLoop | None = None,
    on_end: Callable[[RunOutcome], None] | None = None,
) -> RunOutcome:
    """Run the task's tool once; returns what happened (a log and metrics label), and logs it.
    ``alone``: nothing else runs in this process (a prefork pool process, a run of its own);
    otherwise a task that must run alone is run in a child process (``mcpq.workers.solo``).
    ``on_claim``: told the task's run count once this run holds it (its span's attempt).
    ``loop``: an ``async def`` tool's run goes on to this run loop (``mcpq.workers.run_loop``)
    once claimed, and this returns ``DETACHED`` at once; the loop logs its end and tells
    ``on_end`` (any other run's end is returned)."""
    ending = Ending(run)
    outcome = _run(deps, run.ref, control, ending, alone, on_claim, loop, on_end)
    if outcome is RunOutcome.SOLO:
        # The child logs its own run's end.
        solo.run_alone(deps.store.lost_alone, run, deps.settings.solo_concurrency)
        return outcome
    if outcome is not RunOutcome.DETACHED:  # (the loop logs a detached run's end)
        ending.log(outcome)
    return outcome


def _run(
    deps: RunDeps,
    ref: str,
    control: RunControl,
    ending: Ending,
    alone: bool,
    on_claim: Callable[[int], None] | None = None,
    loop: RunLoop | None = None,
    on_end: Callable[[RunOutcome], None] | None = None,
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
    if loop is not None and tool.is_async and not loop.blocks(tool.name):
        # Its job ends now: nothing may let go of the job's slot later (another job's by then).
        control = replace(control, let_go=None)
        prepare = partial(_prepare, deps, ref, record, gen, tool, control, ending=ending)
        detach(deps, ref, gen, prepare, control, ending, loop, on_end)
        return RunOutcome.DETACHED
    # The run's watch: it subscribes when the tool first waits (ctx.ask, ctx.sleep).
    with deps.wakeups.watch(ref) as watch:
        prepared = _prepare(deps, ref, record, gen, tool, control, watch, ending)
        return _execute(deps, ref, gen, prepared, control)


def _prepare(
    deps: RunDeps,
    ref: str,
    record: TaskRecord,
    gen: int,
    tool: Tool,
    control: RunControl,
    watch: Watch,
    ending: Ending,
) -> Prepared:
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
    call = ToolCall(partial(tool.call, ctx if view is None else view, record.arguments))
    stops = _Stops(store, ref, gen, tool, ctx, call, control, ending)
    limit_s = tool.run_limit_s(s.max_run_s)
    watchdog = Watchdog(ctx.busy_for, limit_s, partial(stops.fail_stalled, limit_s))
    kept = KeptRun(ref, gen, stops.on_cancel, stops.stop, watchdog)
    return Prepared(tool, ctx, view, call, kept)


def _execute(
    deps: RunDeps, ref: str, gen: int, prepared: Prepared, control: RunControl
) -> RunOutcome:
    s, store = deps.settings, deps.store
    tool, ctx, view, call, kept = (
        prepared.tool, prepared.ctx, prepared.view, prepared.call, prepared.kept
    )  # fmt: skip
    completed = False
    try:
        with deps.leases.keep(kept):
            status, payload, message = outcome_of(call.here, tool.name, s.max_result_bytes)
        completed = True
    except BaseException as exc:
        if (ended := interrupted(exc, control)) is not None:
            return ended
        # SystemExit from billiard's SIGTERM handler, KeyboardInterrupt: hand the task back.
        hand_back(store, ref, gen)
        raise
    finally:
        # However the run ends, its last write (the finish below, a cancel's, a newer run's)
        # sets the status message: a report still pending would only be refused or overwrite.
        # A synchronous call that completed keeps its last progress for flush_logs below.
        ctx.discard_report(keep=completed)
        if view is not None:
            view.close()
    return conclude(store, ctx, ref, gen, status, payload, message)


class _Stops:
    """How the lease keeper stops one run: its interrupt on a cancel, its stop once the grace
    is over, and the watchdog's end of a task whose tool stalled. Bound methods of one small
    object, not closures: a run on the run loop keeps them for as long as it waits, and five
    closures with their cells were a tenth of what 10,000 waiting runs held."""

    __slots__ = ("_call", "_control", "_ctx", "_ending", "_gen", "_ref", "_store", "_tool")

    def __init__(
        self,
        store: TaskStore,
        ref: str,
        gen: int,
        tool: Tool,
        ctx: RunContext,
        call: ToolCall,
        control: RunControl,
        ending: Ending,
    ) -> None:
        self._store, self._ref, self._gen, self._tool = store, ref, gen, tool
        self._ctx, self._call, self._control, self._ending = ctx, call, control, ending

    def on_cancel(self, reply: Reply) -> None:
        self._ctx.interrupt(reply)
        # An async tool's run ends as a sync one's would: cancelled, or superseded.
        self._call.interrupt(TaskCancelled if reply is Reply.TERMINAL else RunSuperseded)

    def stop(self) -> None:
        """The grace is over: the run is stopped, the way its pool allows."""
        control = self._control
        if control.terminate is not None:
            control.terminate()
        elif self._call.abandon() and control.let_go is not None and control.let_go():
            self._ending.log(RunOutcome.ABANDONED)

    def fail_stalled(self, limit_s: float) -> None:
        message = (
            f"Tool {self._tool.name} was stopped: it ran for {limit_s:g} s without calling its "
            "context (max_run_s)"
        )
        self._store.finish(
            self._ref, self._gen, TaskStatus.FAILED, rpc_error(INTERNAL_ERROR, message), message
        )
