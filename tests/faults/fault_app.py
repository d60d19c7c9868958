"""A web app that dies between persisting a task and enqueueing its run (fault tests only).

gunicorn serves it instead of ``mcpq.frontend.entry:app``: ``Stack.start_web(app=FAULT_APP)``, where
:data:`FAULT_APP` calls the factory below (gunicorn's ``module:factory()`` syntax), so importing
this module builds nothing. The repository root is on the children's ``PYTHONPATH``, so it
imports as ``tests.faults.fault_app``. The app is the production one from
``mcpq.frontend.app.create_app`` with one dependency swapped: a producer whose ``enqueue`` ends the
process at once, as a crash or an OOM kill would between ``create.lua`` and the Celery publish.
Nothing in the product knows about it.
"""

from __future__ import annotations

import os

from mcpq.frontend.app import create_app
from mcpq.frontend.asgi_adapter import AsgiAdapter
from mcpq.shared import logs
from mcpq.shared.jobs import Run
from mcpq.shared.settings import Settings

FAULT_APP = "tests.faults.fault_app:dies_before_enqueue()"
EXIT_CODE = 70


class DyingProducer:
    """``enqueue``: ``os._exit`` before anything is published (no cleanup, no answer). Its
    runs are published after the create, as on a broker other than the store's Redis (with
    the store's Redis as broker the message goes out with the create: no such window)."""

    async def message(self, run: Run) -> None:
        return None

    async def enqueue(self, run: Run) -> None:
        os._exit(EXIT_CODE)

    async def revoke(self, ref: str) -> None:
        raise NotImplementedError("the fault app never gets this far")


def dies_before_enqueue() -> AsgiAdapter:
    """What ``mcpq.frontend.entry`` builds, with the :class:`DyingProducer`."""
    settings = Settings.from_env()
    logs.configure(settings.log_format, settings.log_level)
    return create_app(settings, producer=DyingProducer())
