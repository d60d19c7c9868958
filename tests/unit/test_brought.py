"""Bringing a FastMCP or MCP SDK server (``mcpq.shared.brought``): what is served of it, how its
``task=`` maps, and what cannot carry over, refused in one line naming it."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from fastmcp import Context as FastContext
from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware
from fastmcp.utilities.tasks import TaskConfig
from mcp.server.mcpserver import Context, MCPServer

from mcpq.shared.brought import bring, kind
from mcpq.shared.registry import Registry
from mcpq.shared.tool_signature import ToolDefinitionError


def test_only_their_servers_are_recognised() -> None:
    assert kind(FastMCP("a")) == "fastmcp"
    assert kind(MCPServer("b")) == "sdk"
    assert kind(object()) is None and bring(object(), "x:y") is None


def test_fastmcp_task_settings_map_to_modes() -> None:
    server = FastMCP("modes")

    @server.tool
    async def plain() -> str:
        return ""

    @server.tool(task=True)
    async def maybe() -> str:
        return ""

    @server.tool(task=TaskConfig(mode="required"))
    async def always() -> str:
        return ""

    brought = bring(server, "m:server")
    assert brought is not None
    modes = {t.name: t.mode for t in brought.tools}
    assert modes == {"plain": "never", "maybe": "optional", "always": "required"}
    assert brought.name == "modes"


def test_an_sdk_server_s_tools_are_optional_tasks() -> None:
    server = MCPServer("sdk")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    brought = bring(server, "m:server")
    assert brought is not None
    (tool,) = brought.tools
    assert (tool.name, tool.mode) == ("add", "optional")
    assert tool.listing()["inputSchema"]["required"] == ["a", "b"]


@asynccontextmanager
async def pool(server: Any) -> AsyncIterator[dict[str, Any]]:
    yield {"db": "connection"}


class Audit(Middleware):
    pass


def _fastmcp(**options: Any) -> FastMCP:
    return FastMCP("refused", **options)


def _mounted() -> FastMCP:
    outer = FastMCP("outer")
    outer.mount(FastMCP("inner"), namespace="inner")
    return outer


def _fastmcp_reading_headers() -> FastMCP:
    server = FastMCP("headers")

    @server.tool
    def whoami() -> str:
        from fastmcp.server.dependencies import get_http_headers

        return get_http_headers().get("x-user", "")

    return server


def _sdk_reading_the_request() -> MCPServer:
    server = MCPServer("request")

    @server.tool()
    async def agent(ctx: Context) -> str:
        request = ctx.request_context.request
        return str(getattr(request, "headers", {}).get("user-agent"))

    return server


def _fastmcp_with_an_auth_provider() -> FastMCP:
    from fastmcp.server.auth.providers.jwt import StaticTokenVerifier

    return FastMCP("guarded", auth=StaticTokenVerifier(tokens={"t": {"client_id": "c"}}))


def _fastmcp_with_a_checked_tool() -> FastMCP:
    from fastmcp.utilities.authorization import require_scopes

    server = FastMCP("checked")

    @server.tool(auth=require_scopes("admin"))
    def purge() -> str:
        return "purged"

    return server


class _Verifier:
    async def verify_token(self, token: str) -> None:
        return None


def _sdk_with_auth() -> MCPServer:
    from mcp.server.auth.settings import AuthSettings

    settings = AuthSettings(
        issuer_url="https://auth.example.com",
        resource_server_url="https://mcp.example.com",
        required_scopes=["mcp"],
        validate_token_resource=True,
    )
    return MCPServer("guarded", auth=settings, token_verifier=_Verifier())  # type: ignore[arg-type]


class _Stamp:
    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)


def _sdk_with_middleware() -> MCPServer:
    return MCPServer("mw", middleware=[_Stamp()])


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_fastmcp_with_an_auth_provider, "FastMCP server uses an auth provider (FastMCP(auth="),
        (_fastmcp_with_a_checked_tool, "FastMCP server uses an auth check on tool 'purge'"),
        (_sdk_with_auth, "MCPServer server uses auth settings"),
        (_sdk_with_middleware, "MCPServer server uses middleware (_Stamp)"),
        (_fastmcp_reading_headers, "FastMCP server uses the HTTP request in tool 'whoami'"),
        (_sdk_reading_the_request, "MCPServer server uses the raw request in tool 'agent'"),
        (lambda: _fastmcp(lifespan=pool), "FastMCP server uses a lifespan (FastMCP(lifespan=...))"),
        (lambda: _fastmcp(middleware=[Audit()]), "FastMCP server uses middleware (Audit)"),
        (_mounted, "FastMCP server uses a mounted server or another provider"),
        (lambda: MCPServer("s", lifespan=pool), "MCPServer server uses a lifespan"),
    ],
    ids=[
        "fastmcp-auth-provider",
        "fastmcp-auth-check",
        "sdk-auth",
        "sdk-middleware",
        "fastmcp-http-request",
        "sdk-raw-request",
        "fastmcp-lifespan",
        "fastmcp-middleware",
        "fastmcp-mount",
        "sdk-lifespan",
    ],
)
def test_what_cannot_carry_over_is_one_line_naming_it(make: Any, says: str) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        bring(make(), "shop.server:mcp")
    line = str(refused.value)
    assert line.startswith(f"shop.server:mcp: this {says}"), line
    assert "\n" not in line


def test_a_template_mcpq_cannot_match_is_refused() -> None:
    server = FastMCP("templates")

    @server.resource("files://{path*}")
    def read(path: str) -> str:
        return path

    with pytest.raises(ToolDefinitionError, match="one path segment each"):
        bring(server, "m:server")


def test_importing_a_module_with_an_sdk_server_leaves_the_root_logger_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``MCPServer()`` calls ``logging.basicConfig`` (a rich console handler): mcpq's logs keep
    their own format."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    sys.modules.pop("tests.brought.sdk_shop", None)
    registry = Registry.from_modules(["tests.brought.sdk_shop:mcp"])
    assert "book_table" in registry.tools
    assert root.handlers == []


def test_a_deployment_that_brings_neither_imports_neither() -> None:
    code = (
        "import sys; from mcpq.shared.registry import Registry; "
        "Registry.from_modules(['mcpq.demo']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'fastmcp', 'mcp'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_mcpq_failure_inside_what_their_server_raised_is_taken_back_out() -> None:
    """The SDK wraps whatever a tool raises; the store being unavailable must still reach the
    worker as itself (the run is retried, not failed as the tool's crash)."""
    from mcp.server.mcpserver.exceptions import UnexpectedToolError

    from mcpq.shared.brought.common import raise_ours
    from mcpq.shared.errors import StoreUnavailable

    try:
        try:
            raise StoreUnavailable()
        except StoreUnavailable as cause:
            raise UnexpectedToolError("Error executing tool refund") from cause
    except UnexpectedToolError as wrapped:
        with pytest.raises(StoreUnavailable):
            raise_ours(wrapped)
    raise_ours(ValueError("the tool's own"))  # nothing of mcpq's inside: nothing raised


class FakeRun:
    """What a brought tool's context reaches of the mcpq run: the calls, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def sample(self, messages: Any, max_tokens: int, **params: Any) -> dict[str, Any]:
        self.calls.append(("sample", (messages, max_tokens, params)))
        return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}

    async def elicit_url(self, message: str, url: str, elicitation_id: str) -> dict[str, Any]:
        self.calls.append(("elicit_url", (message, url, elicitation_id)))
        return {"action": "accept"}


def test_an_sdk_tool_s_sampling_and_url_questions_go_to_the_run() -> None:
    server = MCPServer("asks")

    @server.tool()
    async def capital(country: str, ctx: Context) -> str:
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=f"Capital of {country}?")
        )
        answer = await ctx.session.create_message([message], max_tokens=20, temperature=0.1)
        linked = await ctx.elicit_url("Sign in", "https://example.com/login", "login-1")
        assert isinstance(answer.content, types.TextContent)
        return f"{answer.content.text}/{linked.action}"

    brought = bring(server, "m:server")
    assert brought is not None
    run = FakeRun()
    result = anyio.run(brought.tools[0].call, run, {"country": "France"})
    assert result["content"] == [{"type": "text", "text": "Paris/accept"}]
    (sampled, linked) = run.calls
    messages, max_tokens, params = sampled[1]
    assert messages[0]["content"]["text"] == "Capital of France?" and max_tokens == 20
    assert params == {"temperature": 0.1}
    assert linked == ("elicit_url", ("Sign in", "https://example.com/login", "login-1"))


def test_a_brought_tool_reads_its_own_server_s_resource() -> None:
    """``ctx.read_resource`` in a worker: the server's own resource, read in the process."""
    fast = FastMCP("reads")

    @fast.resource("notes://today")
    def today() -> str:
        return "ship it"

    @fast.tool
    async def fast_read(ctx: FastContext) -> str:
        result = await ctx.read_resource("notes://today")
        return str(result.contents[0].content)

    sdk = MCPServer("reads")

    @sdk.resource("notes://today")
    def sdk_today() -> str:
        return "ship it"

    @sdk.tool()
    async def sdk_read(ctx: Context) -> str:
        (item,) = await ctx.read_resource("notes://today")
        return str(item.content)

    for server in (fast, sdk):
        brought = bring(server, "m:server")
        assert brought is not None
        (tool,) = brought.tools
        result = anyio.run(tool.call, FakeRun(), {})
        assert result["content"] == [{"type": "text", "text": "ship it"}], tool.name
