"""The web tier's gunicorn worker: uvicorn on httptools, with a bounded request head and
deadlines for slow clients (``mcpq.ops.runtime.gunicorn_conf`` names it as ``worker_class``).

uvicorn bounds neither the size of a request's head under httptools nor the time a client may
take to send it: a client could hold a connection with one header byte a second, or make the
parser buffer megabytes of headers. :class:`GuardedHttpToolsProtocol` adds, per connection:

- ``MCPQ_MAX_HEADER_BYTES`` (request line and headers) and ``MCPQ_MAX_HEADERS``: over either,
  ``431 Request Header Fields Too Large`` and the connection is closed;
- ``MCPQ_HEADER_TIMEOUT_S``: from the connection's start (or a request's first byte) to the end
  of its head; then ``408`` (or just the close, on a connection that never sent a byte);
- ``MCPQ_BODY_TIMEOUT_S``: from the end of the head to the end of the body; then ``408`` if no
  response has started (the application sees a disconnect and serves nothing) and the close.

httptools rather than h11: it is llhttp, Node's C parser (strict about the framing ambiguities
behind request smuggling) and several times cheaper per request than the pure-Python h11, which
would bound the head's size but neither the header count nor any time; those need this class
either way.

The worker also tells the application whether gunicorn binds loopback addresses only
(``MCPQ_LOOPBACK_BIND``, read by ``frontend.http_checks``): the bind is gunicorn's, whatever set it
(``mcpq web --host``, ``--bind``, ``GUNICORN_CMD_ARGS``), and the app is loaded after this runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn_worker import UvicornWorker

from mcpq.ops.runtime.preflight import bind_host, is_loopback
from mcpq.shared.settings import Settings

log = logging.getLogger("mcpq.web")


@dataclass(frozen=True)
class HeadLimits:
    """The bounds one worker process applies (``0``: that bound is off)."""

    max_header_bytes: int
    max_headers: int
    header_timeout_s: float
    body_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> HeadLimits:
        return cls(
            settings.max_header_bytes,
            settings.max_headers,
            settings.header_timeout_s,
            settings.body_timeout_s,
        )


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request that is being refused."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`HeadLimits` (see the module's docstring)."""

    limits: ClassVar[HeadLimits] = HeadLimits.from_settings(Settings())

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # between a request's first byte (or the connection) and its head
        self._began = False  # a byte of the current head has arrived
        self._head_bytes = 0  # of the current head, as parsed (request line and headers)
        self._fed_bytes = 0  # of the current head, as received (bounds a half-parsed header)
        self._header_count = 0
        self._refusal: tuple[int, str] | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    # -- the connection -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:
            return
        # Whether this chunk is all head: only when the head was already underway before it
        # (the first chunk of a head may end a previous request) and is still not complete
        # after it. Under-counting one chunk at most keeps a well-formed request from ever
        # being refused for its body's bytes.
        underway = self._in_head and self._began
        super().data_received(data)
        if underway and self._in_head and not self.transport.is_closing():
            self._fed_bytes += len(data)
            limit = self.limits.max_header_bytes
            if limit and self._fed_bytes > limit:
                self._refuse(431, "Request Header Fields Too Large")

    def _unsupported_upgrade_warning(self) -> None:
        # Without a WebSocket implementation (``McpqUvicornWorker``) uvicorn warns at every
        # upgrade request that one should be installed: none is wanted, and the request is
        # served as plain HTTP, so there is nothing for an operator to do.
        log.debug("upgrade request served as plain HTTP")

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers every parser error (ours included: a callback that raises) with 400;
        # a refusal of ours goes out instead, with its own status.
        if self._refusal is not None:
            self._write_refusal(*self._refusal)
        else:
            super().send_400_response(msg)

    # -- parser callbacks ---------------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._began = True, True
        self._head_bytes = self._fed_bytes = self._header_count = 0
        self._arm_head_timer()  # a keep-alive connection's next request: its own deadline

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self.limits.max_headers and self._header_count > self.limits.max_headers:
            self._refusal = (431, "Request Header Fields Too Large: too many header fields")
            raise _Refused
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel(self._head_timer)
        self._head_timer = None
        if self.limits.body_timeout_s:
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._cancel(self._body_timer)
        self._body_timer = None
        self._began = False
        super().on_message_complete()

    # -- limits -------------------------------------------------------------------------------
    def _count(self, size: int) -> None:
        self._head_bytes += size
        limit = self.limits.max_header_bytes
        if limit and self._head_bytes > limit:
            self._refusal = (431, "Request Header Fields Too Large")
            raise _Refused

    def _arm_head_timer(self) -> None:
        if self.limits.header_timeout_s and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if not self._began:  # an idle connection that never sent a byte: just close it
            self.transport.close()
            return
        log.info("request head timed out", extra={"http_status": 408})
        self._refuse(408, "Request Timeout: the request head took too long")

    def _body_late(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            log.info("request body timed out", extra={"http_status": 408})
            # The application's next receive() is a disconnect and whatever it sends is
            # dropped, so the 408 below is the connection's only answer.
            cycle.disconnected = True
            cycle.message_event.set()
            self._refuse(408, "Request Timeout: the request body took too long")
        else:  # it was answered already (a body announced too large is never read): close
            self.transport.close()

    def _refuse(self, status: int, text: str) -> None:
        self._refusal = (status, text)
        self._write_refusal(status, text)

    def _write_refusal(self, status: int, text: str) -> None:
        self._cancel_timers()
        if self.transport.is_closing():
            return
        body = text.encode("ascii")
        head = (
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        )
        self.transport.write(STATUS_LINE[status] + head + body)
        self.transport.close()

    def _cancel_timers(self) -> None:
        self._cancel(self._head_timer)
        self._cancel(self._body_timer)
        self._head_timer = self._body_timer = None

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()


def loopback_only(binds: list[str]) -> bool:
    """Every address in gunicorn's ``bind`` is loopback (a unix socket counts)."""
    return bool(binds) and all(is_loopback(bind_host(bind)) for bind in binds)


def host_warning(settings: Settings, binds: list[str]) -> str | None:
    """On a public bind with no public name configured, ``/mcp`` answers only to loopback
    ``Host``s (421 to every other): say so once, at startup, naming the settings."""
    if loopback_only(binds) or settings.allowed_hosts or settings.resource_url:
        return None
    return (
        "neither MCPQ_ALLOWED_HOSTS nor MCPQ_RESOURCE_URL is set: /mcp answers only to the "
        "Host names localhost, 127.0.0.1 and [::1] (421 Misdirected Request to any other)"
    )


class McpqUvicornWorker(UvicornWorker):  # type: ignore[misc]  # uvicorn_worker is untyped
    """uvicorn's gunicorn worker, serving with :class:`GuardedHttpToolsProtocol`."""

    sockets: list[Any]  #: gunicorn's listeners (set by gunicorn's Worker)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = Settings.from_env()
        # One protocol class per worker, bound to this deployment's limits.
        protocol = type(
            "GuardedHttpToolsProtocol",
            (GuardedHttpToolsProtocol,),
            {"limits": HeadLimits.from_settings(settings)},
        )
        # No WebSocket implementation (MCP speaks none): uvicorn would otherwise load the
        # websockets library in every worker (over 1 MiB each) for upgrades mcpq never accepts.
        # An upgrade request is served as the plain HTTP request it also is.
        self.CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "http": protocol, "ws": "none"}
        super().__init__(*args, **kwargs)
        # gunicorn builds a worker before it forks it, and the worker loads the application
        # after the fork: the variable reaches the application's Settings, and nothing else
        # (an operator's value is overwritten: the bind decides, not a claim about it).
        os.environ["MCPQ_LOOPBACK_BIND"] = "1" if loopback_only(list(self.cfg.bind)) else "0"

    async def _serve(self) -> None:
        # uvicorn is handed the plain listening sockets, not gunicorn's wrappers of them. On
        # shutdown uvloop closes each listener's descriptor itself and then calls close() on the
        # object it was given: a wrapper closes that descriptor a second time, and every stop
        # logged "Error while closing socket [Errno 9] Bad file descriptor" per worker. A plain
        # socket knows uvloop took its descriptor. The master closes its own copies.
        wrappers = self.sockets
        self.sockets = [getattr(sock, "sock", sock) for sock in wrappers]
        try:
            await super()._serve()
        finally:
            self.sockets = wrappers
