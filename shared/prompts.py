"""Prompts: message templates a client offers its user (``prompts/list``, ``prompts/get``),
declared beside the tools as FastMCP and the MCP SDK do::

    @app.prompt
    def review(code: str, language: str = "python") -> str:
        \"\"\"Review a piece of code.\"\"\"
        return f"Review this {language} code:\\n\\n{code}"

The function's parameters are the prompt's arguments (MCP sends them as strings; each is
validated, and converted, by its parameter's type: a failure is ``-32602``); its docstring the
description. It returns the messages: a string (one user message), an
:class:`~mcpq.shared.content.Image` or an :class:`~mcpq.shared.content.EmbeddedResource` (a user
message holding it), a :class:`Message`, or a list of those.

A prompt that needs something from the client first (2026-07-28's MRTR, SEP-2322) names its
questions with ``ask_first``, as a tool does; ``prompts/get`` answers ``input_required`` until
they are answered, and the function gets the answers in a parameter annotated
:class:`Answered`::

    def ask_context(arguments):
        return {"context": elicitation("What should the review focus on?", FOCUS)}

    @app.prompt(ask_first=ask_context)
    def review(code: str, answers: Answered) -> str:
        return f"Review this, focusing on {answers['context']['content']['focus']}:\n{code}"
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar, Unpack, overload

import pydantic

from mcpq.shared.content import Audio, EmbeddedResource, Image, block
from mcpq.shared.resources import Completer
from mcpq.shared.tool_signature import check_decorated, read_signature, refuse
from mcpq.shared.tools import Prelude

JsonObject = dict[str, Any]
PROMPT_MARK = "__mcpq_prompt__"


class Answered(dict[str, Any]):
    """A prompt's answers to its ``ask_first`` questions, by key: each is the client's result
    (an elicitation's ``{"action", "content"}``, a sampling's message, a roots list)."""


class PromptArgumentsInvalid(ValueError):
    """A prompt's arguments fail their types, or one it requires is missing (``-32602``)."""


@dataclass(frozen=True)
class Message:
    """One message of a prompt: its role and its content (text, or a content helper)."""

    content: str | Image | Audio | EmbeddedResource
    role: Literal["user", "assistant"] = "user"

    def dump(self) -> JsonObject:
        return {"role": self.role, "content": block(self.content)}


@dataclass(frozen=True)
class Prompt:
    name: str
    fn: Callable[..., Any]
    args_model: type[pydantic.BaseModel]
    title: str | None = None
    description: str | None = None
    scopes: tuple[str, ...] = ()
    complete: dict[str, Completer] = field(default_factory=dict)
    ask_first: Prelude | None = None
    #: The parameter that gets the :class:`Answered` (``None``: the function takes none).
    answers_param: str | None = None

    def render(self, arguments: dict[str, Any], answered: dict[str, Any]) -> Any:
        """Call the function (on the web's user-code threads: ``mcpq.frontend.user_code``)."""
        if self.answers_param is None:
            return self.fn(**arguments)
        return self.fn(**arguments, **{self.answers_param: Answered(answered)})

    @property
    def listed_arguments(self) -> list[JsonObject]:
        listed = []
        for name, info in self.args_model.model_fields.items():
            argument: JsonObject = {"name": name, "required": info.is_required()}
            if info.description:
                argument["description"] = info.description
            listed.append(argument)
        return listed

    def listing(self) -> JsonObject:
        listing: JsonObject = {"name": self.name}
        if self.title:
            listing["title"] = self.title
        if self.description:
            listing["description"] = self.description
        listing["arguments"] = self.listed_arguments
        return listing

    def validate(self, arguments: dict[str, str]) -> dict[str, Any]:
        """The function's arguments, by their types; :class:`PromptArgumentsInvalid` when one
        fails or a required one is missing."""
        try:
            return dict(self.args_model.model_validate(arguments).__dict__)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise PromptArgumentsInvalid(
                f"Invalid arguments for prompt {self.name}: {problems}"
            ) from None


