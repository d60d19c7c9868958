"""An ``mcp`` 2.3 ``MCPServer`` (``mcp.server.mcpserver.MCPServer``) served by mcpq, unchanged.

- **Tools** are listed by the server's own ``list_tools`` and run by its own ``call_tool`` on
  an mcpq worker (its validation, its ``Context`` injection, its result conversion, its
  ``isError`` for a ``ToolError``). The tool's ``Context`` is the SDK's own, whose session is
  :class:`DurableSession`: the calls that reach the client (``ctx.elicit``,
  ``ctx.report_progress``, ``ctx.info`` and the other levels, ``ctx.session.create_message``)
  are answered through the mcpq run, durably. ``ctx.read_resource`` reads the server's own
  resources in the worker.
- **Task mode:** the SDK has none; a brought tool is ``optional`` (a task when the client asks
  for one, else a synchronous call, run as durably).
- **Resources, templates and prompts** are read and rendered by the server's own
  ``read_resource`` and ``get_prompt`` on the web's user-code threads.
- **Refused in one line at import:** a lifespan (``MCPServer(lifespan=...)``), auth settings
  (mcpq authenticates callers itself), middleware of the user's, a tool that reads the raw
  request (``ctx.request_context.request``: a worker has none), and templates whose variables
  are not one path segment each.
"""

from __future__ import annotations

import re
from typing import Any

from mcpq.shared.brought.common import (
    BroughtTool,
    JsonObject,
    brought_tool,
    dump,
    raise_ours,
    reads_http_request,
    run_coroutine,
)
from mcpq.shared.content import EmbeddedResource
from mcpq.shared.prompts import Prompt, prompt_for
from mcpq.shared.resources import Resource, ResourceTemplate, template_for
from mcpq.shared.tool_context import LOG_LEVELS, LogLevel, ToolContext

_SEGMENT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
MODERN = "2026-07-28"


def refusals(server: Any) -> list[str]:
    found = []
    if server.settings.lifespan is not None:
        found.append(
            "a lifespan (MCPServer(lifespan=...)): its connections would live in one process "
            "while the tools run on workers; open them in the tool, or at module import"
        )
    if server.settings.auth is not None:
        found.append(
            "auth settings (MCPServer(auth=..., token_verifier=...)): mcpq authenticates "
            "callers itself; set MCPQ_AUTH (oauth or apikey) and drop them here"
        )
    theirs = [
        m for m in server._lowlevel_server.middleware if not type(m).__module__.startswith("mcp.")
    ]
    if theirs:
        names = ", ".join(sorted({type(m).__name__ for m in theirs}))
        found.append(
            f"middleware ({names}): it wraps a request of the SDK's own server, which mcpq "
            "does not use; move its checks into the tools, or into mcpq's own (MCPQ_AUTH, scopes)"
        )
    for tool in server._tool_manager.list_tools():
        if reads := reads_http_request(tool.fn):
            found.append(
                f"the raw request in tool {tool.name!r} ({reads}): a tool runs on a worker, "
                "where there is no HTTP request; take what it needs as an argument"
            )
    return found


def tools(server: Any) -> list[BroughtTool]:
    out = []
    for tool in run_coroutine(server.list_tools):
        name = str(tool.name)
        own = server._tool_manager.get_tool(name)  # its function: where it was written
        module = getattr(getattr(own, "fn", None), "__module__", None)
        out.append(brought_tool(dump(tool), _runner(server, name), "optional", module))
    return out


def _context(server: Any, run: ToolContext | None, method: str) -> Any:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import Context

    request: Any = ServerRequestContext(
        session=DurableSession.make(run),
        lifespan_context={},
        protocol_version=MODERN,
        method=method,
        request_id=f"mcpq-{method}",
    )
    return Context(request_context=request, mcp_server=server)


def _runner(server: Any, name: str) -> Any:
    async def run(ctx: ToolContext, arguments: JsonObject) -> Any:
        from mcp.server.mcpserver.exceptions import ToolError as TheirToolError

        try:
            result = await server.call_tool(name, arguments, _context(server, ctx, "tools/call"))
        except TheirToolError as exc:
            raise_ours(exc)
            # As the SDK's own server answers it: the text as a tool error.
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        except Exception as exc:
            raise_ours(exc)
            raise
        return dump(result)

    return run


