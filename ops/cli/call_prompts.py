"""The prompts of ``mcpq call``: an elicitation form asked field by field from its
``requestedSchema``, and a sampling request answered by typing or by a command."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types
    from rich.console import Console


class UsageError(Exception):
    """Something the user asked cannot be done: one line, exit status 2."""


def ask_form(ui: Console, params: types.ElicitRequestParams) -> types.ElicitResult:
    """An elicitation form as prompts, field by field, from its ``requestedSchema``."""
    import mcp_types as types
    from rich.panel import Panel
    from rich.prompt import Prompt

    ui.print(Panel(params.message, title="the tool asks", expand=False))
    schema = getattr(params, "requested_schema", None)
    if not isinstance(schema, Mapping):  # a URL elicitation: nothing to fill in here
        return types.ElicitResult(action="decline")
    action = Prompt.ask(
        "answer", choices=["accept", "decline", "cancel"], default="accept", console=ui
    )
    if action != "accept":
        return types.ElicitResult(action=action)  # type: ignore[arg-type]
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        value = ask_field(ui, name, prop if isinstance(prop, Mapping) else {}, name in required)
        if value is not None:
            content[name] = value
    return types.ElicitResult(action="accept", content=content)


def ask_field(ui: Console, name: str, prop: Mapping[str, Any], required: bool) -> Any:
    """One field: booleans as y/n, enums as choices, numbers checked, strings as typed; an
    optional field left empty is omitted."""
    from rich.prompt import Confirm, Prompt

    label = str(prop.get("title") or name)
    if prop.get("description"):
        label += f" [dim]({prop['description']})[/dim]"
    kind = prop.get("type")
    default = prop.get("default")
    if kind == "boolean":
        return Confirm.ask(label, default=bool(default), console=ui)
    choices = _choices(prop)
    while True:
        shown = "" if default is None else str(default)
        # No default for a required field without one: rich then asks until it gets a value.
        defaults: dict[str, Any] = {"default": shown} if shown or not required else {}
        raw = str(
            Prompt.ask(
                label + ("" if required else " [dim](optional)[/dim]"),
                choices=choices,
                show_default=bool(shown),
                console=ui,
                **defaults,
            )
        )
        if raw == "" and not required:
            return None
        try:
            return _field_value(raw, kind, prop)
        except ValueError as exc:
            ui.print(f"[red]{exc}[/red]")


def _choices(prop: Mapping[str, Any]) -> list[str] | None:
    if isinstance(prop.get("enum"), list):
        return [str(v) for v in prop["enum"]]
    if isinstance(prop.get("oneOf"), list):
        return [str(o["const"]) for o in prop["oneOf"] if isinstance(o, dict) and "const" in o]
    return None


def _field_value(raw: str, kind: Any, prop: Mapping[str, Any]) -> Any:
    if kind in {"integer", "number"}:
        try:
            number: float = int(raw) if kind == "integer" else float(raw)
        except ValueError:
            raise ValueError(
                f"expected {'an integer' if kind == 'integer' else 'a number'}"
            ) from None
        if "minimum" in prop and number < prop["minimum"]:
            raise ValueError(f"at least {prop['minimum']}")
        if "maximum" in prop and number > prop["maximum"]:
            raise ValueError(f"at most {prop['maximum']}")
        return number
    if raw == "":
        raise ValueError("required")
    if "minLength" in prop and len(raw) < prop["minLength"]:
        raise ValueError(f"at least {prop['minLength']} characters")
    if "maxLength" in prop and len(raw) > prop["maxLength"]:
        raise ValueError(f"at most {prop['maxLength']} characters")
    return raw


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
        text, model = Prompt.ask("your answer", console=ui), "human"
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=text),
        model=model,
        stop_reason="endTurn",
    )
