"""A slow HTTP server for the waiting-runs benchmark (``mcpq.ops.bench.waiting_runs``):
``python -m mcpq.ops.bench.slow_http``.

``GET <any path>?seconds=S`` is answered ``200 ok`` after the server held it ``S`` seconds (at most
an hour); ``GET /stats`` answers at once with how many requests it holds and has answered, as
JSON. Keep-alive HTTP/1.1, on one asyncio event loop, loopback only: each held request costs a
coroutine and a socket, so it holds tens of thousands at once (its open-files limit is raised to
the hard limit first). It binds a free port and prints ``listening on http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

MAX_HOLD_S = 3600.0
#: Pending connections the kernel queues before accept (it caps this at net.core.somaxconn).
BACKLOG = 4096
_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class SlowServer:
    def __init__(self) -> None:
        self.holding = 0
        self.answered = 0

    def _reply(self, status: str, body: bytes, kind: str = "text/plain") -> bytes:
        head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n"
        return head.encode() + body

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: its requests one after another (keep-alive), each held first."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                writer.write(await self._answer(head))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client went (a run cancelled, a worker killed): nothing to answer
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> bytes:
        target = head.split(b"\r\n", 1)[0].split(b" ")
        parts = urlsplit(target[1].decode("latin-1") if len(target) > 1 else "/")
        if parts.path == "/stats":
            stats = {"holding": self.holding, "answered": self.answered}
            return self._reply("200 OK", json.dumps(stats).encode(), "application/json")
        try:
            seconds = min(float(parse_qs(parts.query).get("seconds", ["0"])[0]), MAX_HOLD_S)
        except ValueError:
            return self._reply("400 Bad Request", b"seconds: a number")
        self.holding += 1
        try:
            if seconds > 0:
                await asyncio.sleep(seconds)
        finally:
            self.holding -= 1
        self.answered += 1
        return _OK


def raise_open_files_limit() -> int:
    """The soft limit of open files raised to the hard one; returns it."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def _main(port: int) -> None:
    limit = raise_open_files_limit()
    server = await asyncio.start_server(
        SlowServer().serve, "127.0.0.1", port, backlog=BACKLOG, reuse_address=True
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{bound} (open files: {limit})", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpq.ops.bench.slow_http", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
