"""RFC 9728 protected-resource metadata: how an MCP client finds our authorization server.

Served at ``/.well-known/oauth-protected-resource`` and at the path-inserted form for the MCP
endpoint (``/.well-known/oauth-protected-resource/mcp``), which the ``resource_metadata`` of
our 401 challenges points to. Public by design (RFC 9728 §3): it holds no secret.
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from mcpq.shared import jsonutil
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings


def document(settings: Settings, registry: Registry) -> dict[str, Any]:
    scopes = sorted(
        {*settings.oauth_scopes, *(s for t in registry.tools.values() for s in t.scopes)}
    )
    doc: dict[str, Any] = {
        "resource": settings.resource_url,
        "authorization_servers": [settings.oauth_issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": settings.server_name,
    }
    if scopes:
        doc["scopes_supported"] = scopes
    return doc


class MetadataResource:
    def __init__(self, settings: Settings, registry: Registry) -> None:
        self.body = jsonutil.dumpb(document(settings, registry))

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.data = self.body
        resp.content_type = "application/json"
        resp.set_header("Cache-Control", "public, max-age=3600")
