"""The ASGI application gunicorn serves: ``frontend.asgi:app``."""

from __future__ import annotations

from frontend.app import create_app
from shared.settings import Settings

app = create_app(Settings.from_env())
