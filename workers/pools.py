"""mcpq's io pool: Celery's threads pool, plus what shutting down needs.

A thread cannot be killed, and Celery's threads pool was not made for a cold shutdown (Heroku's
SIGTERM, as ``mcpq worker`` remaps it): it cancels every active request with ``terminate_job``
and ``ApplyResult.terminate``, which the threads pool does not implement, then stops the pool by
waiting for every running job, however long the tools run. Here:

- stopping the pool first hands every run of the process back (``LeaseKeeper.hand_back_all``:
  their leases are released, so other workers resume them at once, as a prefork child does
  when it gets SIGTERM) and lets go of their tool threads, so the jobs return and the pool
  stops now; whatever a let-go thread still writes is fenced by its run's generation;
- cancelling a request kills nothing (a cancelled run is stopped the io pool's way:
  ``workers.execution``).

Selected with ``--pool custom`` and ``CELERY_CUSTOM_WORKER_POOL=workers.pools:IoPool`` (Celery's
way to name a pool of one's own); ``mcpq worker --pool io`` sets both.
"""

from __future__ import annotations

from typing import Any

from celery.concurrency.thread import ApplyResult, TaskPool  # type: ignore[attr-defined]


class _Result(ApplyResult):  # type: ignore[misc]
    def terminate(self, signal: Any = None) -> None:
        """Nothing to kill: the run is let go of when the pool stops."""


class IoPool(TaskPool):
    def terminate_job(self, pid: Any, signal: Any = None) -> None:
        """Nothing to kill: see the module's docstring."""

    def on_apply(self, *args: Any, **kwargs: Any) -> ApplyResult:
        return _Result(super().on_apply(*args, **kwargs).f)

    def on_stop(self) -> None:
        from workers.celery_app import hand_back_runs

        hand_back_runs()
        super().on_stop()
