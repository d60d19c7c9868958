"""The tool registry, the ``@tool`` decorator and the interface a tool sees (``ToolContext``).

A tool is a plain (synchronous) function whose first parameter is the context and whose other
parameters are its arguments: pydantic builds the input schema and validates arguments from the
signature. Tool modules import only this package, so the web tier (which lists and validates) and
the workers (which run) can both import them. Modules are named by ``MCPQ_TOOLS``.

Example::

    from mcpq.shared.tools import ToolContext, tool

    @tool(task="optional", description="Add slowly")
    def slow_add(ctx: ToolContext, a: int, b: int) -> str:
        ctx.report("adding")
        ctx.sleep(2)
        return str(a + b)
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import pydantic

TaskMode = Literal["never", "optional", "required"]
InputRequest = dict[str, Any]
Prelude = Callable[[dict[str, Any]], dict[str, InputRequest]]
T = TypeVar("T")
_UNSET: Any = object()


class ToolContext(Protocol):
    """What a running tool may do. Every call also observes cancellation: once the task is
    cancelled, the next call raises :class:`mcpq.shared.errors.TaskCancelled`."""

    @property
    def cancelled(self) -> bool: ...

    @property
    def prelude(self) -> dict[str, Any]:
        """Answers gathered by MRTR before the task was created (``ask_first``)."""
        ...

    def report(self, message: str) -> None:
        """Set the task's ``statusMessage`` (progress for the client). Written
        ``MCPQ_REPORT_DELAY_MS`` later, the latest of several in one write, and not at all when
        the run ends first (its end replaces the message); a cancel the worker already knows
        of raises here, like at any other call."""

    def sleep(self, seconds: float) -> None:
        """Sleep, waking at once if the task is cancelled. ``sleep(0)`` is a yield point that
        costs no round trip: it raises for a cancel the worker knows of (its lease keeper
        learns of one within half a second)."""

    def ask(self, *requests: InputRequest) -> list[dict[str, Any]]:
        """Ask the client several things at once; returns the answers in order."""
        ...

    def elicit(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        """Ask the user to fill a form; returns the ``ElicitResult``."""
        ...

    def sample(
        self, messages: list[dict[str, Any]], max_tokens: int, **params: Any
    ) -> dict[str, Any]:
        """Ask the client's model; returns the ``CreateMessageResult``."""
        ...

    def step(self, name: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` once per task; later runs (replays) get its memoized JSON result.

        A run calls ``fn`` only after proving, in the round trip that finds no memo, that it
        still holds the task: a run that was taken over stops instead. ``fn`` runs a second
        time only when its run died (or was taken over) after that proof and before its value
        was stored; give the outside system ``step_key(name)`` so that second call does
        nothing twice."""
        ...

    def step_key(self, name: str) -> str:
        """The idempotency key of step ``name`` of this task: the same in every run of the task
        (a replay, a recovered run), different for every other task or step, and derived from
        neither the taskId nor anything secret. Pass it to payment APIs, mail services or
        databases as their idempotency key (53 characters: ``mcpq-`` and 48 hex digits)."""
        ...


def step_key(ref: str, name: str) -> str:
    """``ToolContext.step_key``: a digest of the task's storage ref and the step's name (the
    ref is itself a one-way digest of the taskId), short enough for every common API's key
    (64 characters is the tightest in wide use)."""
    digest = hashlib.sha256(f"{ref}\x00{name}".encode()).hexdigest()
    return f"mcpq-{digest[:48]}"


def elicitation(message: str, schema: dict[str, Any]) -> InputRequest:
    """An ``elicitation/create`` (form mode) input request."""
    params = {"mode": "form", "message": message, "requestedSchema": schema}
    return {"method": "elicitation/create", "params": params}


def sampling(messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> InputRequest:
    """A ``sampling/createMessage`` input request."""
    body = {"messages": messages, "maxTokens": max_tokens, **params}
    return {"method": "sampling/createMessage", "params": body}


_CAPABILITY = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def missing_capabilities(
    requests: Iterable[InputRequest], client_caps: dict[str, Any]
) -> dict[str, Any]:
    """The client capabilities these input requests need and the client did not declare, as a
    ``requiredCapabilities`` object (empty when nothing is missing)."""
    needed = (_CAPABILITY.get(str(r.get("method"))) for r in requests)
    return {name: {} for name in needed if name and name not in client_caps}


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
        return self.fn(ctx, **self.args_model.model_validate(arguments).__dict__)


def _args_model(name: str, fn: Callable[..., Any]) -> type[pydantic.BaseModel]:
    try:
        # Resolved annotations: a module with `from __future__ import annotations` has strings
        # there, and constraints (Annotated[float, Field(le=3600)]) must reach pydantic.
        signature = inspect.signature(fn, eval_str=True)
    except NameError:  # a name only imported for type checkers: pydantic resolves what it can
        signature = inspect.signature(fn)
    params = list(signature.parameters.values())[1:]  # the first is the context
    fields: dict[str, Any] = {}
    for p in params:
        annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    # Unknown arguments are refused, not dropped: a model that misspells one learns so.
    config = pydantic.ConfigDict(extra="forbid")
    return pydantic.create_model(f"{name}_arguments", __config__=config, **fields)


_MARK = "__mcpq_tool__"


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    task: TaskMode = "optional",
    queue: str | None = None,
    ttl_ms: int | Any | None = _UNSET,
    poll_interval_ms: int | None = None,
    ask_first: Prelude | None = None,
    max_run_s: float | None = None,
    scopes: Iterable[str] = (),
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Declare a function an MCP tool. It is served where its module is loaded into a
    :class:`Registry` (``MCPQ_TOOLS``); declaring registers nothing by itself."""

    def mark(fn: Callable[..., T]) -> Callable[..., T]:
        tool_name = name or fn.__name__
        # The tool name is the Celery task name: Celery's own and ours must stay unshadowed.
        if tool_name.startswith(("celery.", "mcpq.")):
            raise ValueError(f"reserved tool name: {tool_name}")
        if max_run_s is not None and not max_run_s >= 0:
            raise ValueError(f"{tool_name}: max_run_s must be 0 (no limit) or more seconds")
        # A task whose TTL is 0 or less would expire the moment it is created.
        if ttl_ms is not _UNSET and ttl_ms is not None and not _positive_int(ttl_ms):
            raise ValueError(
                f"{tool_name}: ttl_ms must be a positive number of milliseconds, "
                f"or None (unlimited), not {ttl_ms!r}"
            )
        spec = Tool(
            tool_name,
            description or inspect.getdoc(fn) or tool_name,
            fn,
            task,
            queue,
            ttl_ms,
            poll_interval_ms,
            _args_model(tool_name, fn),
            ask_first,
            max_run_s,
            tuple(scopes),
        )
        setattr(fn, _MARK, spec)
        return fn

    return mark


class Registry:
    """The tools one process serves, by name: an object the web app and the worker are given,
    not a global filled by imports."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        for spec in tools:
            self.add(spec)

    @classmethod
    def from_modules(cls, modules: Iterable[str]) -> Registry:
        """Import the tool modules and collect their ``@tool`` functions, in definition order."""
        registry = cls()
        for module_name in modules:
            module = importlib.import_module(module_name)
            for value in list(vars(module).values()):
                spec = getattr(value, _MARK, None)
                # A module may import another's tool: only its own definitions count here.
                if isinstance(spec, Tool) and getattr(value, "__module__", None) == module_name:
                    registry.add(spec)
        return registry

    def add(self, spec: Tool) -> None:
        if spec.name in self.tools and self.tools[spec.name].fn is not spec.fn:
            raise ValueError(f"two tools are named {spec.name}")
        self.tools[spec.name] = spec

    def tool(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """:func:`tool`, and add the result to this registry (tests, ad hoc registries)."""

        def mark_and_add(fn: Callable[..., T]) -> Callable[..., T]:
            marked = tool(*args, **kwargs)(fn)
            self.add(getattr(marked, _MARK))
            return marked

        return mark_and_add

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def queues(self) -> set[str]:
        """The queues the tools name (tools without one use the default queue)."""
        return {spec.queue for spec in self.tools.values() if spec.queue}
