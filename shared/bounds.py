"""How big what a client or a tool hands us may be: one check per kind, each naming its setting.

Everything here ends up in Redis (arguments, capabilities, answers, results, step values, status
messages) or in a parser's recursion (nesting depth), so each has a bound (``mcpq.shared.settings``:
``MCPQ_MAX_*``). The web tier turns a :class:`LimitExceeded` into -32602 (-32600 for a body
nested too deep, refused before parsing); a worker turns an oversized result or step value into
a tool error, and shortens a status message.
"""

from __future__ import annotations

import re
from typing import Any

import orjson


class LimitExceeded(ValueError):
    """A value is over its limit; the message names the value, the limit and its setting."""


def json_bytes(value: Any) -> int:
    return len(orjson.dumps(value))


def check_bytes(what: str, value: Any, limit: int, setting: str) -> None:
    size = json_bytes(value)
    if size > limit:
        raise LimitExceeded(f"{what} is {size} bytes of JSON, over {setting} ({limit})")


def depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


#: A JSON string (escapes honoured; an unterminated one runs to the end) or one bracket. Strings
#: are matched whole so that brackets inside them never count; the rest is skipped in C.
_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
_OPENERS = frozenset(b"[{")


def check_raw_depth(raw: bytes, limit: int) -> None:
    """Refuse ``raw`` JSON that nests deeper than ``limit``, *before* it is parsed.

    A parser recurses (orjson gives up past 1024 levels, and anything that walks its result
    recurses again), so the bound must hold on the bytes: one linear scan counting ``[``/``{``
    outside strings. Invalid JSON is left to the parser; this only says "too deep"."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return  # cannot nest deeper than it has openers: the common case, two passes in C
    level = 0
    for match in _STRUCTURE.finditer(raw):
        token = match.group()
        if len(token) != 1 or token == b'"':
            continue  # a string
        if token[0] in _OPENERS:
            level += 1
            if level > limit:
                raise LimitExceeded(
                    f"JSON nests more than {limit} levels deep, over MCPQ_MAX_JSON_DEPTH ({limit})"
                )
        elif level:
            level -= 1


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
