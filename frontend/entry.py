"""The ASGI application gunicorn serves: ``mcpq.frontend.entry:app``."""

from __future__ import annotations

from mcpq.frontend.app import create_app
from mcpq.shared import logs, tracing
from mcpq.shared.settings import Settings

settings = Settings.from_env()
logs.configure(settings.log_format, settings.log_level)
tracing.configure("web")  # OTEL_* variables; off (nothing imported) unless they ask for it
app = create_app(settings)
