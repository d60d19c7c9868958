"""A FastMCP 4.1 server (``fastmcp.FastMCP``) served by mcpq, unchanged.

- **Tools** are listed as FastMCP lists them (``Tool.to_mcp_tool``) and run by FastMCP's own
  ``Tool.run`` on an mcpq worker: its argument validation, dependency injection and result
  conversion. The ``Context`` a tool gets is :class:`DurableContext`, FastMCP's own class with
  the calls that reach the client answered through mcpq: ``elicit`` asks a durable question
  (asked once per task, answered by ``tasks/update`` or the call's stream, replayed from the
  store), ``report_progress`` and the log methods report through the run.
- **``task=``** maps as FastMCP has it: ``forbidden`` (FastMCP's default) → ``never`` (a
  synchronous call, still run durably on a worker), ``optional``, ``required``.
- **Resources, templates and prompts** are read and rendered by the server's own
  ``read_resource`` and ``render_prompt`` on the web's user-code threads, as ours are.
- **Refused in one line at import** (:func:`refusals`): a lifespan (it would hold connections
  in one process while the tools run in others), middleware of the user's (it wraps a request
  mcpq does not make), FastMCP's own auth (a provider, a component's check: served without it,
  what it guards would be open), a tool that reads the HTTP request (a worker has none),
  mounted servers and other providers, templates whose variables are not one path segment.
"""

from __future__ import annotations

import re
from typing import Any, cast

import pydantic

from mcpq.shared.brought.common import (
    BroughtTool,
    JsonObject,
    brought_tool,
    dump,
    raise_ours,
    reads_http_request,
    run_coroutine,
)
from mcpq.shared.errors import ToolError
from mcpq.shared.prompts import Prompt
from mcpq.shared.resources import Resource, ResourceTemplate, template_for
from mcpq.shared.tool_context import LOG_LEVELS, LogLevel, ToolContext
from mcpq.shared.tools import TaskMode

_MODES: dict[str, TaskMode] = {"forbidden": "never", "optional": "optional", "required": "required"}
_HTTP_LINE = (
    "the HTTP request in tool {tool!r} ({reads}): a tool runs on a worker, where there is "
    "none; take what it needs as an argument"
)
# Refused, not dropped: serving these without their checks would open what they protect.
_AUTH_LINE = (
    "an auth provider (FastMCP(auth=...)): mcpq authenticates callers itself; set MCPQ_AUTH "
    "(oauth or apikey) and drop auth= here"
)
_CHECK_LINE = (
    "an auth check on {what} (auth=...): mcpq checks scopes itself; declare them in "
    "MCPQ_OAUTH_SCOPES or on an mcpq tool (scopes=...)"
)
_SEGMENT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def refusals(server: Any) -> list[str]:
    """What this server uses that cannot carry over, one line each (empty: it can be served)."""
    from fastmcp.server.server import default_lifespan

    found = []
    if server._lifespan is not default_lifespan:
        found.append(
            "a lifespan (FastMCP(lifespan=...)): its connections would live in one process "
            "while the tools run on workers; open them in the tool, or at module import"
        )
    theirs = [m for m in server.middleware if not type(m).__module__.startswith("fastmcp.")]
    if theirs:
        names = ", ".join(sorted({type(m).__name__ for m in theirs}))
        found.append(
            f"middleware ({names}): it wraps a request of FastMCP's transport, which mcpq "
            "does not use; move its checks into the tools, or into mcpq's own (scopes=...)"
        )
    if server.auth is not None:
        found.append(_AUTH_LINE)
    for tool in run_coroutine(lambda: server.list_tools(run_middleware=False)):
        if reads := reads_http_request(getattr(tool, "fn", None)):
            found.append(_HTTP_LINE.format(tool=tool.name, reads=reads))
    found += [_CHECK_LINE.format(what=what) for what in _checked(server)]
    others = [p for p in server.providers if p is not server._local_provider]
    if others:
        found.append(
            "a mounted server or another provider (mount()/add_provider()): bring each "
            "server on its own, MCPQ_TOOLS=module:server for each"
        )
    return found


def _checked(server: Any) -> list[str]:
    """The tools, resources, templates and prompts that carry FastMCP auth checks. Read from
    the server's own components: a listing hides them from a caller with no token."""
    from fastmcp.prompts import Prompt as TheirPrompt
    from fastmcp.resources import Resource as TheirResource
    from fastmcp.resources import ResourceTemplate as TheirTemplate

    def what(c: Any) -> str:
        if isinstance(c, TheirTemplate):
            return f"template {c.uri_template!r}"
        if isinstance(c, TheirResource):
            return f"resource {str(c.uri)!r}"
        return f"{'prompt' if isinstance(c, TheirPrompt) else 'tool'} {c.name!r}"

    components = server._local_provider._components.values()
    return [what(c) for c in components if getattr(c, "auth", None)]


def tools(server: Any) -> list[BroughtTool]:
    listed = run_coroutine(lambda: server.list_tools(run_middleware=False))
    out = []
    for tool in listed:
        listing = dump(tool.to_mcp_tool())
        listing.pop("execution", None)  # mcpq says it itself, per wire (frontend/methods/tools)
        mode = _MODES.get(getattr(tool.task_config, "mode", "forbidden"), "never")
        module = getattr(getattr(tool, "fn", None), "__module__", None)
        out.append(brought_tool(listing, _runner(server, str(tool.name)), mode, module))
    return out


