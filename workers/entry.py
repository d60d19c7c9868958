"""The worker's Celery app built from the environment: ``mcpq.workers.entry:app``, what the ``celery
-A workers.entry`` command lines load (Flower: ``mcpq flower``), as ``frontend.entry`` is what
gunicorn loads. ``mcpq worker`` builds its app with the same call (``mcpq.workers.main``)."""

from __future__ import annotations

from mcpq.shared.settings import Settings
from mcpq.workers.celery_app import create_worker_app

app = create_worker_app(Settings.from_env())
