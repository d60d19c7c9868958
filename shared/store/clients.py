"""The single point that builds Redis clients, and the stores on top of them.

Every client has explicit socket timeouts (redis-py's defaults would let a request hang while
Redis is down). Blocking reads get a socket timeout above their block time.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from shared.redis_tls import redis_tls
from shared.settings import Settings
from shared.store.aio import AsyncTaskStore
from shared.store.keys import Keys
from shared.store.payloads import Payloads
from shared.store.sync import TaskStore


def _url_and_tls(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The URL to connect to and redis-py's TLS options (``shared.redis_tls``: verified by
    default). The URL loses its ``ssl_cert_reqs``: redis-py would let it override the options."""
    tls = redis_tls(settings)
    return tls.url, tls.redis_py()


SYNC_POOL_SIZE = 64
"""Connections of one synchronous client. A thread pool's runs share them: a command takes one
for a round trip (nobody holds one to wait: ``shared.store.wakeups``), and a thread that finds
them all busy waits for one (up to ``MCPQ_REDIS_TIMEOUT_S``) instead of failing, as redis-py's
default pool (100, then an error) would."""


def sync_client(settings: Settings, *, block_s: float = 0.0) -> redis.Redis:
    timeout = settings.redis_timeout_s + block_s
    url, tls = _url_and_tls(settings)
    pool = redis.BlockingConnectionPool.from_url(
        url,
        **tls,
        max_connections=SYNC_POOL_SIZE,
        timeout=settings.redis_timeout_s,
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=settings.redis_timeout_s,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
    )
    return redis.Redis.from_pool(pool)  # the client owns (and closes) its pool


ASYNC_POOL_SIZE = 100
"""Connections of one web process. A request takes one per round trip; waiting requests hold
none (their watches share one pub/sub connection), so a burst of requests queues for a
connection (up to ``MCPQ_REDIS_TIMEOUT_S``) instead of failing as redis-py's default pool does
past its size."""


def async_client(settings: Settings) -> aioredis.Redis:
    """The web tier's client: fails fast (one retry) so a Redis outage answers 503 quickly."""
    url, tls = _url_and_tls(settings)
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        **tls,
        max_connections=ASYNC_POOL_SIZE,
        timeout=settings.redis_timeout_s,
        decode_responses=True,
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=min(settings.redis_timeout_s, 0.5),
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
    )
    return aioredis.Redis.from_pool(pool)  # the client owns (and closes) its pool


def payloads(settings: Settings) -> Payloads:
    """How this deployment stores payloads (``MCPQ_DATA_KEYS``): built once per store, so each
    key's AES-GCM object is made once per process. Raises ``DataKeyError`` when malformed."""
    return Payloads.from_setting(settings.data_keys, Keys(settings.key_prefix))


def open_store(settings: Settings) -> TaskStore:
    """The synchronous store (workers, the sweeper, ``mcpq status``). Waiting runs do not
    block on it: they share a pub/sub connection (``shared.store.wakeups``)."""
    keys = Keys(settings.key_prefix)
    return TaskStore(sync_client(settings), keys, payloads(settings), max_runs=settings.max_runs)


def open_async_store(settings: Settings) -> AsyncTaskStore:
    keys = Keys(settings.key_prefix)
    return AsyncTaskStore(async_client(settings), keys, payloads(settings))
