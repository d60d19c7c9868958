"""The ASGI application gunicorn serves: ``mcpq.frontend.entry:app``."""

from __future__ import annotations

from mcpq.frontend.app import create_app
from mcpq.shared import logs
from mcpq.shared.settings import Settings

settings = Settings.from_env()
logs.configure(settings.log_format, settings.log_level)
app = create_app(settings)
