"""OAuth 2.1 resource server: bearer JWT access tokens checked against the issuer's JWKS.

PyJWT does the JOSE work (signature, ``exp``/``nbf``/``iss``/``aud``); this module only finds
the key. The JWKS is fetched over HTTP (from ``MCPQ_OAUTH_JWKS_URL``, or the ``jwks_uri`` of
the issuer's RFC 8414 / OpenID metadata), kept ``MCPQ_JWKS_CACHE_S``, and fetched again at once
when a token names a key id we do not hold (the issuer rotated), at most once per
``REFETCH_COOLDOWN_S`` so that tokens with made-up key ids cannot make us flood the issuer.
When the issuer cannot be reached the keys we hold keep serving (stale-if-error).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt

from mcpq.frontend.principal import Principal

log = logging.getLogger("mcpq.auth")

REFETCH_COOLDOWN_S = 10.0
FETCH_TIMEOUT_S = 5.0
FAILURE_BACKOFF_S = 5.0
LEEWAY_S = 30
SYMMETRIC = ("HS256", "HS384", "HS512")


class TokenInvalid(Exception):
    """The token does not authenticate anyone (401 ``invalid_token``)."""


class KeysUnavailable(Exception):
    """No key set could be fetched from the issuer and none is held (503)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata is: RFC 8414 (``/.well-known/`` inserted before the path),
    then OpenID Connect Discovery (appended), as the MCP authorization spec orders them."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    oauth = urlunsplit(
        (parts.scheme, parts.netloc, f"/.well-known/oauth-authorization-server{path}", "", "")
    )
    oidc = urlunsplit(
        (parts.scheme, parts.netloc, f"{path}/.well-known/openid-configuration", "", "")
    )
    return [oauth, oidc]


class Jwks:
    """The issuer's signing keys, by key id."""

    def __init__(
        self, issuer: str, jwks_url: str, cache_s: float, client: httpx.AsyncClient
    ) -> None:
        self.issuer = issuer
        self.jwks_url = jwks_url
        self.cache_s = cache_s
        self._client = client
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched = 0.0  # monotonic time of the last successful fetch
        self._forced = -REFETCH_COOLDOWN_S  # of the last fetch for an unknown key id
        self._attempts = 0  # fetches tried so far (successful or not)
        self._failed = -FAILURE_BACKOFF_S  # monotonic time of the last failed fetch
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK:
        now = time.monotonic()
        stale = not self._keys or now - self._fetched > self.cache_s
        # After a failed fetch, wait before the next: while the issuer is away every request
        # would otherwise wait for its timeout.
        if stale and now - self._failed >= FAILURE_BACKOFF_S:
            await self._refresh(self._attempts)
        found = self._find(kid)
        if found is None and time.monotonic() - self._forced >= REFETCH_COOLDOWN_S:
            # A key id we do not hold: the issuer may have rotated. At most one such fetch per
            # cooldown, so tokens with made-up key ids cannot make us flood the issuer.
            self._forced = time.monotonic()
            await self._refresh(self._attempts)
            found = self._find(kid)
        if found is None:
            if not self._keys:
                raise KeysUnavailable()
            raise TokenInvalid("unknown signing key")
        return found

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:  # a token without a key id is only usable against a single-key set
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self, seen: int) -> None:
        """Fetch the key set, unless another request fetched it (or tried) since we looked."""
        async with self._lock:
            if self._attempts != seen:
                return  # concurrent requests share one fetch
            self._attempts += 1
            try:
                url = self.jwks_url or await self._discover()
                reply = await self._client.get(url, timeout=FETCH_TIMEOUT_S)
                reply.raise_for_status()
                keys = jwt.PyJWKSet.from_dict(reply.json()).keys
            except (httpx.HTTPError, ValueError, jwt.PyJWKSetError) as exc:
                # Stale-if-error: the keys we hold still verify tokens while the issuer is away.
                log.warning("could not fetch the issuer's JWKS: %s", type(exc).__name__)
                self._failed = time.monotonic()
                return
            held = {str(k.key_id): k for k in keys if k.key_id is not None}
            if not held and len(keys) == 1:
                held = {"": keys[0]}
            self._keys = held
            self._fetched = time.monotonic()

    async def _discover(self) -> str:
        for url in metadata_urls(self.issuer):
            reply = await self._client.get(url, timeout=FETCH_TIMEOUT_S)
            if reply.status_code != 200:
                continue
            document = reply.json()
            # RFC 8414 §3.3: metadata whose issuer differs from the one we asked for is refused.
            if document.get("issuer") != self.issuer or not isinstance(
                document.get("jwks_uri"), str
            ):
                raise ValueError("issuer metadata does not match MCPQ_OAUTH_ISSUER")
            self.jwks_url = document["jwks_uri"]
            return self.jwks_url
        raise httpx.HTTPError("no issuer metadata found")


@dataclass(frozen=True)
class JwtVerifier:
    jwks: Jwks
    issuer: str
    audience: str
    algorithms: tuple[str, ...]

    async def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenInvalid("malformed token") from None
        if header.get("alg") not in self.algorithms:
            raise TokenInvalid("signing algorithm not accepted")
        kid = header.get("kid")
        key = await self.jwks.key(kid if isinstance(kid, str) else None)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenInvalid("token expired") from None
        except jwt.PyJWTError:
            raise TokenInvalid("token not valid for this resource") from None
        return Principal(principal_id(self.issuer, str(claims["sub"])), _scopes(claims))


def principal_id(issuer: str, subject: str) -> str:
    """A fixed-length owner id for ``iss`` + ``sub`` (a subject is unique only per issuer)."""
    return "oauth:" + hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:32]


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """RFC 9068 ``scope`` (space-separated), or the ``scp`` list some issuers send."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str))
    return frozenset()
