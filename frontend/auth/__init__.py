"""Authentication of every MCP request (``MCPQ_AUTH``): who is calling, or a 401/403.

Modes: ``oauth`` (bearer JWT access tokens from an OAuth 2.1 authorization server, as the MCP
authorization spec describes: ``mcpq.frontend.auth.oauth``), ``apikey`` (``mcpq_…`` keys made by
``mcpq keys create``: ``shared.store.api_keys``), both (a key is told from a JWT by its prefix),
or none (``MCPQ_AUTH`` unset or ``none``: every caller is ``anonymous``).

Failures answer as RFC 6750 describes: 401 with ``WWW-Authenticate: Bearer`` and, when OAuth is
on, the ``resource_metadata`` URL of our RFC 9728 document (``mcpq.frontend.auth.metadata``), so an
MCP client can discover the authorization server; 403 ``insufficient_scope`` names the scope.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcpq.frontend.http_messages import HttpReply, HttpRequest
from mcpq.frontend.principal import ANONYMOUS, Principal
from mcpq.shared import jsonutil
from mcpq.shared.errors import INVALID_REQUEST, McpError
from mcpq.shared.settings import Settings
from mcpq.shared.store import ApiKeyLookup
from mcpq.shared.store.api_keys import TOKEN_PREFIX

if TYPE_CHECKING:
    # OAuth's modules (httpx, PyJWT and what they pull in: several MiB in every web process)
    # are imported only when MCPQ_AUTH has oauth (build_authenticator): a server without
    # OAuth never loads them.
    import httpx

    from mcpq.frontend.auth.oauth import JwtVerifier

METADATA_PATH = "/.well-known/oauth-protected-resource"


class AuthConfigError(ValueError):
    """The authentication settings cannot work; the message names the setting."""


@dataclass
class AuthFailed(Exception):
    """A request that does not get in: 401 (``invalid_request`` / ``invalid_token``), 403
    (``insufficient_scope``) or 503 (the issuer's keys cannot be fetched)."""

    status: int
    error: str | None
    description: str
    scope: tuple[str, ...] = field(default=())


@dataclass
class Authenticator:
    modes: tuple[str, ...]
    api_keys: ApiKeyLookup | None = None
    verifier: JwtVerifier | None = None
    required_scopes: tuple[str, ...] = ()
    metadata_url: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.modes) and self.modes != ("none",)

    async def authenticate(self, req: HttpRequest) -> Principal:
        if not self.enabled:
            return ANONYMOUS
        values = req.headers.get("authorization", [])
        if not values:
            raise AuthFailed(401, None, "authentication required")
        scheme, _, token = values[0].partition(" ")
        token = token.strip()
        if len(values) > 1 or scheme.lower() != "bearer" or not token:
            raise AuthFailed(401, "invalid_request", "expected one Authorization: Bearer header")
        principal = await self._principal(token)
        missing = principal.missing(self.required_scopes)
        if missing:
            raise AuthFailed(
                403, "insufficient_scope", "the token lacks a required scope", tuple(missing)
            )
        return principal

    async def _principal(self, token: str) -> Principal:
        if token.startswith(TOKEN_PREFIX) and "apikey" in self.modes and self.api_keys is not None:
            key = await self.api_keys.find(token)
            if key is None:
                raise AuthFailed(401, "invalid_token", "unknown or revoked API key")
            return Principal(key.principal, frozenset(key.scopes))
        if "oauth" in self.modes and self.verifier is not None:
            from mcpq.frontend.auth.oauth import (  # loaded with verifier
                KeysUnavailable,
                TokenInvalid,
            )

            try:
                return await self.verifier.verify(token)
            except TokenInvalid as exc:
                raise AuthFailed(401, "invalid_token", str(exc)) from None
            except KeysUnavailable:
                raise AuthFailed(
                    503, None, "the authorization server's keys are unavailable"
                ) from None
        raise AuthFailed(401, "invalid_token", "not a valid credential for this server")

    def require(self, principal: Principal, scopes: tuple[str, ...], what: str) -> None:
        """Raise 403 ``insufficient_scope`` (as a JSON-RPC error with the challenge header) when
        ``principal`` lacks one of ``scopes`` (a tool's ``@tool(scopes=...)``)."""
        missing = principal.missing(scopes)
        if not missing:
            return
        failed = AuthFailed(
            403, "insufficient_scope", f"{what} needs scope {' '.join(missing)}", tuple(scopes)
        )
        raise McpError(
            INVALID_REQUEST,
            f"Forbidden: {failed.description}",
            {"requiredScopes": list(scopes)},
            http_status=403,
            headers={"WWW-Authenticate": self.challenge(failed)},
        )

    def reply(self, failed: AuthFailed) -> HttpReply:
        """The HTTP answer to a failure: RFC 6750 challenge and an OAuth-style JSON body."""
        headers: dict[str, str] = {}
        if failed.status in {401, 403}:
            headers["WWW-Authenticate"] = self.challenge(failed)
        else:
            headers["Retry-After"] = "5"
        body: dict[str, str] = {"error": failed.error or "unauthorized"}
        if failed.status == 503:
            body["error"] = "temporarily_unavailable"
        body["error_description"] = failed.description
        return HttpReply(failed.status, jsonutil.dumpb(body), "application/json", headers)

    def challenge(self, failed: AuthFailed) -> str:
        params: list[str] = []
        if self.metadata_url:
            params.append(f'resource_metadata="{self.metadata_url}"')
        if not self.metadata_url:
            params.append('realm="mcpq"')
        if failed.error:
            params.append(f'error="{failed.error}"')
            params.append(f'error_description="{failed.description}"')
        if failed.scope:
            params.append(f'scope="{" ".join(failed.scope)}"')
        return "Bearer " + ", ".join(params)


