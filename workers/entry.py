"""The worker's Celery app built from the environment: ``workers.entry:app``, what the ``celery
-A workers.entry`` command lines load (Flower: ``mcpq flower``), as ``frontend.entry`` is what
gunicorn loads. ``mcpq worker`` builds its app with the same call (``workers.main``)."""

from __future__ import annotations

from shared.settings import Settings
from workers.celery_app import create_worker_app

app = create_worker_app(Settings.from_env())
