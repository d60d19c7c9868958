"""Framework-free views of an HTTP request and reply, so the protocol core is testable alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from mcpq.frontend.principal import ANONYMOUS, Principal


@dataclass
class HttpRequest:
    method: str
    headers: dict[str, list[str]]  # lower-cased name -> every value, in order
    body: bytes = b""
    declared_length: int | None = None  # Content-Length (a body announced too large is not read)
    #: Who sent it, once authenticated (``mcpq.frontend.auth``); set before anything reads the body.
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


class ClientGone:
    """Whether the client of the request being served has gone away, as the server tells it
    (ASGI's ``http.disconnect``). Nothing watches for it until a handler that waits asks
    (:meth:`watch`: a stream, a waiting synchronous call): a request answered at once spends no
    watcher on it (a task per request, started and cancelled, about a tenth of a ``tasks/get``)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._start: Callable[[], None] | None = None
        self._wanted = False

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    def arm(self, start: Callable[[], None]) -> None:
        """The request's body is in: ``start`` begins watching, now if a handler asked already."""
        self._start = start
        if self._wanted:
            self.watch()

    def watch(self) -> None:
        """Watch for the disconnect from now on (once; nothing where the server cannot tell)."""
        self._wanted = True
        start, self._start = self._start, None
        if start is not None:
            start()

    async def wait(self) -> None:
        self.watch()
        await self._event.wait()
