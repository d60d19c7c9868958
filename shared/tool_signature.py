"""What a tool's signature declares: where its context goes, and the model of its arguments.

The rules follow the MCP Python SDK and FastMCP, so that what their users write works here:

- The context is the parameter annotated ``ToolContext`` (a subclass of it, ``ToolContext |
  None``, ``Optional[ToolContext]``, or the string of any of them: ``from __future__ import
  annotations``, or a name imported only for type checkers), wherever it stands. A tool may
  have none: then every parameter is an argument.
- Compatibility with tools written before that rule: an *unannotated* first parameter named
  ``ctx`` or ``context`` is the context too. (An annotated one of another type is an
  argument like any other.)

Mistakes are refused when the module is imported, with one line that names the tool, where it
is and the fix (:class:`ToolDefinitionError`), instead of a schema that breaks ``tools/list``
later or a ``TypeError`` in the worker at the first call.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pydantic

from mcpq.shared.tool_context import ToolContext

#: An unannotated first parameter of one of these names is the context (tools written before
#: the annotation rule).
LEGACY_CONTEXT_NAMES = ("ctx", "context")
_TYPES_HINT = (
    "use a JSON-ready type (str, int, float, bool, list, dict, a pydantic model, a dataclass "
    "or a TypedDict)"
)
_CONTEXT_HINT = "if it is the context, annotate it ToolContext (from mcpq import ToolContext)"
_UNIONS = (typing.Union, types.UnionType)
_NOT_A_TYPE = {"None", "Optional", "typing.Optional", "t.Optional"}  # in a string annotation


class ToolDefinitionError(ValueError):
    """A tool declaration mcpq refuses; ``str()`` is the one line to print (where, what, the
    fix)."""


def where(obj: object) -> str:
    """``file:line`` of a function or class as its module defines it, or ``""``."""
    target = getattr(obj, "__func__", obj)  # staticmethod, classmethod
    code = getattr(target, "__code__", None)
    if isinstance(code, types.CodeType):
        return f"{code.co_filename}:{code.co_firstlineno}"
    try:
        path = inspect.getsourcefile(target)  # type: ignore[arg-type]
        line = inspect.getsourcelines(target)[1]  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""
    return f"{path}:{line}" if path else ""


def refuse(obj: object, message: str) -> ToolDefinitionError:
    """The refusal of ``obj``: the message, then where ``obj`` is (like a failed import's)."""
    place = where(obj)
    return ToolDefinitionError(f"{message} ({place})" if place else message)


def check_decorated(obj: object, name: str | None) -> None:
    """``@tool`` takes a plain function (``def`` or ``async def``); a lambda only with a name."""
    if inspect.isfunction(obj):
        if obj.__name__ == "<lambda>" and not name:
            raise refuse(obj, "@tool got a lambda, which has no name: pass one, tool(name=...)")
        return
    if isinstance(obj, type):
        what = f"the class {obj.__qualname__}"
    else:
        what = f"a {type(obj).__qualname__} object"
    raise refuse(
        obj,
        f"@tool decorates a function, not {what}: put it on a def or async def at the top "
        "level of the module",
    )


def is_context(annotation: Any) -> bool:
    """``ToolContext`` or a subclass, optional or not; also as an unresolved string."""
    if isinstance(annotation, str):
        names = [n for n in re.findall(r"[\w.]+", annotation) if n not in _NOT_A_TYPE]
        return len(names) == 1 and names[0].rpartition(".")[2] == "ToolContext"
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return is_context(typing.get_args(annotation)[0])
    if origin in _UNIONS:
        others = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(others) == 1 and is_context(others[0])
    return isinstance(annotation, type) and ToolContext in annotation.__mro__


@dataclass(frozen=True)
class Signature:
    #: The parameter the context is passed as (by keyword), or None: the tool takes none.
    context: str | None
    args_model: type[pydantic.BaseModel]


def read_signature(
    tool_name: str, fn: Callable[..., Any], skip: frozenset[str] = frozenset()
) -> Signature:
    """The context parameter and the arguments' model of ``fn`` (leaving out the parameters in
    ``skip``, which the caller fills); :class:`ToolDefinitionError` for what cannot work."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in skip]
    # The signature follows a wrapper's __wrapped__ (functools.wraps): so do the annotations.
    annotations = _resolved(inspect.unwrap(fn))
    contexts = [p.name for p in params if is_context(annotations.get(p.name, p.annotation))]
    if len(contexts) > 1:
        raise refuse(
            fn,
            f"tool {tool_name!r} has {len(contexts)} ToolContext parameters "
            f"({', '.join(contexts)}): keep one",
        )
    if not contexts and params and _legacy_context(params[0]):
        contexts = [params[0].name]
    fields: dict[str, Any] = {}
    for p in params:
        if p.name in contexts:
            continue
        _check_kind(tool_name, fn, p)
        annotation = annotations.get(p.name, Any)
        if isinstance(annotation, str):
            raise refuse(
                fn,
                f"tool {tool_name!r}, parameter {p.name!r}: its type {annotation!r} names "
                "nothing the module defines when it runs: import it at run time, not only for "
                "type checkers",
            )
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    return Signature(contexts[0] if contexts else None, _model(tool_name, fn, fields))


def _legacy_context(first: inspect.Parameter) -> bool:
    return (
        first.annotation is inspect.Parameter.empty
        and first.name in LEGACY_CONTEXT_NAMES
        and first.kind in {first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD}
    )


def _check_kind(tool_name: str, fn: Callable[..., Any], p: inspect.Parameter) -> None:
    """Arguments arrive by name (a JSON object): each must be a named parameter."""
    if p.kind in {p.VAR_POSITIONAL, p.VAR_KEYWORD}:
        star = "*" if p.kind is p.VAR_POSITIONAL else "**"
        raise refuse(
            fn,
            f"tool {tool_name!r}, parameter {star}{p.name}: arguments arrive by name: declare "
            "each one as a named parameter",
        )
    if p.kind is p.POSITIONAL_ONLY:
        raise refuse(
            fn,
            f"tool {tool_name!r}, parameter {p.name!r} is positional-only: arguments arrive by "
            "name: remove the '/'",
        )


def _resolved(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s annotations, each evaluated on its own: a string that names something only
    type checkers see stays a string (the context's may; an argument's is refused)."""
    try:
        # Resolved: a module with `from __future__ import annotations` has strings there, and
        # constraints (Annotated[float, Field(le=3600)]) must reach pydantic.
        return inspect.get_annotations(fn, eval_str=True)
    except Exception:  # noqa: S110 -- NameError and the like: one annotation at a time below
        pass
    scope = getattr(inspect.unwrap(fn), "__globals__", {})
    resolved: dict[str, Any] = {}
    for name, annotation in inspect.get_annotations(fn).items():
        if isinstance(annotation, str):
            # What get_annotations(eval_str=True) does, per annotation (the module's own text,
            # like its import); one that fails stays a string: the caller says what to fix.
            with contextlib.suppress(Exception):
                annotation = eval(annotation, scope)  # noqa: S307
        resolved[name] = annotation
    return resolved


def _model(
    tool_name: str, fn: Callable[..., Any], fields: dict[str, Any]
) -> type[pydantic.BaseModel]:
    # Unknown arguments are refused, not dropped: a model that misspells one learns so.
    config = pydantic.ConfigDict(extra="forbid")
    try:
        model: type[pydantic.BaseModel] = pydantic.create_model(
            f"{tool_name}_arguments", __config__=config, **fields
        )
        # Built now, not at the first tools/list: a type without a JSON schema fails here.
        model.model_json_schema()
    except Exception as exc:  # pydantic's own errors, and create_model's NameError
        raise _schema_refusal(tool_name, fn, fields, exc) from exc
    return model


def _schema_refusal(
    tool_name: str, fn: Callable[..., Any], fields: dict[str, Any], exc: Exception
) -> ToolDefinitionError:
    """Which parameter pydantic could not describe (each is tried alone), and the fix."""
    for name, (annotation, _) in fields.items():
        try:
            pydantic.TypeAdapter(annotation).json_schema()
        except Exception:
            shown = type_name(annotation)
            # Another SDK's context (FastMCP's, the MCP SDK's `Context`): say which one is ours.
            fix = _CONTEXT_HINT if shown.endswith("Context") else _TYPES_HINT
            return refuse(
                fn,
                f"tool {tool_name!r}, parameter {name!r}: pydantic cannot build a JSON schema "
                f"for its type {shown}: {fix}",
            )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return refuse(fn, f"tool {tool_name!r}: its arguments have no JSON schema ({first})")


def type_name(annotation: Any) -> str:
    """``Foo``, ``Callable[[int], int]``: an annotation as its author wrote it."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return re.sub(r"\b(typing|collections\.abc|builtins)\.", "", repr(annotation))


#: RFC 9110 ``token``: what an ``x-mcp-header`` name may be (it becomes ``Mcp-Param-<name>``).
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HEADER_TYPES = {"string", "integer", "boolean"}


def param_headers(tool_name: str, fn: object, schema: dict[str, Any]) -> dict[str, str]:
    """The tool's arguments that clients mirror into ``Mcp-Param-<name>`` headers (SEP-2243:
    ``x-mcp-header`` on a property of the input schema), property -> header name; a
    declaration the spec makes invalid (clients would drop the whole tool) is refused here."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    properties = schema.get("properties") or {}
    for prop, spec in properties.items():
        header = spec.get("x-mcp-header") if isinstance(spec, dict) else None
        if header is None:
            continue
        where_ = f"tool {tool_name!r}, parameter {prop!r}: x-mcp-header {header!r}"
        if not isinstance(header, str) or not _TOKEN.match(header):
            raise refuse(fn, f"{where_} must be a header name (letters, digits, -)")
        if header.lower() in seen:
            raise refuse(fn, f"{where_} is used twice (names compare case-insensitively)")
        kinds = {spec.get("type")} | {
            b.get("type") for b in spec.get("anyOf", []) if isinstance(b, dict)
        }
        if not (kinds - {None, "null"}) or not (kinds - {None, "null"}) <= _HEADER_TYPES:
            raise refuse(fn, f"{where_} must be on a str, int or bool parameter")
        seen.add(header.lower())
        found[prop] = header
    if _nested_header(schema):
        raise refuse(fn, f"tool {tool_name!r}: x-mcp-header only on top-level parameters")
    return found


def _nested_header(schema: dict[str, Any]) -> bool:
    """An ``x-mcp-header`` anywhere but directly on a top-level property (in ``items``, a
    nested model's ``$defs``, ``anyOf``...)."""

    def anywhere(node: Any) -> bool:
        if isinstance(node, dict):
            return "x-mcp-header" in node or any(anywhere(v) for v in node.values())
        return isinstance(node, list) and any(anywhere(v) for v in node)

    for key, value in schema.items():
        if key != "properties" or not isinstance(value, dict):
            if anywhere(value):
                return True
            continue
        for spec in value.values():
            inner = spec.items() if isinstance(spec, dict) else ()
            if any(anywhere(v) for k, v in inner if k != "x-mcp-header"):
                return True
    return False
