"""Framework-free views of an HTTP request and reply, so the protocol core is testable alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from frontend.principal import ANONYMOUS, Principal


@dataclass
class HttpRequest:
    method: str
    headers: dict[str, list[str]]  # lower-cased name -> every value, in order
    body: bytes = b""
    declared_length: int | None = None  # Content-Length (a body announced too large is not read)
    #: Who sent it, once authenticated (``frontend.auth``); set before anything reads the body.
    principal: Principal = ANONYMOUS

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[0] if values else None


@dataclass
class HttpReply:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    #: An SSE reply instead of ``body``: JSON-RPC messages, ``None`` for a keep-alive comment.
    stream: AsyncIterator[dict[str, Any] | None] | None = None