def metadata_url(resource_url: str) -> str:
    """RFC 9728 §3.1: the well-known path is inserted between the host and the resource's path
    (``https://h/mcp`` → ``https://h/.well-known/oauth-protected-resource/mcp``)."""
    scheme, _, rest = resource_url.partition("://")
    host, slash, path = rest.partition("/")
    suffix = f"/{path}".rstrip("/") if slash else ""
    return f"{scheme}://{host}{METADATA_PATH}{suffix}"


def build_authenticator(
    settings: Settings, api_keys: ApiKeyLookup, http: httpx.AsyncClient | None = None
) -> Authenticator:
    """The authenticator ``MCPQ_AUTH`` asks for; ``AuthConfigError`` names a missing setting."""
    check_settings(settings)
    modes = settings.auth
    if settings.auth_open:
        return Authenticator(modes)
    verifier = None
    if "oauth" in modes:
        import httpx

        from mcpq.frontend.auth.oauth import Jwks, JwtVerifier

        jwks = Jwks(
            settings.oauth_issuer,
            settings.oauth_jwks_url,
            settings.jwks_cache_s,
            http or httpx.AsyncClient(follow_redirects=False),
        )
        verifier = JwtVerifier(
            jwks, settings.oauth_issuer, settings.audience, settings.oauth_algorithms
        )
    return Authenticator(
        modes,
        api_keys,
        verifier,
        settings.oauth_scopes,
        metadata_url(settings.resource_url) if "oauth" in modes else "",
    )


def check_settings(settings: Settings) -> None:
    """Every authentication setting that cannot work, as one line naming it."""
    if "oauth" not in settings.auth:
        return
    if not settings.resource_url.startswith(("https://", "http://")):
        raise AuthConfigError(
            "MCPQ_RESOURCE_URL must be this server's MCP URL (https://host/mcp) "
            "when MCPQ_AUTH has oauth"
        )
    if not settings.oauth_issuer.startswith(("https://", "http://")):
        raise AuthConfigError("MCPQ_OAUTH_ISSUER must be the authorization server's issuer URL")
    weak = [
        alg for alg in settings.oauth_algorithms if alg.upper().startswith("HS") or alg == "none"
    ]
    if weak or not settings.oauth_algorithms:
        raise AuthConfigError(
            "MCPQ_OAUTH_ALGORITHMS must list asymmetric algorithms only "
            "(RS256, ES256, PS256, EdDSA, ...)"
        )
