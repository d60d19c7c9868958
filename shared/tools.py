"""The tool registry and the ``@tool`` decorator.

A tool is a function (``def`` or ``async def``) whose parameters are its arguments, plus, if it
wants one, a context (``ToolContext``, ``mcpq.shared.tool_context``) found by its annotation
(``mcpq.shared.tool_signature``). pydantic builds the input schema and validates arguments from
the signature. Tool modules import only ``mcpq``, so the web tier (which lists and validates)
and the workers (which run) can both import them. Modules are named by ``MCPQ_TOOLS``.

Example::

    from mcpq import ToolContext, tool

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    @tool(task="optional", description="Add slowly")
    def slow_add(ctx: ToolContext, a: int, b: int) -> str:
        ctx.report("adding")
        ctx.sleep(2)
        return str(a + b)

A mistake in a declaration is refused when its module is imported, in one line that names the
fix (:class:`ToolDefinitionError`); a module that does not import at all is one line too
(:class:`ToolModuleError`).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar, Unpack, overload

import pydantic

from mcpq.shared.input_schema import InputSchema, InputSchemaError
from mcpq.shared.resources import Resource, ResourceTemplate
from mcpq.shared.tool_context import (
    Answer,
    Answers,
    Done,
    InputRequest,
    ToolContext,
    elicitation,
    missing_capabilities,
    sampling,
    step_key,
)
from mcpq.shared.tool_signature import (
    ToolDefinitionError,
    check_decorated,
    param_headers,
    read_signature,
    refuse,
)

Served = Resource | ResourceTemplate

__all__ = [
    "Answer",
    "Answers",
    "ArgumentsInvalid",
    "Done",
    "InputRequest",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "elicitation",
    "missing_capabilities",
    "sampling",
    "step_key",
    "tool",
]

log = logging.getLogger("mcpq.tools")
TaskMode = Literal["never", "optional", "required"]
#: ``ask_first``: the questions a tool asks before it runs, from its arguments (and, when it
#: takes a second parameter, the client's declared capabilities: a question the client cannot
#: answer may be left out, or asked another way).
Prelude = (
    Callable[[dict[str, Any]], dict[str, InputRequest]]
    | Callable[[dict[str, Any], dict[str, Any]], dict[str, InputRequest]]
)
F = TypeVar("F", bound=Callable[..., Any])
_UNSET: Any = object()


class ArgumentsInvalid(ValueError):
    """The arguments do not match the tool's input schema."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    fn: Callable[..., Any]
    mode: TaskMode
    queue: str | None
    ttl_ms: int | Any | None
    poll_interval_ms: int | None
    args_model: type[pydantic.BaseModel]
    ask_first: Prelude | None = None
    max_run_s: float | None = None
    """How long one run may execute the tool's own code without calling its context before it
    is stopped and the task fails; ``None``: ``MCPQ_MAX_RUN_S``; ``0``: no limit."""
    scopes: tuple[str, ...] = ()
    """OAuth scopes (or API key scopes) a caller needs to call the tool (403 otherwise)."""
    context: str | None = None
    """The parameter the context is passed as, by keyword (``mcpq.shared.tool_signature``);
    ``None``: the tool takes no context, and every parameter is an argument."""
    param_headers: dict[str, str] = field(default_factory=dict)
    """Arguments mirrored in ``Mcp-Param-<name>`` headers (SEP-2243 ``x-mcp-header``)."""
    declared_schema: InputSchema | None = None
    """The tool's own ``input_schema`` (``mcpq.shared.input_schema``); ``None``: the
    signature's."""

    @property
    def is_async(self) -> bool:
        """An ``async def`` tool: it gets a context whose waits run off its event loop."""
        return inspect.iscoroutinefunction(self.fn)

    def ttl(self, default_ttl_ms: int | None) -> int | None:
        """The tasks' ``ttlMs``: the tool's own, else the default (``None``: unlimited)."""
        return default_ttl_ms if self.ttl_ms is _UNSET else self.ttl_ms

    def run_limit_s(self, default_s: float) -> float:
        """The effective ``max_run_s`` (0 = no limit)."""
        return default_s if self.max_run_s is None else self.max_run_s

    @property
    def input_schema(self) -> dict[str, Any]:
        if self.declared_schema is not None:
            return self.declared_schema.advertised
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def listing(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # A declared schema first (it may say what the types cannot: allOf, if/then/else),
        # then the signature's types, which convert the values the function gets.
        problem = self.declared_schema.problem(arguments) if self.declared_schema else None
        if problem is not None:
            raise ArgumentsInvalid(f"Invalid arguments for tool {self.name}: {problem}")
        try:
            model = self.args_model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ArgumentsInvalid(f"Invalid arguments for tool {self.name}: {problems}") from None
        return model.model_dump(mode="json")

    def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        values = self.args_model.model_validate(arguments).__dict__
        if self.context is None:
            return self.fn(**values)
        return self.fn(**values, **{self.context: ctx})


_MARK = "__mcpq_tool__"
#: Set on an :class:`mcpq.shared.app.App` (which this module cannot import: it imports this one).
APP_MARK = "__mcpq_app__"


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def first_questions(
    ask_first: Prelude, arguments: dict[str, Any], capabilities: dict[str, Any]
) -> dict[str, InputRequest]:
    """Call ``ask_first`` with the arguments, and the client's capabilities if it takes them."""
    try:
        takes = len(inspect.signature(ask_first).parameters)
    except (TypeError, ValueError):
        takes = 1
    if takes >= 2:
        return ask_first(arguments, capabilities)  # type: ignore[call-arg]
    return ask_first(arguments)  # type: ignore[call-arg]


class ToolOptions(TypedDict, total=False):
    """What ``@tool(...)`` and ``@app.tool(...)`` take besides the name (see :func:`tool`)."""

    description: str | None
    #: ``never``, ``optional`` or ``required``; ``True``/``False`` as FastMCP has it
    #: (``optional``/``never``).
    task: TaskMode | bool
    queue: str | None
    ttl_ms: int | None  # absent: the server's MCPQ_DEFAULT_TTL_MS; None: unlimited
    poll_interval_ms: int | None
    ask_first: Prelude | None
    max_run_s: float | None
    scopes: Iterable[str]
    #: The arguments' JSON Schema (2020-12) as written, instead of the one built from the
    #: signature; arguments are checked against both (``mcpq.shared.input_schema``).
    input_schema: dict[str, Any] | None


# `@tool` bare, `@tool()` and `@tool(task="required")` alike (as in the MCP Python SDK): the
# first positional argument is the function when the decorator is not called first.
@overload
def tool(name: F, /) -> F: ...
@overload
def tool(name: str | None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...
def tool(name: Any = None, **options: Unpack[ToolOptions]) -> Any:
    """Declare a function an MCP tool. It is served where its module is loaded into a
    :class:`Registry` (``MCPQ_TOOLS``); declaring registers nothing by itself."""
    if name is not None and not isinstance(name, str):  # bare `@tool`: name is the function
        return tool()(name)
    unknown = set(options) - set(ToolOptions.__annotations__)
    if unknown:
        raise TypeError(f"@tool got unknown option(s) {', '.join(sorted(unknown))}")
    description = options.get("description")
    queue, max_run_s = options.get("queue"), options.get("max_run_s")
    ttl_ms: Any = options.get("ttl_ms", _UNSET)
    poll_interval_ms, ask_first = options.get("poll_interval_ms"), options.get("ask_first")
    scopes = options.get("scopes", ())

    def mark(fn: F) -> F:
        check_decorated(fn, name)
        tool_name = name or fn.__name__
        # The tool name is the Celery task name: Celery's own and ours must stay unshadowed.
        if tool_name.startswith(("celery.", "mcpq.")):
            raise refuse(
                fn,
                f"reserved tool name: {tool_name} (celery.* and mcpq.* are Celery's and mcpq's): "
                "choose another name",
            )
        if max_run_s is not None and not max_run_s >= 0:
            raise refuse(fn, f"{tool_name}: max_run_s must be 0 (no limit) or more seconds")
        # A task whose TTL is 0 or less would expire the moment it is created.
        if ttl_ms is not _UNSET and ttl_ms is not None and not _positive_int(ttl_ms):
            raise refuse(
                fn,
                f"{tool_name}: ttl_ms must be a positive number of milliseconds, "
                f"or None (unlimited), not {ttl_ms!r}",
            )
        task = _task_mode(fn, tool_name, options.get("task", "optional"))
        signature = read_signature(tool_name, fn)
        spec = Tool(
            tool_name,
            description or inspect.getdoc(fn) or tool_name,
            fn,
            task,
            queue,
            ttl_ms,
            poll_interval_ms,
            signature.args_model,
            ask_first,
            max_run_s,
            tuple(scopes),
            signature.context,
        )
        if options.get("input_schema") is not None:
            spec = _with_schema(fn, spec, options["input_schema"])
        headers = param_headers(tool_name, fn, spec.input_schema)
        if headers:
            spec = dataclasses.replace(spec, param_headers=headers)
        setattr(fn, _MARK, spec)
        return fn

    return mark


def _with_schema(fn: Callable[..., Any], spec: Tool, schema: Any) -> Tool:
    try:
        declared = InputSchema(schema, set(spec.args_model.model_fields))
    except InputSchemaError as exc:
        raise refuse(fn, f"{spec.name}: {exc}") from None
    return dataclasses.replace(spec, declared_schema=declared)


def _task_mode(fn: Callable[..., Any], tool_name: str, task: object) -> TaskMode:
    if task is True:  # FastMCP's task=True: the client may run it as a task
        return "optional"
    if task is False:
        return "never"
    if task == "never" or task == "optional" or task == "required":
        return task
    raise refuse(
        fn,
        f"{tool_name}: task must be 'never', 'optional' or 'required' (or True/False), "
        f"not {task!r}",
    )
