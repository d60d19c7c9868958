"""Typed elicitation: ``ctx.elicit(message, schema=Model)`` (FastMCP spells it
``response_type=``) asks for a form built from ``Model`` and returns an :class:`Elicited`
whose ``data`` is a validated ``Model``, or ``None`` when the user declined or cancelled.

``Model`` is what pydantic can describe as a form: a pydantic model, a dataclass or a
``TypedDict`` whose fields are strings, numbers, booleans or enums (the MCP spec keeps
``requestedSchema`` flat: primitive properties only), or one such primitive (``str``, ``int``,
``bool``, an ``Enum``), which is asked as a form of one field, ``value``, as FastMCP does.

The question is an ordinary ``elicitation/create`` input request: it is asked once per task
and a replay gets the stored answer; the server checks an answer against ``requestedSchema``
before it is stored (``-32602`` and the task stays ``input_required`` otherwise), and the
model validates it again here.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import pydantic

from mcpq.shared.errors import ToolError

M = TypeVar("M")

Action = Literal["accept", "decline", "cancel"]
_PRIMITIVE = {"string", "number", "integer", "boolean"}
#: The one field a primitive answer is asked in (FastMCP's name for it).
VALUE = "value"


@dataclass(frozen=True)
class Elicited(Generic[M]):
    """The user's answer to a typed question: ``action``, and ``data`` (a validated instance of
    the model) when they accepted. Awaitable to itself, like every answer of the context, so
    ``await ctx.elicit(...)`` type-checks in an async tool."""

    action: Action
    data: M | None
    #: The form's raw content as the client sent it (``None`` unless accepted).
    content: dict[str, Any] | None = None

    def __await__(self) -> Generator[Any, None, Elicited[M]]:
        return self
        yield  # a generator that never yields: awaiting it returns at once


@dataclass(frozen=True)
class Form(Generic[M]):
    """How a model is asked: its ``requestedSchema``, and whether the answer is one ``value``."""

    model: type[M]
    schema: dict[str, Any]
    wrapped: bool

    def result(self, answer: dict[str, Any]) -> Elicited[M]:
        """The typed result of the client's ``ElicitResult``."""
        action = answer.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise ValueError(f"an elicitation answer with no known action: {action!r}")
        if action != "accept":
            return Elicited(action, None)
        content = answer.get("content") or {}
        raw = content.get(VALUE) if self.wrapped else content
        data = pydantic.TypeAdapter(self.model).validate_python(raw)
        return Elicited("accept", data, content)


def form(model: type[M]) -> Form[M]:
    """The form that asks for a ``model``; ``TypeError`` naming the fix when it cannot be one."""
    try:
        schema = pydantic.TypeAdapter(model).json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise TypeError(f"elicit: pydantic cannot describe {model!r} as a form: {exc}") from None
    if schema.get("type") == "object" and "properties" in schema:
        return Form(model, _flat(model, schema), wrapped=False)
    if _is_primitive(schema):
        field = {key: value for key, value in schema.items() if key != "title"}
        wrapped = {"type": "object", "properties": {VALUE: field}, "required": [VALUE]}
        return Form(model, wrapped, wrapped=True)
    raise TypeError(_NOT_FLAT.format(model=_name(model), what="it is not an object or a primitive"))


_NOT_FLAT = (
    "elicit: {model} cannot be a form ({what}): MCP forms hold strings, numbers, booleans and "
    "enums only; use a model of such fields"
)


def _flat(model: type[Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with enums inlined and titles kept, refused when a field is not primitive."""
    defs = schema.get("$defs", {})
    properties: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        if "anyOf" in prop:  # an optional field (``str | None``): its one non-null branch
            branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
            if len(branches) == 1:
                rest = {k: v for k, v in prop.items() if k != "anyOf"}
                prop = {**branches[0], **rest}
        if "$ref" in prop:  # an enum field: pydantic refers to its definition
            prop = {**defs.get(prop["$ref"].rsplit("/", 1)[-1], {}), **prop}
            prop.pop("$ref")
        if not _is_primitive(prop):
            what = f"its field {name!r} is not a string, number, boolean or enum"
            raise TypeError(_NOT_FLAT.format(model=_name(model), what=what))
        if "default" in prop and prop["default"] is None:
            # An optional field (``str | None = None``): MCP's primitive schemas allow only a
            # default of their own type, and a strict client refuses ``null``; not required is
            # what it means.
            prop = {key: value for key, value in prop.items() if key != "default"}
        properties[name] = prop
    flat: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        flat["required"] = list(schema["required"])
    return flat


def _is_primitive(schema: dict[str, Any]) -> bool:
    return schema.get("type") in _PRIMITIVE or (
        "enum" in schema and all(isinstance(v, str | int | float | bool) for v in schema["enum"])
    )


def _name(model: type[Any]) -> str:
    return getattr(model, "__name__", repr(model))


def url_result(answer: dict[str, Any]) -> Elicited[None]:
    """The result of a URL-mode question (``ctx.elicit_url``): whether the user went there."""
    action = answer.get("action")
    if action not in ("accept", "decline", "cancel"):
        raise ToolError(f"The URL elicitation's answer has no known action: {action!r}")
    return Elicited(action, None)


def one_model(schema: Any, response_type: Any) -> Any:
    """The model of a typed ``elicit``: ``schema=`` or ``response_type=``, exactly one."""
    if (schema is None) == (response_type is None):
        raise TypeError("elicit: give the form as schema=Model (or response_type=Model), once")
    return schema if schema is not None else response_type
