"""How big what a client or a tool hands us may be: one check per kind, each naming its setting.

Everything here ends up in Redis (arguments, capabilities, answers, results, step values, status
messages) or in a parser's recursion (nesting depth), so each has a bound (``shared.settings``:
``MCPQ_MAX_*``). The web tier turns a :class:`LimitExceeded` into -32602; a worker turns an
oversized result or step value into a tool error, and shortens a status message.
"""

from __future__ import annotations

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


def check_depth(value: Any, limit: int) -> None:
    if (found := depth(value)) > limit:
        raise LimitExceeded(f"JSON nests {found} levels deep, over MCPQ_MAX_JSON_DEPTH ({limit})")


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
