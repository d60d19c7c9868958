"""``resources/list``, ``resources/templates/list`` and ``resources/read``, on both wires.

A read runs the app's function on the web's own threads (``mcpq.frontend.user_code``: why
there, and its bounds). An unknown URI is ``-32602`` with the URI in ``data`` (SEP-2164, which
replaced 2025-06-18's ``-32002``); a template variable that fails its type is ``-32602`` too,
before any code runs; a resource with scopes needs them (403)."""

from __future__ import annotations

from typing import Any

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.methods.pages import more, page
from mcpq.frontend.services import Services
from mcpq.shared.errors import INVALID_PARAMS, McpError, invalid_params
from mcpq.shared.resources import ResourceTemplate, TemplateArgumentsInvalid, contents
from mcpq.shared.wire import ReadResourceResult, ResourcesList, ResourceTemplatesList

#: How long a client may keep a list or a read (SEP-2549): 0, served fresh each time (the
#: app's code decides what a read holds), and private (a read may depend on the caller).
_HINTS: dict[str, Any] = {"ttl_ms": 0, "cache_scope": "private"}


def _hints(rpc: RpcRequest) -> dict[str, Any]:
    return {} if rpc.legacy else _HINTS


async def list_resources(services: Services, rpc: RpcRequest) -> ResourcesList:
    listed, following = page(rpc, [r.listing() for r in services.registry.resources.values()])
    return ResourcesList(resources=list(listed), **more(following), **_hints(rpc))


async def list_templates(services: Services, rpc: RpcRequest) -> ResourceTemplatesList:
    templates = [t.listing() for t in services.registry.templates.values()]
    listed, following = page(rpc, templates)
    return ResourceTemplatesList(resource_templates=list(listed), **more(following), **_hints(rpc))


def resource_uri(rpc: RpcRequest) -> str:
    uri = rpc.params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise invalid_params("Invalid params: uri must be a non-empty string")
    return uri


def not_found(uri: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Resource not found: {uri[:200]}", {"uri": uri})


async def read_resource(services: Services, rpc: RpcRequest) -> ReadResourceResult:
    uri = resource_uri(rpc)
    found = services.registry.find_resource(uri)
    if found is None:
        raise not_found(uri)
    spec, values = found
    services.auth.require(rpc.principal, spec.scopes, f"resource {spec.name}")
    if isinstance(spec, ResourceTemplate):
        try:
            arguments = spec.arguments(values)
        except TemplateArgumentsInvalid as exc:
            text = f"Invalid params: {uri[:200]}: {exc}"
            raise McpError(INVALID_PARAMS, text, {"uri": uri}) from None
        fn = spec.fn

        def call() -> Any:
            return fn(**arguments)
    else:
        call = spec.fn
    mime = spec.mime_type
    read = await services.user_code.run(
        f"resource {spec.name}", call, lambda value: contents(uri, value, mime), rpc.owner
    )
    return ReadResourceResult(contents=read, **_hints(rpc))
