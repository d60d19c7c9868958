"""The SERVER span of one MCP request (``mcpq.shared.tracing``), named and described with the MCP
semantic conventions the official SDK uses: ``{method} {target}`` (``tools/call refund``),
``mcp.method.name``, ``mcp.protocol.version``, ``jsonrpc.request.id``, and for a tool call
``gen_ai.operation.name = execute_tool`` and ``gen_ai.tool.name``. Nothing of the request's
content: no argument, no taskId, no URI (a resource's URI may name what it holds)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from mcpq.frontend.http_messages import HttpReply, HttpRequest
from mcpq.shared import tracing
from mcpq.shared.tracing.api import TRACE_KEYS, Kept

Attributes = dict[str, str | int | float | bool]
#: Methods whose ``params.name`` is the span's target (a tool's or a prompt's name).
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}


def describe(
    method: str, params: Mapping[str, Any], version: str | None, rid: Any
) -> tuple[str, Attributes]:
    """The span's name and attributes for one request."""
    attributes: Attributes = {"mcp.method.name": method}
    if version:
        attributes["mcp.protocol.version"] = version
    if isinstance(rid, str | int) and not isinstance(rid, bool):
        attributes["jsonrpc.request.id"] = str(rid)
    name = method
    target = params.get("name")
    if method in _NAMED and isinstance(target, str) and target:
        name = f"{method} {target[:100]}"
        attributes[_NAMED[method]] = target[:100]
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
    return name, attributes


def headers_of(req: HttpRequest) -> dict[str, str]:
    """The request's trace headers (the parent when ``_meta`` carries none)."""
    return {key: value for key in TRACE_KEYS if (value := req.header(key))}


async def traced(
    req: HttpRequest,
    method: str,
    params: Mapping[str, Any],
    version: str | None,
    rid: Any,
    handle: Callable[[], Awaitable[tuple[HttpReply, Any, int | None]]],
) -> tuple[HttpReply, Any, int | None]:
    """``handle()`` inside the request's span; off, just ``handle()``. The third item of what it
    returns is the JSON-RPC error code, if any: the span's status. A streamed reply's span ends
    when its stream does (the call it answers runs until then), not when the stream starts."""
    current = tracing.current()
    if not current.on:
        return await handle()
    name, attributes = describe(method, params, version, rid)
    meta = params.get("_meta")
    with current.server_span(
        name, attributes, meta if isinstance(meta, dict) else None, headers_of(req)
    ) as span:
        done = await handle()
        if done[2] is not None:
            span.set("rpc.jsonrpc.error_code", done[2])
            span.fail(done[2], f"JSON-RPC error {done[2]}")
        reply = done[0]
        if reply.stream is not None:
            reply.stream = _ending(reply.stream, span.keep_open())
        return done


async def _ending(
    stream: AsyncIterator[dict[str, Any] | None], kept: Kept
) -> AsyncIterator[dict[str, Any] | None]:
    """``stream`` with its request's span current while each of its messages is made (so the
    reads of its steps are the span's children), then the span ended once the stream is over:
    sent to its end, failed, or closed because the client went away.

    NOTE: the span is made current around each step, never across a ``yield``: the consumer
    runs between two steps, and a context entered before a yield and left after it would leak
    into the consumer, or fail to leave if the stream were closed from another context."""
    try:
        while True:
            with kept.resumed():
                try:
                    message = await anext(stream)
                except StopAsyncIteration:
                    return
            yield message
    finally:
        try:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:  # its cleanup now (a call's stream stops its run)
                await aclose()
        finally:
            kept.end()
