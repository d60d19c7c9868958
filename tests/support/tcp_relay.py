"""A TCP relay, run as a process of its own: ``python tcp_relay.py LISTEN_PORT HOST PORT`` pipes
every connection to ``127.0.0.1:LISTEN_PORT`` on to ``HOST:PORT``, both ways, as it comes.

A test puts it between its stack and a shared server it must never stop (the machine's
RabbitMQ): freezing the relay by pid (SIGSTOP) is the server going silent, killing it (SIGKILL)
is the server gone, every connection closed at once, and starting it again on the same port is
the server back. Standard library only, so that it starts as a plain script."""

from __future__ import annotations

import asyncio
import sys

_CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def relay(listen_port: int, host: str, port: int) -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(accept, "127.0.0.1", listen_port, reuse_address=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(relay(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
