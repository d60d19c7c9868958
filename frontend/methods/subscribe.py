"""``resources/subscribe`` and ``resources/unsubscribe`` (2025-era sessions; 2026-07-28 names the
resources in ``subscriptions/listen`` instead), and the check of a URI both make.

A subscription is the session's own: stored beside it, slid and ended with it
(``mcpq.shared.store.resource_events``); another principal holding the session's id is refused
before any method runs (an unknown session, 404). Its updates reach the session's GET stream,
on any replica, when ``app.resource_updated(uri)`` announces them.
"""

from __future__ import annotations

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.methods.resources import not_found, resource_uri
from mcpq.frontend.principal import Principal
from mcpq.frontend.services import Services
from mcpq.shared.errors import INTERNAL_ERROR, INVALID_PARAMS, McpError, invalid_params
from mcpq.shared.resources import ResourceTemplate, TemplateArgumentsInvalid
from mcpq.shared.store.resource_events import MAX_SESSION_SUBSCRIPTIONS
from mcpq.shared.wire import Ack

#: The longest URI a subscription may name (it is stored, sealed, with the session).
MAX_URI_CHARS = 2048


def readable(services: Services, principal: Principal, uri: str) -> None:
    """Refuse a subscription exactly as a read of ``uri`` would be refused: a URI no resource
    or template serves is -32602 with ``data.uri`` (SEP-2164), a resource whose scopes the
    caller lacks 403, a template variable that fails its type -32602. Nothing is read."""
    if len(uri) > MAX_URI_CHARS:
        raise invalid_params(f"Invalid params: a resource URI has at most {MAX_URI_CHARS} chars")
    found = services.registry.find_resource(uri)
    if found is None:
        raise not_found(uri)
    spec, values = found
    services.auth.require(principal, spec.scopes, f"resource {spec.name}")
    if isinstance(spec, ResourceTemplate):
        try:
            spec.arguments(values)
        except TemplateArgumentsInvalid as exc:
            text = f"Invalid params: {uri[:200]}: {exc}"
            raise McpError(INVALID_PARAMS, text, {"uri": uri}) from None


async def subscribe(services: Services, rpc: RpcRequest) -> Ack:
    uri = resource_uri(rpc)
    readable(services, rpc.principal, uri)
    assert rpc.session is not None  # a 2025-era method: only a session's requests reach it
    ttl_ms = int(services.settings.session_ttl_s * 1000)
    # NOTE: stored (with the session's entry in the resource's index) before the answer: an
    # update announced once the client has its answer reaches the session's GET stream.
    done = await services.events.subscribe(rpc.session.sref, uri, ttl_ms)
    if done == 0:
        raise McpError(INTERNAL_ERROR, "The session ended")
    if done < 0:
        limit = MAX_SESSION_SUBSCRIPTIONS
        raise invalid_params(f"Invalid params: a session subscribes to at most {limit} resources")
    return Ack()


async def unsubscribe(services: Services, rpc: RpcRequest) -> Ack:
    """Idempotent: a URI the session did not subscribe to (or no longer served) is fine."""
    uri = resource_uri(rpc)
    if len(uri) > MAX_URI_CHARS:
        raise invalid_params(f"Invalid params: a resource URI has at most {MAX_URI_CHARS} chars")
    assert rpc.session is not None
    await services.events.unsubscribe(rpc.session.sref, uri)
    return Ack()
