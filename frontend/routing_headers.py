"""Routing headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``) against the body.

Values may come base64-wrapped as ``=?base64?...?=`` and are decoded before comparing. Any
disagreement, a missing required header, invalid characters or a duplicated routing header is
``-32020`` (HTTP 400). A missing ``Mcp-Name`` on ``tasks/*`` is accepted by default (the
``taskId`` in the body decides; fastmcp-tasks' client never sends the header), and refused with
``MCPQ_REQUIRE_TASK_NAME`` (a gateway routes by it). A present one must always match.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from mcpq.frontend.http_messages import HttpRequest
from mcpq.shared.errors import HEADER_MISMATCH, McpError
from mcpq.shared.protocol import NAME_PARAM

ROUTING = ("mcp-protocol-version", "mcp-method", "mcp-name")
_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$")
_INVALID = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _mismatch(message: str) -> McpError:
    return McpError(HEADER_MISMATCH, message)


def decode(name: str, raw: str) -> str:
    value = raw.strip(" \t")
    # Control characters are refused before decoding: they could split a log line or a
    # header downstream, and no valid name contains them.
    if _INVALID.search(value):
        raise _mismatch(f"{name} header contains invalid characters")
    match = _SENTINEL.match(value)
    if not match:
        return value
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise _mismatch(f"{name} header has an invalid base64 value") from None


def reject_duplicates(req: HttpRequest) -> None:
    for name in ROUTING:
        if len(req.headers.get(name, [])) > 1:
            raise _mismatch(f"{name} header appears more than once")


def check(
    req: HttpRequest,
    method: str,
    params: dict[str, Any],
    version: str,
    require_task_name: bool,
) -> None:
    """Compare the routing headers with the body (validation ladder, step 5)."""
    header_version = req.header("mcp-protocol-version")
    if header_version is None:
        raise _mismatch("MCP-Protocol-Version header is required")
    if decode("MCP-Protocol-Version", header_version) != version:
        raise _mismatch("MCP-Protocol-Version header does not match params._meta protocolVersion")
    header_method = req.header("mcp-method")
    if header_method is None:
        raise _mismatch("Mcp-Method header is required")
    if decode("Mcp-Method", header_method) != method:
        raise _mismatch("Mcp-Method header does not match the request body's method")
    param = NAME_PARAM.get(method)
    if param is None:
        return
    body_value = params.get(param)
    header_name = req.header("mcp-name")
    if header_name is None:
        # Only tasks/* may omit it, and only when configured; a header that is present must
        # always match, or a router and this server would act on different tasks.
        if method.startswith("tasks/") and not require_task_name:
            return
        raise _mismatch(f"Mcp-Name header is required for {method}")
    value = decode("Mcp-Name", header_name)
    if isinstance(body_value, str) and value != body_value:
        raise _mismatch(f"Mcp-Name header does not match params.{param}")


def check_params(req: HttpRequest, params: dict[str, Any], headers: dict[str, str]) -> None:
    """SEP-2243 custom headers: every argument the tool's schema marks ``x-mcp-header`` (its
    property -> header name: ``headers``) that the body gives must be mirrored, equal, in its
    ``Mcp-Param-<name>`` header (decoded first: ``=?base64?…?=``, strictly). An intermediary may
    route on the header, so a header that says anything else than the body is refused (400,
    -32020) rather than acted on differently from the body. An argument absent or ``null`` in
    the body expects no header."""
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        return  # arguments are validated later, by the tool's schema
    for prop, header in headers.items():
        name = f"Mcp-Param-{header}"
        values = req.headers.get(name.lower(), [])
        if len(values) > 1:
            raise _mismatch(f"{name} header appears more than once")
        value = arguments.get(prop)
        if value is None:
            continue
        if not values:
            raise _mismatch(f"Header mismatch: {name} header is required (arguments.{prop} is set)")
        if not _same(value, decode(name, values[0])):
            raise _mismatch(f"Header mismatch: {name} header does not match arguments.{prop}")


def _same(value: Any, sent: str) -> bool:
    """The body's value and the header's, compared as the spec encodes them: booleans as
    ``true``/``false``, numbers numerically (``42`` and ``42.0`` agree), strings exactly."""
    if isinstance(value, bool):
        return sent == ("true" if value else "false")
    if isinstance(value, int | float):
        try:
            return float(sent) == float(value)
        except ValueError:
            return False
    return isinstance(value, str) and sent == value
