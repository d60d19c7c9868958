"""Structured logs: one JSON object per line, the same shape in web and workers.

Fields beyond ``ts``/``level``/``logger``/``msg`` come from ``extra=`` (``method``, ``tool``,
``status``, ``latency_ms``, ``task``, ``request_id``, ``transition``). ``task`` is always a short
hash of the task (:func:`task_hash`), never the ``taskId``: that is a bearer token.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from shared import jsonutil

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def task_hash(ref: str) -> str:
    """The task's name in logs: 12 hex digits of sha256(taskId), safe to show."""
    return ref[:12]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return jsonutil.dumps(entry)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if extras:
            line += "  " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(log_format: str, level: str = "INFO") -> None:
    """Send mcpq's loggers (``mcpq.*``) to stderr in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
    root = logging.getLogger("mcpq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
