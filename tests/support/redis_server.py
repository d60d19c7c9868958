"""A private, real redis-server for tests, built on `ops.redis_binary.RedisProcess`.

Tests that need Redis get their own server on a free loopback port (never the shared one on
6379), so they can flush, crash and restart it at will. `redis_server()` is a context manager;
pass `persistent=True` for AOF with fsync every second (crash/restart tests).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess, find_redis_server

__all__ = [
    "AOF_ARGS",
    "IN_MEMORY_ARGS",
    "RedisProcess",
    "find_redis_server",
    "redis_server",
    "start_redis",
]

AOF_ARGS: tuple[str, ...] = ("--appendonly", "yes", "--appendfsync", "everysec", "--save", "")
"""Durable like production: every acknowledged write survives a SIGKILL after ~1 s."""


def start_redis(
    *, persistent: bool = False, data_dir: str | os.PathLike[str] | None = None
) -> RedisProcess:
    """Start a private redis-server and return it running; the caller must `close()` it."""
    args = AOF_ARGS if persistent else IN_MEMORY_ARGS
    return RedisProcess(extra_args=args, data_dir=data_dir).start()


@contextmanager
def redis_server(
    *, persistent: bool = False, data_dir: str | os.PathLike[str] | None = None
) -> Iterator[RedisProcess]:
    """A running private redis-server for the duration of the block; stopped by pid after."""
    server = start_redis(persistent=persistent, data_dir=data_dir)
    try:
        yield server
    finally:
        server.close()
