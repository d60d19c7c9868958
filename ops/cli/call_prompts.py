"""The prompts of ``mcpq call``: an elicitation form asked field by field from its
``requestedSchema`` (or filled from ``--answer``), and a sampling request answered by typing or
by a command.

A prompt needs a terminal on stdin: without one (a pipe, ``/dev/null``, a CI job) nothing is
asked and :class:`CannotPrompt` says so, unless ``--answer`` gives every required field.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import mcp_types as types
    from rich.console import Console

T = TypeVar("T")


class UsageError(Exception):
    """Something the user asked cannot be done: one line, exit status 2."""


class CannotPrompt(Exception):
    """A question the task asks cannot be put to anyone: one line, exit status 6."""

    def __init__(self, why: str, instead: str = "--answer KEY=JSON") -> None:
        super().__init__(f"cannot prompt: {why} (answer with {instead} or run in a terminal)")


def can_prompt() -> bool:
    """Whether a person can answer: stdin is a terminal."""
    stdin = sys.stdin
    return stdin is not None and not stdin.closed and stdin.isatty()


def _typed_in(read: Callable[[], T], instead: str = "--answer KEY=JSON") -> T:
    """A prompt's answer; the end of stdin (Ctrl-D) is no answer at all, not a traceback."""
    if not can_prompt():
        raise CannotPrompt("stdin is not a terminal", instead)
    try:
        return read()
    except EOFError:
        raise CannotPrompt("stdin ended", instead) from None


def ask_form(
    ui: Console, params: types.ElicitRequestParams, given: Mapping[str, Any] | None = None
) -> types.ElicitResult:
    """An elicitation form as prompts, field by field, from its ``requestedSchema``.

    ``given`` (``--answer``, by field name): a form it has fields of is accepted with them,
    without asking anything once every required field is given (else only the others are
    asked); a form it has none of is asked in full."""
    import mcp_types as types
    from rich.panel import Panel
    from rich.prompt import Prompt

    ui.print(Panel(params.message, title="the tool asks", expand=False))
    schema = getattr(params, "requested_schema", None)
    if not isinstance(schema, Mapping):  # a URL elicitation: nothing to fill in here
        return types.ElicitResult(action="decline")
    properties = {
        name: prop if isinstance(prop, Mapping) else {}
        for name, prop in (schema.get("properties") or {}).items()
    }
    required = set(schema.get("required") or [])
    given = given or {}
    content = {
        name: checked_answer(name, given[name], prop)
        for name, prop in properties.items()
        if name in given
    }
    if content:
        if required <= set(content):
            return types.ElicitResult(action="accept", content=content)
    else:
        action = _typed_in(
            lambda: Prompt.ask(
                "answer", choices=["accept", "decline", "cancel"], default="accept", console=ui
            )
        )
        if action != "accept":
            return types.ElicitResult(action=action)  # type: ignore[arg-type]
    for name, prop in properties.items():
        if name not in content:
            value = ask_field(ui, name, prop, name in required)
            if value is not None:
                content[name] = value
    return types.ElicitResult(action="accept", content=content)


def ask_field(ui: Console, name: str, prop: Mapping[str, Any], required: bool) -> Any:
    """One field: booleans as y/n, enums as choices, numbers checked, strings as typed. Enter
    takes the form's ``default``; without one, a required field asks again until it gets a
    valid value and an optional one is left out (``None``)."""
    from rich.markup import escape
    from rich.prompt import Prompt

    label = escape(str(prop.get("title") or name))  # the server's words, not markup
    if prop.get("description"):
        label += f" [dim]({escape(str(prop['description']))})[/dim]"
    if not required:
        label += " [dim](optional)[/dim]"
    kind = prop.get("type")
    choices = ["y", "n"] if kind == "boolean" else _choices(prop)
    default = prop.get("default")
    shown = "" if default is None else _shown(default)
    # Without a default, a required field gets none: Enter then reads "" and asks again.
    defaults: dict[str, Any] = {"default": shown} if shown or not required else {}
    while True:
        raw = _typed_in(
            lambda: str(
                Prompt.ask(
                    label,
                    choices=choices,
                    case_sensitive=kind != "boolean",
                    show_default=bool(shown),
                    console=ui,
                    **defaults,
                )
            )
        )
        if raw == "" and not required:
            return None
        try:
            return _field_value(raw, kind, prop)
        except ValueError as exc:
            ui.print(f"[red]{exc}[/red]")


