"""What `mcpq dev` checks about a Redis of the developer's (``REDIS_URL``) before it starts
anything (:func:`check_dev_redis`): that it answers (:func:`unreachable`), and that it holds no
task sealed with a data key this launcher does not have (:func:`foreign_data_key`), its own kept
per Redis URL (``mcpq.ops.dev.state.dev_data_key``). Each problem is one line naming the fix.

Both, and the launcher's watch while it runs (``mcpq.ops.dev.redis_watch``), use a client of their
own (:func:`probe_client`) that gives up after one second and never retries: the children's
clients retry and wait ``MCPQ_REDIS_TIMEOUT_S``, and the launcher must know sooner than they do.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from mcpq.ops.dev.state import dev_data_key
from mcpq.shared.celery_config import connection_problem
from mcpq.shared.redis_tls import redis_tls
from mcpq.shared.redis_urls import is_sentinel, redact_url
from mcpq.shared.sealing import SETTING, DataKeyError, new_data_key, parse_data_keys, sealed_kid
from mcpq.shared.settings import Settings
from mcpq.shared.store.clients import store_keys, sync_client
from mcpq.shared.store.rotation import scan, sealed_fields

#: How long a probe waits for Redis to answer.
PROBE_TIMEOUT_S = 1.0
#: How long the launcher keeps trying before it says that Redis cannot be reached (a Redis
#: started a moment before `mcpq dev` is waited for): the line comes within 5 s either way.
REACH_WAIT_S = 2.0
#: At most this many of the store's hashes are read for their data keys (a few round trips,
#: even on a Redis that holds many tasks).
KEY_CHECK_LIMIT = 2000
#: Keys per SCAN step: SCAN walks every key of the database, the store's or not, so a Redis
#: shared with much else costs (its keys / this) round trips.
_BATCH = 1000


def check_dev_redis(env: dict[str, str]) -> str | None:
    """`mcpq dev`'s check before it starts anything: set ``MCPQ_DATA_KEYS`` in ``env`` unless
    the developer did, and with a ``REDIS_URL`` check that Redis first (:func:`unreachable`,
    :func:`foreign_data_key`). The one line to stop with, if any."""
    url = env.get("REDIS_URL")
    if not url:
        # The Redis started here dies with the launcher, and so may its key.
        env["MCPQ_DATA_KEYS"] = env.get("MCPQ_DATA_KEYS") or new_data_key()
        return None
    if problem := unreachable(env):
        return problem
    if not env.get("MCPQ_DATA_KEYS"):
        try:
            env["MCPQ_DATA_KEYS"] = dev_data_key(env, url)
        except OSError as exc:
            return (
                f"cannot keep a data key for the Redis of REDIS_URL ({exc.strerror or exc}): "
                "set MCPQ_DATA_KEYS (`mcpq keys new-data-key` prints an entry)"
            )
    return foreign_data_key(env)


def probe_client(env: Mapping[str, str]) -> redis.Redis:
    """A client of ``REDIS_URL`` (with its TLS policy) that waits at most
    :data:`PROBE_TIMEOUT_S` and does not retry. Sentinel and Cluster URLs get mcpq's own
    client (which finds the primary, or the nodes), with that timeout."""
    settings = Settings.from_env(env)
    if settings.redis_cluster or is_sentinel(settings.redis_url):
        return sync_client(dataclasses.replace(settings, redis_timeout_s=PROBE_TIMEOUT_S))
    tls = redis_tls(settings)
    return redis.Redis.from_url(
        tls.url,
        socket_timeout=PROBE_TIMEOUT_S,
        socket_connect_timeout=PROBE_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
        **tls.redis_py(),
    )


def ping(client: redis.Redis) -> Exception | None:
    """``None`` when Redis answers PING, else why not."""
    try:
        client.ping()
    except Exception as exc:  # refused, timed out, TLS, a wrong password, LOADING: all "not now"
        return exc
    return None


def unreachable(env: Mapping[str, str], wait_s: float = REACH_WAIT_S) -> str | None:
    """``None`` once ``REDIS_URL`` answers (tried for up to ``wait_s``); else the one line
    that says it does not, and what to do."""
    url = env["REDIS_URL"]
    try:
        client = probe_client(env)
    except ValueError as exc:  # a URL or TLS setting redis-py or mcpq cannot use
        return f"REDIS_URL={redact_url(url)}: {exc}"
    deadline = time.monotonic() + wait_s
    try:
        while (problem := ping(client)) is not None:
            if time.monotonic() + 0.25 >= deadline:
                return (
                    f"cannot reach Redis at {redact_url(url)} (REDIS_URL): "
                    f"{connection_problem(problem, url)}; start it, or unset REDIS_URL and "
                    "mcpq dev starts one of its own"
                )
            time.sleep(0.25)
    finally:
        client.close()
    return None


def foreign_data_key(env: Mapping[str, str]) -> str | None:
    """``None`` when every sealed task payload the store's first :data:`KEY_CHECK_LIMIT`
    hashes hold opens with a key of ``MCPQ_DATA_KEYS``; else the one line refusing that Redis.

    A sealed value names the id of the key that sealed it (``v1.<key id>.…``,
    ``mcpq.shared.sealing``): comparing ids needs no decryption. Without this, every earlier
    task would read "stored task data could not be decrypted"."""
    settings = Settings.from_env(env)
    try:
        parsed = parse_data_keys(settings.data_keys)
    except DataKeyError as exc:
        return str(exc)
    ours = set() if parsed is None else {key.kid for key in parsed}
    client = probe_client(env)
    try:
        found = _foreign_kids(client, settings, ours)
    except (redis.RedisError, OSError):
        return None  # gone meanwhile: the launcher's watch says so
    finally:
        client.close()
    if not found:
        return None
    named = ", ".join(repr(kid) for kid in sorted(found))
    return (
        f"Redis at {redact_url(settings.redis_url)} (REDIS_URL) holds tasks sealed with data "
        f"key {named}, which {SETTING} does not hold: set {SETTING} to the entry that sealed "
        "them, or point REDIS_URL at another database"
    )


def _foreign_kids(client: redis.Redis, settings: Settings, ours: set[str]) -> set[str]:
    keys = store_keys(settings)
    found: set[str] = set()
    checked = 0
    for batch in scan(client, keys, _BATCH):
        wanted = [(key, sealed_fields(keys, key)) for key in batch]
        hashes = [(key, fields) for key, fields in wanted if fields is not None]
        pipe = client.pipeline(transaction=False)
        for key, fields in hashes:
            # () means every field of the hash is a payload (a task's inputs, answers, steps).
            if fields:
                pipe.hmget(key, list(fields))
            else:
                pipe.hvals(key)
        for values in pipe.execute():
            for value in values:
                kid = sealed_kid(value) if isinstance(value, str) else None
                if kid is not None and kid not in ours:
                    found.add(kid)
        checked += len(hashes)
        if found or checked >= KEY_CHECK_LIMIT:
            break
    return found
