"""The Celery request of a run: Celery's revoke is a hint, the task store is the truth.

``tasks/cancel`` writes ``cancelled`` to the store and then broadcasts Celery's revoke of the
task's ref (``frontend.task_service``), so that a queued run is dropped without being claimed;
a prefork run that ignores its cancel is revoked with ``terminate`` by its job. Every worker
keeps a revoked id in memory for hours and drops each message with that id, and every run of a
task has the same Celery id, its ref (``shared.jobs``). So when the store loses the cancel after
the broadcast (a failover to a replica that had not received it yet, a Redis restart from an
older snapshot), the task is ``working`` again while every run the sweeper sends for it is
dropped as revoked: the task would be stuck until Celery forgets the id.

:class:`RunRequest` asks the store before a revoke drops a run: the revoke stands while the
store says the task has ended (or is gone); if the task is still ``working`` or
``input_required``, its cancel was lost, the id leaves this worker's revoked set and the run
goes on to its claim, which the store fences like any other. The question is one read, asked
only for a revoked id, on the consumer's thread. When the store cannot answer, the revoke
stands for this message (the id stays in the set): the sweeper sends the run again, and that
message is checked again.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from celery.worker import state as worker_state
from celery.worker.request import Request

from shared.errors import StoreUnavailable
from shared.jobs import read_run
from shared.logs import task_hash
from shared.store import TERMINAL, TaskStatus

log = logging.getLogger("mcpq.worker")

#: ``Task.Request`` of every job (``workers.celery_app``): Celery resolves the name.
RUN_REQUEST = "workers.run_request:RunRequest"


@runtime_checkable
class StatusReader(Protocol):
    """What of the worker's app the check needs (``WorkerApp.task_status``)."""

    def task_status(self, ref: str) -> TaskStatus | None: ...


class RunRequest(Request):
    """A run's message as the worker received it."""

    def revoked(self) -> bool:
        if self.id in worker_state.revoked and not self._revoke_stands():
            worker_state.revoked.discard(self.id)
        return super().revoked()

    def _revoke_stands(self) -> bool:
        app = self.task.app
        try:
            run = read_run(self.task_name, self.args, None)
        except ValueError:
            return True  # not a run's message: Celery's own rules
        if not isinstance(app, StatusReader):
            return True
        try:
            status = app.task_status(run.ref)
        except StoreUnavailable:
            return True
        if status is None or status in TERMINAL:
            return True
        log.warning(
            "a revoked run's task is %s in the store (its cancel was lost): running it",
            status.value,
            extra={"task": task_hash(run.ref)},
        )
        return False
