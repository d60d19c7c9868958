"""The ASGI application gunicorn serves: ``frontend.entry:app``."""

from __future__ import annotations

from frontend.app import create_app
from shared import logs
from shared.settings import Settings

settings = Settings.from_env()
logs.configure(settings.log_format, settings.log_level)
app = create_app(settings)