def _shown(default: Any) -> str:
    if isinstance(default, bool):
        return "y" if default else "n"
    return str(default)


def _choices(prop: Mapping[str, Any]) -> list[str] | None:
    if isinstance(prop.get("enum"), list):
        return [str(v) for v in prop["enum"]]
    if isinstance(prop.get("oneOf"), list):
        return [str(o["const"]) for o in prop["oneOf"] if isinstance(o, dict) and "const" in o]
    return None


def _field_value(raw: str, kind: Any, prop: Mapping[str, Any]) -> Any:
    if raw == "":
        raise ValueError("required")
    if kind == "boolean":
        if raw.lower() in {"y", "yes", "true"}:
            return True
        if raw.lower() in {"n", "no", "false"}:
            return False
        raise ValueError("y or n")
    if kind in {"integer", "number"}:
        try:
            number: float = int(raw) if kind == "integer" else float(raw)
        except ValueError:
            raise ValueError(
                f"expected {'an integer' if kind == 'integer' else 'a number'}"
            ) from None
        _check_range(number, prop)
        return number
    if "minLength" in prop and len(raw) < prop["minLength"]:
        raise ValueError(f"at least {prop['minLength']} characters")
    if "maxLength" in prop and len(raw) > prop["maxLength"]:
        raise ValueError(f"at most {prop['maxLength']} characters")
    return raw


def _check_range(number: float, prop: Mapping[str, Any]) -> None:
    if "minimum" in prop and number < prop["minimum"]:
        raise ValueError(f"at least {prop['minimum']}")
    if "maximum" in prop and number > prop["maximum"]:
        raise ValueError(f"at most {prop['maximum']}")


def checked_answer(name: str, value: Any, prop: Mapping[str, Any]) -> Any:
    """An ``--answer`` value for field ``name``, checked as a typed one is: a value that does
    not fit the field is a usage error."""
    kind = prop.get("type")
    expected = {
        "boolean": (bool,),
        "integer": (int,),
        "number": (int, float),
        "string": (str,),
    }.get(str(kind))
    wrong_type = expected is not None and (
        not isinstance(value, expected) or (isinstance(value, bool) and kind != "boolean")
    )
    if wrong_type:
        raise UsageError(f"--answer {name}: expected a JSON {kind}, got {value!r}")
    choices = _choices(prop)
    if choices is not None and str(value) not in choices:
        raise UsageError(f"--answer {name}: expected one of {', '.join(choices)}")
    try:
        if isinstance(value, str) and kind == "string":
            _field_value(value, kind, prop)
        elif isinstance(value, int | float) and kind in {"integer", "number"}:
            _check_range(value, prop)
    except ValueError as exc:
        raise UsageError(f"--answer {name}: {exc}") from None
    return value


def ask_sampling(
    ui: Console, params: types.CreateMessageRequestParams, command: str | None
) -> types.CreateMessageResult:
    """A sampling request, shown; answered by typing or by ``--sampling-command``."""
    import mcp_types as types
    from rich.panel import Panel
    from rich.prompt import Prompt

    prompt = "\n\n".join(
        block.text
        for message in params.messages
        for block in (message.content if isinstance(message.content, list) else [message.content])
        if isinstance(block, types.TextContent)
    )
    ui.print(Panel(prompt, title="the tool asks a model", expand=False))
    if command:
        argv = shlex.split(command)
        done = subprocess.run(
            argv, input=prompt, capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode != 0:
            raise UsageError(f"--sampling-command exited {done.returncode}")
        text, model = done.stdout.strip(), Path(argv[0]).name
    else:
        typed = _typed_in(lambda: Prompt.ask("your answer", console=ui), "--sampling-command CMD")
        text, model = typed, "human"
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=text),
        model=model,
        stop_reason="endTurn",
    )
