"""JSON-RPC messages as mcpq writes them: the one place a response, a notification or a
server→client request is built, for a JSON reply and for every message on a stream."""

from __future__ import annotations

from typing import Any

from mcpq.shared.errors import McpError
from mcpq.shared.protocol import META_SERVER_INFO
from mcpq.shared.wire import Result, legacy_dump

Message = dict[str, Any]
RequestId = int | str | None


def response(
    rid: RequestId,
    *,
    result: Result | None = None,
    error: McpError | None = None,
    server_info: dict[str, str],
    legacy: bool = False,
) -> Message:
    """A response: an error, or a result. 2026-07-28 results carry their ``resultType`` and
    ``_meta.serverInfo``; 2025-era results carry neither (those clients got the server's info
    from ``initialize``)."""
    if error is not None:
        return {"jsonrpc": "2.0", "id": rid, "error": error.to_error()}
    assert result is not None
    if legacy:
        return {"jsonrpc": "2.0", "id": rid, "result": legacy_dump(result)}
    dumped = result.dump()
    dumped["_meta"] = {**dumped.get("_meta", {}), META_SERVER_INFO: server_info}
    return {"jsonrpc": "2.0", "id": rid, "result": dumped}


def notification(method: str, params: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(rid: str, method: str, params: dict[str, Any]) -> Message:
    """A server→client request (``elicitation/create``, ``sampling/createMessage``)."""
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
