"""API keys for service-to-service callers: ``mcpq_<id>_<secret>``.

Only a SHA-256 digest of the secret is stored (``k:<id>``, a hash: name, digest, scopes,
created_ms, revoked_ms), in Redis so that every web replica sees a new or revoked key at once:
the web tier reads the record on every request and caches nothing, so a revocation takes effect
on the next request everywhere. The secret is 32 random bytes, so a plain digest is as strong as
a slow password hash would be and costs one Redis round trip per request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.redis_errors import store_errors

if TYPE_CHECKING:
    import redis

    from mcpq.shared.store.async_driver import AsyncDriver

TOKEN_PREFIX = "mcpq_"  # noqa: S105 (a prefix, not a secret)
_TOKEN = re.compile(r"^mcpq_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,128}$")  # RFC 6749 scope-token


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    scopes: tuple[str, ...]
    created_ms: int
    revoked_ms: int | None

    @property
    def principal(self) -> str:
        return f"key:{self.id}"


def split(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed key, else ``None``."""
    match = _TOKEN.match(token)
    return (match.group(1), match.group(2)) if match else None


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def check_scope(scope: str) -> str:
    if not _SCOPE.match(scope):
        raise ValueError(f"not a valid scope: {scope!r}")
    return scope


def record(key_id: str, fields: Mapping[Any, Any]) -> ApiKey:
    revoked = fields.get("revoked_ms")
    return ApiKey(
        key_id,
        str(fields.get("name", "")),
        tuple(s for s in str(fields.get("scopes", "")).split(" ") if s),
        int(fields.get("created_ms", 0)),
        int(revoked) if revoked else None,
    )


def verify(key_id: str, secret: str, fields: Mapping[Any, Any]) -> ApiKey | None:
    """The key when ``secret`` matches its stored digest and it is not revoked."""
    stored = fields.get("digest")
    # Constant-time: the digest of a guess must not leak how much of it matched.
    if not isinstance(stored, str) or not hmac.compare_digest(stored, digest(secret)):
        return None
    key = record(key_id, fields)
    return None if key.revoked_ms is not None else key


class ApiKeyLookup:
    """The web tier's side: the key a request's token names, read on every request."""

    def __init__(self, io: AsyncDriver, keys: Keys) -> None:
        self._io, self._keys = io, keys

    async def find(self, token: str) -> ApiKey | None:
        """The live key ``token`` names, or ``None`` (malformed, unknown, wrong secret, revoked).
        Read on every request, never cached: a revocation holds on the next request."""
        parts = split(token)
        if parts is None:
            return None
        with store_errors():
            fields = await self._io.client.hgetall(self._keys.api_key(parts[0]))
        return verify(parts[0], parts[1], fields) if fields else None


class ApiKeys:
    """Create, list and revoke keys (``mcpq keys``); the web tier only reads them
    (:class:`ApiKeyLookup`)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._redis = client
        self._keys = keys

    def create(self, name: str, scopes: tuple[str, ...] = ()) -> tuple[ApiKey, str]:
        """A new key and its token (shown once: only the digest is kept)."""
        if not name or len(name) > 100:
            raise ValueError("a key needs a name of 1 to 100 characters")
        for scope in scopes:
            check_scope(scope)
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        now = int(time.time() * 1000)
        fields: dict[Any, Any] = {"name": name, "digest": digest(secret)}
        fields.update(scopes=" ".join(scopes), created_ms=str(now))
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._keys.api_key(key_id), mapping=fields)
            pipe.sadd(self._keys.api_keys, key_id)
            pipe.execute()
        return record(key_id, fields), f"{TOKEN_PREFIX}{key_id}_{secret}"

    def list(self) -> list[ApiKey]:
        ids = sorted(str(key_id) for key_id in self._redis.smembers(self._keys.api_keys))
        with self._redis.pipeline(transaction=False) as pipe:
            for key_id in ids:
                pipe.hgetall(self._keys.api_key(key_id))
            rows = pipe.execute()
        keys = [record(key_id, row) for key_id, row in zip(ids, rows, strict=True) if row]
        return sorted(keys, key=lambda k: k.created_ms)

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; ``False`` if there is no such key. The record stays (listed as
        revoked) so an audit can still name it."""
        key = self._keys.api_key(key_id)
        if not self._redis.exists(key):
            return False
        self._redis.hsetnx(key, "revoked_ms", str(int(time.time() * 1000)))
        return True
