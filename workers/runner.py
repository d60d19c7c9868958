"""One run of a tool: claim, call, finish. Everything a Celery job does, without Celery.

Outcomes map to the spec: a returned value or an exception inside the tool is ``completed``
(the latter with ``isError: true``); a :class:`shared.errors.ProtocolError` is ``failed`` with a
JSON-RPC ``error``. Every terminal write is fenced by the run's generation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from shared.errors import (
    INTERNAL_ERROR,
    ProtocolError,
    StoreUnavailable,
    TaskCancelled,
    ToolError,
)
from shared.logs import task_hash
from shared.records import TaskRecord
from shared.results import call_tool_result, error_result
from shared.settings import Settings
from shared.store import TaskStore
from shared.tools import Registry
from workers.context import RunContext
from workers.heartbeat import Heartbeat, Watchdog
from workers.signals import RunParked, RunSuperseded

log = logging.getLogger("mcpq.worker")


@dataclass
class RunDeps:
    settings: Settings
    store: TaskStore
    blocking: redis.Redis
    registry: Registry


def _outcome(fn: Callable[[], Any], tool: str) -> tuple[str, dict[str, Any], str]:
    try:
        return "completed", call_tool_result(fn()), ""
    except ToolError as exc:
        return "completed", error_result(str(exc)), ""
    except StoreUnavailable:  # not the tool's fault: the run fails and is recovered by lease
        raise
    except ProtocolError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return "failed", error, exc.message
    except Exception as exc:
        log.exception("tool %s raised", tool)
        return "completed", error_result(f"{type(exc).__name__}: {exc}"), ""


def run_task(
    deps: RunDeps,
    ref: str,
    terminate: Callable[[], None],
    on_state: Callable[[str], None],
    request_id: str = "",
    tool: str = "",
) -> str:
    """Run the task's tool once; returns what happened, and logs it."""
    started = time.perf_counter()
    outcome = _run(deps, ref, terminate, on_state)
    fields = {
        "task": task_hash(ref),
        "tool": tool,
        "transition": outcome,
        "request_id": request_id,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
    }
    log.info("run ended", extra=fields)
    return outcome


def _run(
    deps: RunDeps, ref: str, terminate: Callable[[], None], on_state: Callable[[str], None]
) -> str:
    s = deps.settings
    claim = deps.store.claim(ref, int(s.lease_s * 1000))
    if claim.status != "OK" or claim.task is None:
        return claim.status.lower()
    record = TaskRecord.from_hash(ref, claim.task)
    tool = deps.registry.get(record.tool)
    if tool is None:
        message = f"Unknown tool on this worker: {record.tool}"
        error = {"code": INTERNAL_ERROR, "message": message}
        deps.store.finish(ref, claim.gen, "failed", error, message)
        return "failed"
    ctx = RunContext(
        deps.store,
        deps.blocking,
        ref,
        claim.gen,
        record.pre,
        s.input_hold_s,
        on_state,
        None if record.sync else record.caps,  # a synchronous call checks them itself (MRTR)
    )
    limit_s = tool.run_limit_s(s.max_run_s)

    def fail_stalled() -> None:
        message = (
            f"Tool {tool.name} was stopped: it ran for {limit_s:g} s without calling its "
            "context (max_run_s)"
        )
        deps.store.finish(
            ref, claim.gen, "failed", {"code": INTERNAL_ERROR, "message": message}, message
        )

    watchdog = Watchdog(ctx.busy_for, limit_s, fail_stalled)
    beat = Heartbeat(
        deps.store,
        ref,
        claim.gen,
        s.lease_s,
        s.cancel_grace_s,
        ctx.cancel_seen,
        terminate,
        watchdog,
    )
    beat.start()
    try:
        status, payload, message = _outcome(lambda: tool.call(ctx, record.arguments), tool.name)
    except TaskCancelled:
        on_state("cancelled")
        return "cancelled"
    except RunParked:
        on_state("parked")
        return "parked"
    except RunSuperseded:
        return "superseded"
    except BaseException:  # SystemExit from billiard's SIGTERM handler, KeyboardInterrupt
        hand_back(deps.store, ref, claim.gen)
        raise
    finally:
        beat.stop()
    outcome = deps.store.finish(ref, claim.gen, status, payload, message)
    if outcome != "OK":
        return f"discarded-{outcome.lower()}"
    return status


def hand_back(store: TaskStore, ref: str, gen: int) -> None:
    """Release the run's lease so another worker takes the task at once: this process is being
    stopped (Heroku's SIGTERM reaches pool processes as SystemExit)."""
    try:
        store.release(ref, gen)
    except Exception:
        log.warning("could not hand back the run", exc_info=True)
