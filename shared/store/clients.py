"""The single point that builds Redis clients, and the stores on top of them.

Every client has explicit socket timeouts (redis-py's defaults would let a request hang while
Redis is down). Blocking reads get a socket timeout above their block time.

A ``redis+sentinel://`` ``REDIS_URL`` (``mcpq.shared.redis_urls``) gets the same pools, Sentinel's
flavour: each new connection asks the sentinels where the primary is, and a connection to a
primary that was demoted (a ``READONLY`` reply) is dropped, so after a failover the next
round trip (redis-py's retry) lands on the new primary without a restart. A promoted replica
may lack the Lua scripts: every script call reloads on ``NOSCRIPT`` (``plans.ScriptPlans``;
redis-py's ``Script`` on a Cluster).
"""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as aiosentinel
import redis.cluster
import redis.exceptions as rexc
import redis.sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.maint_notifications import MaintNotificationsConfig
from redis.retry import Retry

from mcpq.shared import redis_urls
from mcpq.shared.redis_tls import redis_tls
from mcpq.shared.settings import Settings
from mcpq.shared.store.aio import AsyncTaskStore
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.lean import LeanPool, LeanSyncPool, lean_connections, sync_packer
from mcpq.shared.store.payloads import Payloads
from mcpq.shared.store.sync import TaskStore
from mcpq.shared.store.tally import StatsTally
from mcpq.shared.store.web import WebStore, web_store


