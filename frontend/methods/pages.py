"""Paging of the declaration lists (``resources/list``, ``resources/templates/list``,
``prompts/list``): an opaque cursor that is the offset of the next page. The lists come from the
served modules, the same on every replica of one deployment, so any replica serves any page."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, TypeVar

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.shared.errors import invalid_params

T = TypeVar("T")
#: Items per page.
PAGE = 100


def page(rpc: RpcRequest, items: Sequence[T], size: int = PAGE) -> tuple[Sequence[T], str | None]:
    """The page the request's ``cursor`` names (the first without one), and the next page's
    cursor (``None`` after the last)."""
    start = _offset(rpc.params.get("cursor"))
    end = start + size
    following = _cursor(end) if end < len(items) else None
    return items[start:end], following


def more(following: str | None) -> dict[str, Any]:
    """A result's ``nextCursor`` field: only when there is a next page (never ``null``)."""
    return {} if following is None else {"next_cursor": following}


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def _offset(cursor: object) -> int:
    if cursor is None:
        return 0
    try:
        if not isinstance(cursor, str) or len(cursor) > 64:
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = raw.partition(":")
        if kind != "o" or not number.isdigit():
            raise ValueError
        return int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid_params("Invalid params: cursor is not one this server gave") from None