class DurableSession:
    """The part of the SDK's ``ServerSession`` a tool's ``Context`` uses, answered by the mcpq
    run (built once per process: the SDK is imported only when an SDK server is brought)."""

    _cls: Any = None

    @classmethod
    def make(cls, run: ToolContext | None) -> Any:
        if cls._cls is None:
            cls._cls = _session_class()
        return cls._cls(run)


def _session_class() -> Any:
    import mcp_types as types

    class Session:
        def __init__(self, run: ToolContext | None) -> None:
            self._run = run

        @property
        def run(self) -> ToolContext:
            if self._run is None:
                raise RuntimeError(
                    "a resource or a prompt runs on the web tier: it cannot ask the client "
                    "anything or report progress"
                )
            return self._run

        async def elicit_form(
            self, message: str, requested_schema: Any, related_request_id: Any = None
        ) -> Any:
            answer = await self.run.elicit(message, dump(requested_schema))
            return types.ElicitResult.model_validate(answer)

        async def elicit_url(
            self, message: str, url: str, elicitation_id: str, related_request_id: Any = None
        ) -> Any:
            answer = await self.run.elicit_url(message, url, elicitation_id)
            return types.ElicitResult.model_validate(answer)

        async def report_progress(
            self, progress: float, total: float | None = None, message: str | None = None
        ) -> None:
            await self.run.report_progress(progress, total, message)

        async def send_log_message(
            self, level: str, data: Any, logger: str | None = None, related_request_id: Any = None
        ) -> None:
            known: LogLevel = level if level in LOG_LEVELS else "info"
            await self.run.log(known, dump(data), logger_name=logger)

        async def create_message(
            self, messages: list[Any], *, max_tokens: int, **params: Any
        ) -> Any:
            params.pop("related_request_id", None)
            wire = {_camel(k): dump(v) for k, v in params.items() if v is not None}
            answer = await self.run.sample([dump(m) for m in messages], max_tokens, **wire)
            return types.CreateMessageResult.model_validate(answer)

    return Session


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def resources(server: Any) -> list[Resource | ResourceTemplate]:
    out: list[Resource | ResourceTemplate] = []
    for resource in run_coroutine(server.list_resources):
        listing = dump(resource)
        uri = str(listing["uri"])
        reader = _reader(server, lambda uri=uri: uri)
        name = str(listing.get("name") or uri)
        title, text, mime = (
            listing.get("title"),
            listing.get("description"),
            listing.get("mimeType"),
        )
        out.append(Resource(uri, name, reader, title, text, mime))
    for template in run_coroutine(server.list_resource_templates):
        listing = dump(template)
        pattern = str(listing["uriTemplate"])
        reader = _reader(server, lambda p=pattern, **v: _SEGMENT.sub(lambda m: v[m.group(1)], p))
        out.append(template_for(listing, reader))
    return out


def _reader(server: Any, uri_of: Any) -> Any:
    async def read(**values: str) -> list[Any]:
        uri = uri_of(**values)
        items = await server.read_resource(uri, _context(server, None, "resources/read"))
        out = []
        for item in items:
            if isinstance(item.content, bytes):
                out.append(EmbeddedResource(uri, blob=item.content, mime_type=item.mime_type))
            else:
                mime = item.mime_type or "text/plain"
                out.append(EmbeddedResource(uri, text=item.content, mime_type=mime))
        return out

    return read


def prompts(server: Any) -> list[Prompt]:
    out = []
    for prompt in run_coroutine(server.list_prompts):
        listing = dump(prompt)
        out.append(prompt_for(listing, _renderer(server, str(listing["name"]))))
    return out


def _renderer(server: Any, name: str) -> Any:
    async def render(**arguments: Any) -> list[Any]:
        given = {k: v for k, v in arguments.items() if v is not None}
        result = await server.get_prompt(name, given, _context(server, None, "prompts/get"))
        return [dump(m) for m in result.messages]

    return render