def _runner(server: Any, name: str) -> Any:
    async def run(ctx: ToolContext, arguments: JsonObject) -> Any:
        from fastmcp.exceptions import ToolError as TheirToolError

        tool = await server.get_tool(name)
        try:
            async with DurableContext.make(server, ctx):
                result = await tool.run(arguments)
        except pydantic.ValidationError as exc:  # the arguments: the model may correct them
            raise ToolError(f"Error calling tool {name!r}: {_problems(exc)}") from None
        except TheirToolError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:
            raise_ours(exc)
            raise
        return _result(result)

    return run


def _problems(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )


def _result(result: Any) -> JsonObject:
    """FastMCP's ``ToolResult`` as a ``CallToolResult`` object (a dict with ``content``)."""
    out: JsonObject = {"content": [dump(block) for block in result.content]}
    if result.structured_content is not None:
        out["structuredContent"] = dump(result.structured_content)
    if getattr(result, "is_error", False):
        out["isError"] = True
    return out


class DurableContext:
    """Builds FastMCP's ``Context`` subclass once per process (FastMCP is imported only when a
    FastMCP server is brought)."""

    _cls: Any = None

    @classmethod
    def make(cls, server: Any, run: ToolContext) -> Any:
        if cls._cls is None:
            cls._cls = _context_class()
        return cls._cls(server, run)


def _context_class() -> Any:
    from fastmcp.server.context import Context, LogData
    from fastmcp.server.elicitation import (
        CancelledElicitation,
        DeclinedElicitation,
        handle_elicit_accept,
        parse_elicit_response_type,
    )

    class MCPQContext(Context):
        """FastMCP's ``Context``, answering through the mcpq run it belongs to."""

        def __init__(self, fastmcp: Any, run: ToolContext) -> None:
            super().__init__(fastmcp)
            self._mcpq = run

        @property
        def is_background_task(self) -> bool:
            return False  # FastMCP's own task path (Docket) is not used: mcpq runs the task

        async def elicit(
            self,
            message: str,
            response_type: Any = None,
            *,
            response_title: str | None = None,
            response_description: str | None = None,
        ) -> Any:
            config = parse_elicit_response_type(
                response_type,
                response_title=response_title,
                response_description=response_description,
            )
            answer = await self._mcpq.elicit(message, config.schema)
            action = answer.get("action")
            if action == "accept":
                return handle_elicit_accept(config, answer.get("content"))
            return DeclinedElicitation() if action == "decline" else CancelledElicitation()

        async def report_progress(
            self, progress: float, total: float | None = None, message: str | None = None
        ) -> None:
            await self._mcpq.report_progress(progress, total, message)

        async def log(
            self,
            message: str,
            level: Any = None,
            logger_name: str | None = None,
            extra: Any = None,
        ) -> None:
            # What FastMCP sends as the message's data: its LogData, as JSON.
            data = dump(LogData(msg=message, extra=extra))
            await self._mcpq.log(_level(level), data, logger_name=logger_name)

    return MCPQContext


def _level(level: Any) -> LogLevel:
    return cast(LogLevel, level) if level in LOG_LEVELS else "info"


def resources(server: Any) -> list[Resource | ResourceTemplate]:
    out: list[Resource | ResourceTemplate] = []
    for resource in run_coroutine(lambda: server.list_resources(run_middleware=False)):
        listing = dump(resource.to_mcp_resource())
        uri = str(listing["uri"])
        out.append(
            Resource(
                uri,
                str(listing.get("name") or uri),
                _reader(server, uri),
                listing.get("title"),
                listing.get("description"),
                listing.get("mimeType"),
            )
        )
    for template in run_coroutine(lambda: server.list_resource_templates(run_middleware=False)):
        listing = dump(template.to_mcp_template())
        out.append(template_for(listing, _template_reader(server, listing["uriTemplate"])))
    return out


def _reader(server: Any, uri: str) -> Any:
    async def read() -> list[Any]:
        return _contents(uri, await server.read_resource(uri, run_middleware=False))

    return read


def _template_reader(server: Any, uri_template: str) -> Any:
    async def read(**values: str) -> list[Any]:
        uri = _SEGMENT.sub(lambda m: values[m.group(1)], uri_template)
        return _contents(uri, await server.read_resource(uri, run_middleware=False))

    return read


def _contents(uri: str, result: Any) -> list[Any]:
    from mcpq.shared.content import EmbeddedResource

    out = []
    for item in result.contents:
        raw = dump(item.to_mcp_resource_contents(uri))
        if "blob" in raw:
            out.append(EmbeddedResource(uri, blob=item.content, mime_type=raw.get("mimeType")))
        else:
            out.append(EmbeddedResource(uri, text=raw["text"], mime_type=raw.get("mimeType")))
    return out


def prompts(server: Any) -> list[Prompt]:
    from mcpq.shared.prompts import prompt_for

    out = []
    for prompt in run_coroutine(lambda: server.list_prompts(run_middleware=False)):
        listing = dump(prompt.to_mcp_prompt())
        out.append(prompt_for(listing, _renderer(server, str(listing["name"]))))
    return out


def _renderer(server: Any, name: str) -> Any:
    async def render(**arguments: Any) -> list[Any]:
        given = {k: v for k, v in arguments.items() if v is not None}
        rendered = await server.render_prompt(name, given, run_middleware=False)
        return [dump(m) for m in rendered.to_mcp_prompt_result().messages]

    return render
