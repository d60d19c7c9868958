"""A round-robin HTTP/1.1 proxy in front of several web replicas, one request at a time.

A load balancer without session affinity, small enough to own: every request goes to the next
replica in turn, whatever connection or session it belongs to, so a client's consecutive
requests (an MRTR retry, a 2025-era session's next POST, its answer to a server's request) land
on different replicas. Each client connection carries one request: the request goes upstream
with ``Connection: close``, and the response comes back, streamed as it arrives (SSE), with
``Connection: close`` too; a client that leaves closes the upstream connection (a server sees
its client go). ``Host``, ``Origin`` and every other header pass through unchanged.

It runs on an event loop of its own, in a daemon thread: ``RoundRobinProxy(backends).start()``,
then ``.url``, ``.served`` (requests per backend) and ``.close()``. Only the parts of HTTP/1.1
clients send to an MCP endpoint: a ``Content-Length`` or chunked request body, no upgrades.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

#: Request or response head (the request line or status line, and the headers).
MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}
_CHUNK = 64 * 1024


class ProxyError(Exception):
    """A request the proxy cannot pass on."""


def _split_head(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    lines = head.rstrip(b"\r\n").split(b"\r\n")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise ProxyError(f"malformed header line {line[:80]!r}")
        headers.append((name.strip(), value.strip()))
    return lines[0], headers


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _join_head(first: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    lines = [first, *(k + b": " + v for k, v in headers), b"Connection: close", b"", b""]
    return b"\r\n".join(lines)


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request body, whole (``Content-Length``, or chunked decoded)."""
    encoding = (_header(headers, b"transfer-encoding") or b"").lower()
    if b"chunked" in encoding:
        body = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers from the clients this serves
                return bytes(body)
            if len(body) + size > MAX_BODY:
                raise ProxyError("request body too large")
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    length = int(_header(headers, b"content-length") or b"0")
    if length > MAX_BODY:
        raise ProxyError("request body too large")
    return await reader.readexactly(length) if length else b""


class RoundRobinProxy:
    """Listens on ``host:port`` (0: a free port) and passes each request to the next of
    ``backends`` (base URLs, ``http://127.0.0.1:8001``)."""

    def __init__(self, backends: Sequence[str], *, host: str = "127.0.0.1", port: int = 0):
        if not backends:
            raise ValueError("a proxy needs at least one backend")
        self.backends: list[tuple[str, int]] = []
        for url in backends:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname or not parts.port:
                raise ValueError(f"backend must be http://host:port, not {url!r}")
            self.backends.append((parts.hostname, parts.port))
        self.host, self.port = host, port
        #: Requests passed on, per backend index.
        self.served = [0] * len(self.backends)
        #: Requests the proxy could not pass on (a backend refused the connection, a bad head).
        self.errors: list[str] = []
        self._next = itertools.cycle(range(len(self.backends)))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._transports: set[asyncio.BaseTransport] = set()

    @property
    def url(self) -> str:
        """The proxy's base URL (``/mcp`` is the caller's to add)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="round-robin-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._failed is not None:
            raise RuntimeError(f"the proxy did not start: {self._failed}")
        return self

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the loop's thread --------------------------------------------------------------------
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._accept, self.host, self.port, limit=MAX_HEAD)
            )
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:
            self._failed = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in list(self._handlers):
                task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.gather(*self._handlers, return_exceptions=True))
                loop.run_until_complete(self._server.wait_closed())
            # Whatever is still open (a close waiting to flush to a client that reads no more)
            # goes now; a transport lets its socket go on the loop's next turn: give it one.
            for transport in self._transports:
                if isinstance(transport, asyncio.WriteTransport):
                    transport.abort()
            loop.run_until_complete(asyncio.sleep(0.01))
            loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._transports.add(writer.transport)
        try:
            await self._serve(reader, writer)
        except (ProxyError, OSError, ValueError, asyncio.IncompleteReadError) as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        except asyncio.LimitOverrunError:
            self.errors.append("request head too large")
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
            self._transports.discard(writer.transport)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return  # connected and left without a request (a port probe)
        first, headers = _split_head(head)
        body = await _read_body(reader, headers)
        kept = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP]
        kept = [(k, v) for k, v in kept if k.lower() != b"content-length"]
        if body or first.split(b" ", 1)[0] in {b"POST", b"PUT", b"PATCH"}:
            kept.append((b"Content-Length", str(len(body)).encode()))
        index = next(self._next)
        self.served[index] += 1
        host, port = self.backends[index]
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port, limit=MAX_HEAD)
        except OSError as exc:
            writer.write(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            raise ProxyError(f"backend {host}:{port} refused: {exc}") from exc
        self._transports.add(up_writer.transport)
        try:
            up_writer.write(_join_head(first, kept) + body)
            await up_writer.drain()
            await self._relay(reader, writer, up_reader)
        finally:
            up_writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await up_writer.wait_closed()
            self._transports.discard(up_writer.transport)

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
    ) -> None:
        """The response, its head made ``Connection: close``, then its bytes as they come,
        until the backend closes or the client leaves."""
        head = await up_reader.readuntil(b"\r\n\r\n")
        status, headers = _split_head(head)
        kept = [(k, v) for k, v in headers if k.lower() not in {b"connection", b"keep-alive"}]
        writer.write(_join_head(status, kept))
        await writer.drain()

        async def pump() -> None:
            while chunk := await up_reader.read(_CHUNK):
                writer.write(chunk)
                await writer.drain()

        async def client_left() -> None:
            while await reader.read(_CHUNK):
                pass  # a client sends nothing more on a one-request connection

        pumping = asyncio.ensure_future(pump())
        watching = asyncio.ensure_future(client_left())
        try:
            await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pumping, watching):
                task.cancel()
            await asyncio.gather(pumping, watching, return_exceptions=True)
        if pumping.done() and not pumping.cancelled() and (exc := pumping.exception()):
            raise exc