def declare(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
    complete: dict[str, Completer] | None = None,
    ask_first: Prelude | None = None,
) -> Prompt:
    check_decorated(fn, name)
    label = name or fn.__name__
    answers_param = _answers_param(fn, label)
    if answers_param is not None and ask_first is None:
        raise refuse(fn, f"prompt {label!r}: {answers_param!r} gets answers only with ask_first=")
    skip = frozenset({answers_param}) if answers_param else frozenset()
    signature = read_signature(label, fn, skip)
    if signature.context is not None:
        raise refuse(fn, f"prompt {label!r}: a prompt gets no context; drop {signature.context!r}")
    unknown = set(complete or {}) - set(signature.args_model.model_fields)
    if unknown:
        raise refuse(fn, f"prompt {label!r}: complete= names no argument {sorted(unknown)}")
    doc = description or inspect.getdoc(fn)
    return Prompt(
        label,
        fn,
        signature.args_model,
        title,
        doc,
        tuple(scopes),
        dict(complete or {}),
        ask_first,
        answers_param,
    )


def _answers_param(fn: Callable[..., Any], label: str) -> str | None:
    """The parameter annotated :class:`Answered`, if any (one at most)."""
    try:
        hints = typing.get_type_hints(inspect.unwrap(fn))
    except Exception:  # an unresolvable annotation: read_signature names it
        return None
    found = [n for n, t in hints.items() if isinstance(t, type) and issubclass(t, Answered)]
    if len(found) > 1:
        raise refuse(fn, f"prompt {label!r} has {len(found)} Answered parameters: keep one")
    return found[0] if found else None


def prompt_for(listing: JsonObject, fn: Callable[..., Any]) -> Prompt:
    """A prompt another server lists (``name``, ``arguments``...), rendered by ``fn`` called
    with its arguments as strings (an optional one absent: ``None``) (``mcpq.shared.brought``)."""
    fields: dict[str, Any] = {}
    for argument in listing.get("arguments") or []:
        info = pydantic.Field(description=argument.get("description"))
        if argument.get("required"):
            fields[argument["name"]] = (str, info)
        else:
            info = pydantic.Field(default=None, description=argument.get("description"))
            fields[argument["name"]] = (str | None, info)
    name = str(listing["name"])
    model = pydantic.create_model(f"{name}_arguments", **fields)
    return Prompt(name, fn, model, listing.get("title"), listing.get("description"))


def messages(value: Any) -> list[JsonObject]:
    """What a prompt's function returned, as ``PromptMessage`` objects."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, Message):
            out.append(item.dump())
        elif isinstance(item, str | Image | Audio | EmbeddedResource):
            out.append(Message(item).dump())
        elif isinstance(item, dict) and "role" in item and "content" in item:
            out.append({"role": item["role"], "content": block(item["content"])})
        else:
            raise TypeError(f"a prompt returned {type(item).__name__}, not a message")
    return out


F = TypeVar("F", bound=Callable[..., Any])


class PromptOptions(TypedDict, total=False):
    """What ``@prompt(...)`` and ``@app.prompt(...)`` take besides the name."""

    title: str | None
    description: str | None
    scopes: Iterable[str]
    complete: dict[str, Completer] | None
    #: Questions for the client before the prompt renders (MRTR, 2026-07-28), as a tool's.
    ask_first: Prelude | None


@overload
def prompt(name: F, /) -> F: ...
@overload
def prompt(name: str | None = None, **options: Unpack[PromptOptions]) -> Callable[[F], F]: ...
def prompt(name: Any = None, **options: Unpack[PromptOptions]) -> Any:
    """Declare a function a prompt (bare ``@prompt`` or with options), like ``@tool``."""
    if name is not None and not isinstance(name, str):
        return prompt()(name)

    def mark(fn: F) -> F:
        spec = declare(fn, name=name, **options)
        setattr(fn, PROMPT_MARK, spec)
        return fn

    return mark
