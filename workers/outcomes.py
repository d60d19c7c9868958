"""What one run of a tool came to: the ``outcome`` label of the worker's metrics
(``mcpq_tool_runs_total``, ``mcpq_tool_run_duration_seconds``) and the ``transition`` of the
run's ``run ended`` log line.

Not a task status (:class:`mcpq.shared.store.TaskStatus`): a run may end its task (``completed``,
``failed``, ``cancelled``: the same words as the statuses), let go of it for another run to go
on, never start (``claim`` refused it), or have its result refused by the fence. The set is
closed, so the label values a dashboard may name are known (docs/operations.md): a store reply
a run does not expect fails the job instead of making up a label.
"""

from __future__ import annotations

from enum import StrEnum

from mcpq.shared.store import Reply, TaskStatus


class RunOutcome(StrEnum):
    # The run ended its task, with the task's status.
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # The run let go of its task.
    PARKED = "parked"  # it waits for answers with no run (or ``claim`` found it so)
    ABANDONED = "abandoned"  # its tool ignored its cancel (or its run limit) for the grace
    SUPERSEDED = "superseded"  # a newer run owns the task (this one's lease lapsed)
    # The run never started: ``claim`` refused it (a duplicate delivery, a late re-send).
    UNREADABLE = "unreadable"  # payloads that do not open with this process's MCPQ_DATA_KEYS
    BUSY = "busy"  # another run holds a live lease
    GONE = "gone"  # the task expired
    TERMINAL = "terminal"  # the task has ended
    POISONED = "poisoned"  # its runs kept losing their worker (MCPQ_MAX_RUNS)
    SOLO = "solo"  # it must run alone: this job ran it in a process of its own (mcpq.workers.solo)
    # The run goes on on the process's run loop (mcpq.workers.run_loop): it ends there.
    DETACHED = "detached"
    # The run ended, but the fence refused its finish: its result was discarded.
    DISCARDED_GONE = "discarded-gone"
    DISCARDED_SUPERSEDED = "discarded-superseded"
    DISCARDED_TERMINAL = "discarded-terminal"

    @classmethod
    def ended(cls, status: TaskStatus) -> RunOutcome:
        """The run ended its task with ``status`` (a terminal one)."""
        return _ENDED[status]

    @classmethod
    def not_started(cls, refused: Reply) -> RunOutcome:
        """``claim`` answered ``refused``: the run must not start."""
        return _NOT_STARTED[refused]

    @classmethod
    def discarded(cls, refused: Reply) -> RunOutcome:
        """The fence answered ``refused`` to the run's finish."""
        return _DISCARDED[refused]


_ENDED = {
    TaskStatus.COMPLETED: RunOutcome.COMPLETED,
    TaskStatus.FAILED: RunOutcome.FAILED,
    TaskStatus.CANCELLED: RunOutcome.CANCELLED,
}
_NOT_STARTED = {
    Reply.BUSY: RunOutcome.BUSY,
    Reply.PARKED: RunOutcome.PARKED,
    Reply.GONE: RunOutcome.GONE,
    Reply.TERMINAL: RunOutcome.TERMINAL,
    Reply.POISONED: RunOutcome.POISONED,
    Reply.SOLO: RunOutcome.SOLO,
}
_DISCARDED = {
    Reply.GONE: RunOutcome.DISCARDED_GONE,
    Reply.SUPERSEDED: RunOutcome.DISCARDED_SUPERSEDED,
    Reply.TERMINAL: RunOutcome.DISCARDED_TERMINAL,
}
