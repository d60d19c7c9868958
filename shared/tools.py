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
import importlib
import inspect
import logging
import sysconfig
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, Unpack, overload

import pydantic

from mcpq.shared.prompts import PROMPT_MARK, Prompt
from mcpq.shared.resources import RESOURCE_MARK, Resource, ResourceTemplate
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
    where,
)

Served = Resource | ResourceTemplate

__all__ = [
    "Answer",
    "Answers",
    "ArgumentsInvalid",
    "Done",
    "InputRequest",
    "Registry",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolModuleError",
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
        headers = param_headers(tool_name, fn, spec.input_schema)
        if headers:
            spec = dataclasses.replace(spec, param_headers=headers)
        setattr(fn, _MARK, spec)
        return fn

    return mark


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


class ToolModuleError(Exception):
    """A tool module does not import (a syntax error, a failing import, an exception at its
    top level); ``str()`` is the one line to print, at the user's file and line."""


class Registry:
    """The tools one process serves, by name: an object the web app and the worker are given,
    not a global filled by imports."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        #: One line per module that declares no tool (logged; ``mcpq tools`` prints them).
        self.warnings: list[str] = []
        #: The name and instructions of the app the tools came from (``mcpq.shared.app``).
        self.server_name: str | None = None
        self.instructions: str | None = None
        #: Resources by URI, templates by URI template, prompts by name (``mcpq.shared.app``).
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        self.prompts: dict[str, Prompt] = {}
        for spec in tools:
            self.add(spec)

    @classmethod
    def from_modules(cls, modules: Iterable[str]) -> Registry:
        """Import the tool modules and collect their tools, in definition order: a module's
        ``@tool`` functions and the tools of the apps it holds, or, for ``module:attribute``,
        the tools of that one app.

        A module that cannot be found raises ``ModuleNotFoundError``; one that fails to import
        :class:`ToolModuleError`; a declaration mcpq refuses :class:`ToolDefinitionError`."""
        registry = cls()
        for entry in modules:
            module_name, _, attribute = entry.partition(":")
            module = _import(module_name)
            found = 0
            if attribute:
                app = getattr(module, attribute, None)
                if not getattr(app, APP_MARK, False):
                    raise ToolDefinitionError(
                        f"{entry}: module {module_name!r} has no App named {attribute!r}: "
                        f"name one (app = App(...)) or list the module alone"
                    )
                found += registry._add_app(app)
            for value in list(vars(module).values()):
                spec = getattr(value, _MARK, None)
                # A module may import another's tool: only its own definitions count here.
                if attribute:
                    continue
                own = getattr(value, "__module__", None) == entry
                if getattr(value, APP_MARK, False):
                    found += registry._add_app(value)
                elif isinstance(spec, Tool) and own:
                    registry.add(spec)
                    found += 1
                elif own and isinstance(
                    declared := getattr(value, RESOURCE_MARK, None), Resource | ResourceTemplate
                ):
                    registry.add_resource(declared)
                    found += 1
                elif own and isinstance(declared := getattr(value, PROMPT_MARK, None), Prompt):
                    registry.add_prompt(declared)
                    found += 1
            if not found:
                warning = (
                    f"module {entry!r} declares no tool, resource or prompt: mark its functions "
                    "with @tool (a tool imported from another module counts only there)"
                )
                log.warning(warning)
                registry.warnings.append(warning)
        return registry

    def _add_app(self, app: Any) -> int:
        """An app's tools, and its name and instructions (the first app's, if there are
        several); how many tools it has."""
        theirs: Registry = app.registry
        for spec in theirs.tools.values():
            self.add(spec)
        for resource in theirs.resources.values():
            self.add_resource(resource)
        for template in theirs.templates.values():
            self.add_resource(template)
        for prompt in theirs.prompts.values():
            self.add_prompt(prompt)
        if self.server_name is None:
            self.server_name, self.instructions = app.name, app.instructions
        return (
            len(theirs.tools) + len(theirs.resources) + len(theirs.templates) + len(theirs.prompts)
        )

    def add_resource(self, spec: Resource | ResourceTemplate) -> None:
        """A resource by its URI, a template by its URI template: one function each."""
        if isinstance(spec, Resource):
            known: Resource | ResourceTemplate | None = self.resources.get(spec.uri)
            key = spec.uri
        else:
            known, key = self.templates.get(spec.uri_template), spec.uri_template
        if known is not None and known.fn is not spec.fn:
            raise ToolDefinitionError(
                f"two resources are at {key}: {_qualified(known.fn)} and {_qualified(spec.fn)}"
            )
        if isinstance(spec, Resource):
            self.resources[key] = spec
        else:
            self.templates[key] = spec

    def add_prompt(self, spec: Prompt) -> None:
        known = self.prompts.get(spec.name)
        if known is not None and known.fn is not spec.fn:
            raise ToolDefinitionError(
                f"two prompts are named {spec.name}: {_qualified(known.fn)} and "
                f"{_qualified(spec.fn)}: rename one with @prompt(name=...)"
            )
        self.prompts[spec.name] = spec

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The resource at ``uri``: a static one first, else the first template it matches
        (with its variables)."""
        static = self.resources.get(uri)
        if static is not None:
            return static, {}
        for template in self.templates.values():
            values = template.match(uri)
            if values is not None:
                return template, values
        return None

    def add(self, spec: Tool) -> None:
        known = self.tools.get(spec.name)
        if known is not None and known.fn is not spec.fn:
            raise ToolDefinitionError(
                f"two tools are named {spec.name}: {_qualified(known.fn)} and "
                f"{_qualified(spec.fn)}: rename one with @tool(name=...)"
            )
        self.tools[spec.name] = spec

    @overload
    def tool(self, name: F, /) -> F: ...
    @overload
    def tool(self, name: str | None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...
    def tool(self, name: Any = None, **options: Unpack[ToolOptions]) -> Any:
        """:func:`tool`, and add the result to this registry (tests, ad hoc registries)."""
        if name is not None and not isinstance(name, str):
            return self.tool()(name)

        def mark_and_add(fn: F) -> F:
            marked = tool(name, **options)(fn)
            self.add(getattr(marked, _MARK))
            return marked

        return mark_and_add

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def queues(self) -> set[str]:
        """The queues the tools name (tools without one use the default queue)."""
        return {spec.queue for spec in self.tools.values() if spec.queue}


def _qualified(fn: Callable[..., Any]) -> str:
    """``module.function (file:line)``: which of two tools of one name is which."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
    return f"{name} ({where(fn)})"


def _import(module_name: str) -> Any:
    """Import a tool module; a failure becomes one line at the user's file and line."""
    try:
        return importlib.import_module(module_name)
    except ToolDefinitionError:
        raise  # one line already, at the declaration
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise  # the module itself is not there: the caller says where modules are found
        raise ToolModuleError(_failure(module_name, exc)) from exc
    except Exception as exc:
        raise ToolModuleError(_failure(module_name, exc)) from exc


def _failure(module_name: str, exc: BaseException) -> str:
    lines = str(exc.msg if isinstance(exc, SyntaxError) else exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename:
        # Where the user's code is wrong (not the importing line of mcpq's, which is the only
        # frame of a module that does not compile).
        detail += f" ({exc.filename}:{exc.lineno})"
    elif not isinstance(exc, ModuleNotFoundError) and (place := _user_frame(exc)):
        detail += f" ({place})"
    return f"module {module_name!r} failed to import: {detail}"


_OURS = str(Path(__file__).resolve().parent)
_LIBRARIES = {sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")}


def _user_frame(exc: BaseException) -> str:
    """The deepest frame of the user's own code: not importlib's, not mcpq's machinery here,
    preferably not a library's (an error raised inside one is shown at the user's call)."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen")
        and "importlib" not in frame.filename
        and not str(Path(frame.filename).resolve()).startswith(_OURS)
    ]
    own = [f for f in frames if not f.filename.startswith(tuple(_LIBRARIES))]
    chosen = (own or frames)[-1:]
    return f"{chosen[0].filename}:{chosen[0].lineno}" if chosen else ""
