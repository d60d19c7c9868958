"""Structured logs: one JSON object per line, the same shape in web and workers.

Fields beyond ``ts``/``level``/``logger``/``msg`` come from ``extra=`` (``method``, ``tool``,
``status``, ``latency_ms``, ``task``, ``request_id``, ``transition``). ``task`` is always a short
hash of the task (:func:`task_hash`), never the ``taskId``: that is a bearer token.

Many values in a log line come from the client (a method name, a tool name, a header). Both
formatters make every one of them safe, once, here, rather than at each call site: every string
``extra`` field and every string argument of the message is passed through :func:`safe`
(control characters escaped, at most :data:`MAX_FIELD_CHARS` characters, the cut marked), and the
message itself is escaped too. So one record is always exactly one line: in text mode no value can
start a forged line, in JSON mode none can break a line-oriented reader (orjson escapes C0 but
not C1 characters or U+2028/U+2029, which Python's ``splitlines`` and some log viewers treat as
line breaks). A traceback in text mode follows on indented lines.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

from mcpq.shared import jsonutil, tracing

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

#: The most characters of one client-supplied value a log line shows.
MAX_FIELD_CHARS = 200
#: C0 controls, DEL, C1 controls and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: What a JSON line may still carry raw after orjson (which escapes C0 itself).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def task_hash(ref: str) -> str:
    """The task's name in logs: 12 hex digits of sha256(taskId), safe to show."""
    return ref[:12]


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (
        f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
    )


def escape(text: str) -> str:
    """``text`` with every control character and line separator written as an escape."""
    return _CONTROL.sub(_escape_char, text)


def safe(value: Any, limit: int = MAX_FIELD_CHARS) -> Any:
    """A value fit for a log line: a string is escaped (:func:`escape`) and cut to ``limit``
    characters, the cut marked with how much was left out; anything else is returned as it is.

    The formatters apply it to every string field and message argument; call it yourself only to
    put a client's value inside a message template's own text."""
    if not isinstance(value, str):
        return value
    cut = len(value) - limit
    text = escape(value[:limit] if cut > 0 else value)
    return f"{text}...[{cut} more chars]" if cut > 0 else text


def message(record: logging.LogRecord) -> str:
    """``record.getMessage()`` with its string arguments made :func:`safe` and the whole
    escaped (the template is ours; what fills it may be anyone's)."""
    text = str(record.msg)
    args: Any = record.args
    if args:
        if isinstance(args, Mapping):
            args = {key: safe(value) for key, value in args.items()}
        else:
            args = tuple(safe(value) for value in args)
        text = text % args
    return escape(text)


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's ``extra`` fields, each value :func:`safe`."""
    extras: dict[str, Any] = {}
    for key, value in vars(record).items():
        if key in _STANDARD:
            continue
        plain = value is None or isinstance(value, (str, int, float, bool))
        extras[key] = safe(value if plain else str(value))
    return extras


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": message(record),
        }
        entry.update(fields(record))
        entry.update(tracing.log_ids())  # logs and traces join on these (tracing on only)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        # Only inside strings can these characters occur; as \u escapes they read the same.
        return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", jsonutil.dumps(entry))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = {**fields(record), **tracing.log_ids()}
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname:<7} {record.name}: {message(record)}"
        if extras:
            line += "  " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            # Indented, each line escaped: an exception's text (which may quote a client's
            # value) cannot begin a line that reads like a record of its own.
            trace = self.formatException(record.exc_info).split("\n")
            line += "".join(f"\n    {escape(part)}" for part in trace)
        return line


def configure(log_format: str, level: str = "INFO") -> None:
    """Send mcpq's loggers (``mcpq.*``) to stderr in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
    root = logging.getLogger("mcpq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
