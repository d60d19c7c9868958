"""What a brought server's tools, resources and prompts share, whichever package wrote them.

- :class:`BroughtTool`: a :class:`~mcpq.shared.tools.Tool` whose listing is the server's own
  (name, title, description, input and output schemas, annotations) and whose call runs the
  server's own code path on an mcpq worker, with a context that answers through mcpq
  (``mcpq.shared.brought.fastmcp_server``, ``mcpq.shared.brought.sdk_server``).
- :func:`current_run` / :func:`step`: the running tool's mcpq context, found from a context
  variable, so ``from mcpq import step`` works inside a tool that was not written for mcpq.
- :func:`run_coroutine`: their declarations are listed by coroutines; a registry is built
  where no loop may run, or inside one (a web process starting), so each runs on a thread of
  its own.
- :func:`mcpq_failure`: their servers wrap what a tool raises; an mcpq failure that must reach
  the worker as itself (the store being unavailable) is taken back out.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic

from mcpq.shared.errors import McpError
from mcpq.shared.tool_context import ToolContext
from mcpq.shared.tool_signature import param_headers
from mcpq.shared.tools import _UNSET, Tool

T = TypeVar("T")
JsonObject = dict[str, Any]

_RUN: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar("mcpq_run", default=None)


class _AnyArguments(pydantic.BaseModel):
    """A brought tool's arguments are checked by its own server (its schema, its types)."""

    model_config = pydantic.ConfigDict(extra="allow")


@dataclass(frozen=True)
class BroughtTool(Tool):
    """A tool of a FastMCP or SDK server, served as it lists itself and run by its own code."""

    their_listing: JsonObject | None = None

    @property
    def input_schema(self) -> JsonObject:
        assert self.their_listing is not None
        schema: JsonObject = self.their_listing["inputSchema"]
        return schema

    def listing(self) -> JsonObject:
        assert self.their_listing is not None
        return dict(self.their_listing)

    def validate(self, arguments: JsonObject) -> JsonObject:
        # Their server validates when the tool runs (on the worker), as it would itself: a
        # failure is a tool error the model reads, the same as ours.
        return dict(arguments)

    def call(self, ctx: ToolContext, arguments: JsonObject) -> Any:
        return self.fn(ctx, arguments)


def brought_tool(
    listing: JsonObject,
    run: Callable[[ToolContext, JsonObject], Awaitable[Any]],
    mode: Any,
    module: str | None = None,
) -> BroughtTool:
    """``run(ctx, arguments)`` is the tool's whole call, around which :func:`current_run` is set;
    ``module``: where the tool's function was written (what ``mcpq tools`` shows)."""

    async def call(ctx: ToolContext, arguments: JsonObject) -> Any:
        token = _RUN.set(ctx)
        try:
            return await run(ctx, arguments)
        finally:
            _RUN.reset(token)

    call.__name__ = call.__qualname__ = str(listing["name"])
    if module:
        call.__module__ = module
    headers = param_headers(str(listing["name"]), call, listing["inputSchema"])
    return BroughtTool(
        name=str(listing["name"]),
        description=str(listing.get("description") or listing["name"]),
        fn=call,
        mode=mode,
        queue=None,
        ttl_ms=_UNSET,
        poll_interval_ms=None,
        args_model=_AnyArguments,
        context="ctx",
        param_headers=headers,
        their_listing=listing,
    )


#: How a tool reads the HTTP request it was called with, in FastMCP and in the SDK.
_HTTP_REQUEST = re.compile(
    r"\b(get_http_request|get_http_headers|CurrentRequest|CurrentHeaders)\s*\(|"
    r"\.request_context\s*\.\s*request\b"
)


def reads_http_request(fn: Callable[..., Any] | None) -> str | None:
    """What in ``fn``'s source reads the HTTP request (``None``: nothing, or no source). A tool
    runs on a worker, where there is no HTTP request: such a tool cannot carry over."""
    if fn is None:
        return None
    try:
        source = inspect.getsource(inspect.unwrap(fn))
    except (OSError, TypeError):
        return None
    found = _HTTP_REQUEST.search(source)
    return None if found is None else found.group(0).strip(" (")


def current_run() -> ToolContext:
    """The mcpq context of the tool running in this task (a brought tool's, or one of ours)."""
    ctx = _RUN.get()
    if ctx is None:
        raise RuntimeError(
            "mcpq.step() and mcpq.step_key() run inside a brought FastMCP or SDK tool that "
            "mcpq serves; in a tool written for mcpq, call ctx.step() and ctx.step_key()"
        )
    return ctx


def step(name: str, fn: Callable[[], Any]) -> Any:
    """``ctx.step(name, fn)`` of the running tool: ``fn`` (sync or async) runs once per task and
    its JSON result is kept; a replay (after a park or a lost worker) gets the kept result
    instead of running it again. In an ``async def`` tool, ``await step(...)``; in a sync one
    (no running loop in its thread) it returns the value."""
    ctx = current_run()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return ctx.step(name, fn)
    return _awaited_step(ctx, name, fn)


def step_key(name: str) -> str:
    """``ctx.step_key(name)`` of the running tool: the same in every run of its task, another
    for every other task and step; an outside system's idempotency key for step ``name``."""
    return current_run().step_key(name)


async def _awaited_step(ctx: ToolContext, name: str, fn: Callable[[], Any]) -> Any:
    result = ctx.step(name, fn)
    return await result if inspect.isawaitable(result) else result


def run_coroutine(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end on a thread of its own (its own event loop)."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=main, name="mcpq-bring", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def raise_ours(exc: BaseException) -> None:
    """Raise the mcpq failure inside ``exc`` (:func:`mcpq_failure`), if there is one."""
    ours = mcpq_failure(exc)
    if ours is not None:
        raise ours from None


def mcpq_failure(exc: BaseException) -> BaseException | None:
    """An mcpq failure inside what their server raised (its ``__cause__`` chain), if any: the
    store unavailable, a task gone. Those are the worker's to handle, not a tool error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, McpError):
            return current
        current = current.__cause__ or current.__context__
    return None


def dump(model: Any) -> Any:
    """A pydantic model of theirs (``mcp_types``) as the wire has it."""
    if isinstance(model, pydantic.BaseModel):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return pydantic.TypeAdapter(Any).dump_python(model, mode="json", by_alias=True)
