"""The load generator's HTTP client: one keep-alive HTTP/1.1 connection per simulated client,
requests written in one piece, replies read by ``Content-Length`` or chunks.

Why not httpx: a load generator must cost the machine far less than the servers it measures,
and on a shared 2-core machine httpx's per-request work (several hundred microseconds) made the
generator, not the server, what capped the rates (mcpq and its peer both stopped near 280
created/s). This client does only what a benchmark needs: POST, JSON or SSE replies (the
peer streams some replies as ``text/event-stream``; the last JSON-RPC message of the stream is
the reply), reconnecting when the server closes the connection.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import orjson


class HttpError(Exception):
    """The connection failed or the reply was not HTTP the client understands."""


class RawResponse:
    def __init__(self, status_code: int, body: bytes, content_type: str) -> None:
        self.status_code, self.body, self.content_type = status_code, body, content_type

    def json(self) -> Any:
        if self.content_type.startswith("text/event-stream"):
            # The JSON-RPC reply is the last `data:` line that holds one.
            found: Any = None
            for line in self.body.splitlines():
                if line.startswith(b"data:") and line[5:].strip():
                    message = orjson.loads(line[5:])
                    if isinstance(message, dict) and ("result" in message or "error" in message):
                        found = message
            if found is None:
                raise ValueError("no JSON-RPC reply in the event stream")
            return found
        return orjson.loads(self.body)


class RawClient:
    """One connection to the server of ``url``; ``post`` is httpx's ``AsyncClient.post`` as far
    as the load generator uses it (``json=``, ``headers=``, ``.status_code``, ``.json()``)."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path or "/"
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None

    async def post(self, url: str, *, json: Any, headers: dict[str, str]) -> RawResponse:
        body = orjson.dumps(json)
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        for attempt in (1, 2):  # once more on a fresh connection if a kept-alive one was closed
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await self._exchange(request)
            except (OSError, asyncio.IncompleteReadError, HttpError):
                await self.aclose()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _exchange(self, request: bytes) -> RawResponse:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(status_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            raise HttpError(f"not an HTTP status line: {status_line[:80]!r}") from None
        fields: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            if name:
                fields[name.strip().lower()] = value.strip()
        if "content-length" in fields:
            body = await reader.readexactly(int(fields["content-length"]))
        elif fields.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")  # the empty trailer
            body = b"".join(chunks)
        else:
            body = b""
        if fields.get("connection", "").lower() == "close":
            await self.aclose()
        return RawResponse(status, body, fields.get("content-type", ""))