def _url_and_tls(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The URL to connect to and redis-py's TLS options (``mcpq.shared.redis_tls``: verified by
    default). The URL loses its ``ssl_cert_reqs``: redis-py would let it override the options."""
    tls = redis_tls(settings)
    return tls.url, tls.redis_py()


class _SyncBlockingPool(LeanSyncPool, redis.BlockingConnectionPool):
    """The workers' pool: redis-py's blocking pool with :class:`~shared.store.lean.LeanSyncPool`'s
    fast checkout and release."""


class _BlockingSentinelPool(
    LeanSyncPool, redis.sentinel.SentinelConnectionPool, redis.BlockingConnectionPool
):
    """Sentinel's pool (where the primary is, asked per new connection) that waits for a free
    connection as :class:`redis.BlockingConnectionPool` does, instead of failing past its size,
    with the fast checkout too."""


class _AsyncBlockingPool(LeanPool, aioredis.BlockingConnectionPool):
    """The web tier's pool: redis-py's blocking pool with :class:`~shared.store.lean.LeanPool`'s
    fast checkout and release."""


class _AsyncBlockingSentinelPool(
    LeanPool, aiosentinel.SentinelConnectionPool, aioredis.BlockingConnectionPool
):
    """The asyncio flavour of :class:`_BlockingSentinelPool`, with the fast checkout too."""


def _sentinel_pool_kwargs(
    settings: Settings, target: redis_urls.SentinelUrl, tls: dict[str, Any]
) -> dict[str, Any]:
    """The servers' database, credentials and TLS (the URL's), for a Sentinel pool."""
    kwargs: dict[str, Any] = {"db": target.db, "username": target.username}
    kwargs["password"] = target.password
    if target.tls:
        kwargs.update(tls, ssl=True)
    return kwargs


def _sync_pool(settings: Settings, **options: Any) -> redis.ConnectionPool:
    url, tls = _url_and_tls(settings)
    if not redis_urls.is_sentinel(url):
        return _SyncBlockingPool.from_url(url, **tls, **options)
    target = redis_urls.parse_sentinel(url)
    sentinels = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels),
        sentinel_kwargs=redis_urls.sentinel_kwargs(
            target, settings.redis_sentinel_password, settings.redis_timeout_s, tls
        ),
    )
    kwargs = _sentinel_pool_kwargs(settings, target, tls)
    return _BlockingSentinelPool(target.service, sentinels, **kwargs, **options)  # type: ignore[no-untyped-call]


def _async_pool(settings: Settings, **options: Any) -> aioredis.ConnectionPool:
    url, tls = _url_and_tls(settings)
    if not redis_urls.is_sentinel(url):
        return lean_connections(_AsyncBlockingPool.from_url(url, **tls, **options))
    target = redis_urls.parse_sentinel(url)
    sentinels = aiosentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels),
        sentinel_kwargs=redis_urls.sentinel_kwargs(
            target, settings.redis_sentinel_password, settings.redis_timeout_s, tls
        ),
    )
    kwargs = _sentinel_pool_kwargs(settings, target, tls)
    return lean_connections(
        _AsyncBlockingSentinelPool(target.service, sentinels, **kwargs, **options)  # type: ignore[no-untyped-call]
    )


NO_MAINT_NOTIFICATIONS = MaintNotificationsConfig(enabled=False)
"""Maintenance notifications (a managed Redis's RESP3 push messages) are off on every pool: our
connections speak RESP2, where they cannot arrive, and redis-py 8, with its default (``auto``),
skips its check that a connection it hands out holds no unread reply. A command cut short
between its write and its read (``TaskCancelled`` raised into an io-pool thread, a cancelled
request) would then leave its reply to the next caller, who would read it as its own."""

SYNC_POOL_SIZE = 64
"""Connections of one synchronous client. A thread pool's runs share them: a command takes one
for a round trip (nobody holds one to wait: ``mcpq.shared.store.wakeups``), and a thread that finds
them all busy waits for one (up to ``MCPQ_REDIS_TIMEOUT_S``) instead of failing, as redis-py's
default pool (100, then an error) would."""


def sync_client(settings: Settings, *, block_s: float = 0.0) -> redis.Redis:
    # A run's claim and step memos wait for replicas too (``TaskPlans.durable``).
    wait_s = settings.redis_replica_wait_ms / 1000 if settings.redis_min_replicas else 0.0
    timeout = settings.redis_timeout_s + block_s + wait_s
    if settings.redis_cluster:
        return _sync_cluster(settings, timeout)
    pool = _sync_pool(
        settings,
        max_connections=SYNC_POOL_SIZE,
        timeout=settings.redis_timeout_s,
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=settings.redis_timeout_s,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
        maint_notifications_config=NO_MAINT_NOTIFICATIONS,
        **sync_packer(),
    )
    return redis.Redis.from_pool(pool)  # the client owns (and closes) its pool


ASYNC_POOL_SIZE = 100
"""Connections of one web process. A request takes one per round trip; waiting requests hold
none (their watches share one pub/sub connection), so a burst of requests queues for a
connection (up to ``MCPQ_REDIS_TIMEOUT_S``) instead of failing as redis-py's default pool does
past its size."""


def async_client(settings: Settings) -> aioredis.Redis:
    """The web tier's client: fails fast so a Redis outage answers 503 quickly. Its reads wait
    for no more than ``MCPQ_REDIS_TIMEOUT_S``, plus a write's ``WAIT`` for its replicas when
    ``MCPQ_REDIS_MIN_REPLICAS`` asks for one, and are not retried after a timeout (the bound
    holds); a connection that failed is retried once, on a new one (a pooled connection the
    server closed, a Redis that restarted: no 503 for a broken socket).

    NOTE: an asyncio client needs redis-py's asyncio ``Retry``: given the synchronous one, it
    retried nothing (that ``call_with_retry`` returns the coroutine it was given, unawaited, so
    the error escapes it), which this client did until the retry was tested."""
    wait_s = settings.redis_replica_wait_ms / 1000 if settings.redis_min_replicas else 0.0
    if settings.redis_cluster:
        return _async_cluster(settings, settings.redis_timeout_s + wait_s)
    pool = _async_pool(
        settings,
        max_connections=ASYNC_POOL_SIZE,
        timeout=settings.redis_timeout_s,
        decode_responses=True,
        socket_timeout=settings.redis_timeout_s + wait_s,
        # NOTE: the bound, not less. A connect's timer runs on the event loop, and a burst of
        # requests keeps the loop busy while the pool opens its connections: the connects are
        # done but their replies wait behind the other requests' work. A 0.5 s timer then
        # failed every connection of a healthy Redis (100 calls of a 300-call burst, 503, on a
        # loaded machine; tests/integration/test_store_async.py). A refused connection still
        # fails at once; only a silent host takes the whole bound.
        socket_connect_timeout=settings.redis_timeout_s,
        health_check_interval=30,
        retry=AsyncRetry(ExponentialBackoff(cap=0.2, base=0.05), 1, (rexc.ConnectionError,)),
        maint_notifications_config=NO_MAINT_NOTIFICATIONS,
    )
    return aioredis.Redis.from_pool(pool)  # the client owns (and closes) its pool


# -- Redis Cluster (MCPQ_REDIS_CLUSTER) ----------------------------------------------------------
# redis-py's cluster clients speak every command the store sends (scripts, pipelines, pub/sub),
# routing each by its keys' slot and following MOVED/ASK and TRYAGAIN (a slot being migrated)
# and a failover (a new slot map). They are typed as the plain clients: that is all the store
# relies on. Each node gets a pool of the plain client's size.
CLUSTER_ATTEMPTS = 10
"""Redirections and retries (MOVED, ASK, TRYAGAIN, a node down) before a command fails: enough
to ride out a failover (a replica takes over in about a node timeout) or a slot migration."""


class _SyncCluster(redis.cluster.RedisCluster):
    """redis-py's cluster client, whose ``close`` closes every node's connections.

    NOTE: made from a URL, it gives each node a pool that the node's client does not own
    (``auto_close_connection_pool`` is false), so its ``close`` left every node's connections
    open until the garbage collector found them (a ``ResourceWarning`` then, wherever that
    happened: seen once in the cluster failover test). Closed here, node by node."""

    def close(self) -> None:
        nodes = self.get_nodes()  # type: ignore[no-untyped-call]
        super().close()
        for node in nodes:
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()


def _sync_cluster(settings: Settings, socket_timeout: float) -> redis.Redis:
    url, tls = _url_and_tls(settings)
    client = _SyncCluster.from_url(
        url,
        **tls,
        connection_pool_class=redis.BlockingConnectionPool,
        max_connections=SYNC_POOL_SIZE,
        timeout=settings.redis_timeout_s,
        decode_responses=True,
        socket_timeout=socket_timeout,
        socket_connect_timeout=settings.redis_timeout_s,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), CLUSTER_ATTEMPTS),
    )
    return cast(redis.Redis, client)


def _async_cluster(settings: Settings, socket_timeout: float) -> aioredis.Redis:
    url, tls = _url_and_tls(settings)
    client = aioredis.RedisCluster.from_url(
        url,
        **tls,
        max_connections=ASYNC_POOL_SIZE,
        decode_responses=True,
        socket_timeout=socket_timeout,
        socket_connect_timeout=min(settings.redis_timeout_s, 0.5),
        health_check_interval=30,
        retry=AsyncRetry(ExponentialBackoff(cap=0.5, base=0.05), CLUSTER_ATTEMPTS),
    )
    return cast(aioredis.Redis, client)


def store_keys(settings: Settings) -> Keys:
    """The key schema of this deployment: its prefix and its shards (``MCPQ_STORE_SHARDS``)."""
    return Keys(settings.key_prefix, settings.store_shards)


def payloads(settings: Settings) -> Payloads:
    """How this deployment stores payloads (``MCPQ_DATA_KEYS``): built once per store, so each
    key's AES-GCM object is made once per process. Raises ``DataKeyError`` when malformed."""
    return Payloads.from_setting(settings.data_keys, store_keys(settings))


def open_store(settings: Settings) -> TaskStore:
    """The synchronous store (workers, the sweeper, ``mcpq status``). Waiting runs do not
    block on it: they share a pub/sub connection (``mcpq.shared.store.wakeups``)."""
    keys = store_keys(settings)
    return TaskStore(
        sync_client(settings),
        keys,
        payloads(settings),
        max_runs=settings.max_runs,
        tally=stats_tally(settings),
        min_replicas=settings.redis_min_replicas,
        replica_wait_ms=settings.redis_replica_wait_ms,
    )


def open_web_store(settings: Settings) -> WebStore:
    """The web tier's faces of the store, on one client (``mcpq.shared.store.web``)."""
    tasks = AsyncTaskStore(
        async_client(settings),
        store_keys(settings),
        payloads=payloads(settings),
        tally=stats_tally(settings),
        min_replicas=settings.redis_min_replicas,
        replica_wait_ms=settings.redis_replica_wait_ms,
    )
    return web_store(tasks)


def stats_tally(settings: Settings) -> StatsTally | None:
    """The process's counts, written every ``MCPQ_STATS_FLUSH_MS`` (0: in the scripts)."""
    if settings.stats_flush_ms <= 0:
        return None
    return StatsTally(lambda: sync_client(settings), settings.stats_flush_ms / 1000)
