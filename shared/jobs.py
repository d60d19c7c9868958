"""The job contract: the Celery message that asks a worker to run a task, written and read here.

One message per run: the Celery task name is the tool's name (so Flower shows runs by tool), the
only argument is the task's storage ``ref``, and the Celery ``task_id`` is that ref too, so a
queued run can be revoked by ref (a recovery send's id is its own: :func:`job_id`). Arguments,
answers and results never travel in the message: the worker reads them from the store. The
request id of the MCP request that caused the run travels in a header, for the logs. The web
tier, the sweeper and the workers all go through :func:`send_run` and :func:`read_run`; this
module imports no Celery (only its shape).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

REQUEST_ID_HEADER = "mcpq_request_id"
#: The W3C ``traceparent`` of the request that sent the run (``mcpq.shared.tracing``; empty when
#: tracing is off): the run's span joins that trace, on any worker.
TRACE_HEADER = "mcpq_traceparent"
#: The ``traceparent`` of the request that created the task, when another request sent the run
#: (an answer's resume): the run's span is its child. Empty when the sender created the task (its
#: trace is the task's), or sent no trace (the sweeper: the worker reads the task's, stored).
TASK_TRACE_HEADER = "mcpq_task_trace"


class Sender(Protocol):
    """What of a Celery app sending a run needs: ``Celery.send_task``."""

    def send_task(
        self, name: str, *, args: Any, task_id: str, queue: str, headers: Any, **options: Any
    ) -> Any: ...


@dataclass(frozen=True)
class Run:
    """One run of a task's tool, as the message carries it."""

    tool: str
    ref: str
    queue: str
    request_id: str = ""
    #: Sent by the recovery sweeper (see :func:`job_id`).
    recovery: bool = False
    trace: str = ""
    task_trace: str = ""


def job_id(run: Run) -> str:
    """The Celery task id of ``run``'s message: the ref, so that a cancel revokes a queued run
    by ref; a recovery send's own id (the ref and a random suffix).

    Why a recovery send does not reuse the ref: every worker remembers a revoked id for hours
    and drops each message with it. If a failover loses a cancel after its revoke went out, the
    task is ``working`` again, and a run sent with the ref would be dropped on every send: the
    task would be stuck. A recovery run of a task that really was cancelled ends at its claim.
    """
    return f"{run.ref}-{secrets.token_hex(4)}" if run.recovery else run.ref


@dataclass(frozen=True)
class Message:
    """A run's message exactly as the broker's Redis list holds it (``key``: the list), for the
    store to push in the same script that creates the task (``mcpq.shared.store.calls.create``)."""

    key: str
    body: str


def send_run(sender: Sender, run: Run, **options: Any) -> None:
    """Publish the message of ``run`` (blocking: the web tier calls this off its event loop).
    ``options``: Celery's publishing options."""
    sender.send_task(
        run.tool,
        args=[run.ref],
        task_id=job_id(run),
        queue=run.queue,
        headers={
            REQUEST_ID_HEADER: run.request_id,
            TRACE_HEADER: run.trace,
            TASK_TRACE_HEADER: run.task_trace,
        },
        **options,
    )


def read_run(
    tool: str, args: Sequence[Any], headers: Mapping[str, Any] | None, queue: str = ""
) -> Run:
    """The run a received message asks for (Celery's task name, args and headers)."""
    if len(args) != 1 or not isinstance(args[0], str):
        raise ValueError(f"a run message carries exactly one ref, not {args!r}")
    request_id = (headers or {}).get(REQUEST_ID_HEADER) or ""
    trace = (headers or {}).get(TRACE_HEADER) or ""
    task_trace = (headers or {}).get(TASK_TRACE_HEADER) or ""
    return Run(tool, args[0], queue, str(request_id), trace=str(trace), task_trace=str(task_trace))
