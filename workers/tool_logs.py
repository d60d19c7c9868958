"""A tool's log messages (``ctx.info(...)``, ``ctx.log(level, data)``): what the worker's own
log shows, and what a synchronous call's stream passes on as ``notifications/message``.

Every message goes to the worker's log (logger ``mcpq.tool``, at the matching Python level):
that is where an operator looks, and for a task it is the only place (the Tasks extension has no
stream to carry them). A synchronous call's also go to the store (``RunContext.log``), bounded,
for its stream; the web decides there which levels its client asked for.
"""

from __future__ import annotations

import logging
from typing import Any

from mcpq.shared import jsonutil
from mcpq.shared.bounds import shorten
from mcpq.shared.tool_context import LOG_LEVELS, LogLevel

log = logging.getLogger("mcpq.tool")

_PYTHON_LEVEL = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
#: The most a message's ``data`` may take, as JSON: a larger one is sent shortened, as text
#: (a log line is not worth failing a tool for).
MAX_LOG_CHARS = 16 * 1024


def entry(level: LogLevel, data: Any, logger_name: str | None, tool: str) -> dict[str, Any]:
    """The ``notifications/message`` params of one message (``ValueError`` for an unknown
    level), written to the worker's log on the way."""
    if level not in LOG_LEVELS:
        raise ValueError(f"ctx.log: unknown level {level!r}; one of {', '.join(LOG_LEVELS)}")
    try:
        text = jsonutil.dumps(data)
    except (TypeError, ValueError):
        data = text = str(data)  # what json cannot carry, as its text
    if len(text) > MAX_LOG_CHARS:
        data = text = shorten(data if isinstance(data, str) else text, MAX_LOG_CHARS)
    shown = data if isinstance(data, str) else text
    log.log(_PYTHON_LEVEL[level], "%s: %s", logger_name or tool, shown)
    params: dict[str, Any] = {"level": level, "data": data}
    if logger_name:
        params["logger"] = str(logger_name)
    return params
