"""``mcpq.shared.tools``: schemas from signatures, argument validation, registration rules."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from mcpq.shared.registry import Registry
from mcpq.shared.tools import (
    ArgumentsInvalid,
    Tool,
    ToolContext,
    elicitation,
    sampling,
    tool,
)


def make(fn: Any, **kw: Any) -> Tool:
    reg = Registry()
    reg.tool(**kw)(fn)
    [spec] = reg.tools.values()
    return spec


def typed(
    ctx: ToolContext,
    city: str,
    days: int = 3,
    units: Literal["metric", "imperial"] = "metric",
    tags: list[str] | None = None,
) -> str:
    """Weather for a city."""
    return city


def test_schema_comes_from_the_signature_without_the_context() -> None:
    schema = make(typed).input_schema
    assert schema["type"] == "object"
    assert "title" not in schema
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["city"]
    props = schema["properties"]
    assert set(props) == {"city", "days", "units", "tags"}
    assert props["city"]["type"] == "string"
    assert (props["days"]["type"], props["days"]["default"]) == ("integer", 3)
    assert props["units"]["enum"] == ["metric", "imperial"]
    assert "ctx" not in props


def test_a_tool_without_arguments_has_an_empty_object_schema() -> None:
    def bare(ctx: ToolContext) -> None:
        return None

    schema = make(bare).input_schema
    assert schema["type"] == "object"
    assert schema["properties"] == {}
    assert "required" not in schema


def test_unannotated_parameters_take_anything() -> None:
    def loose(ctx: ToolContext, anything, n=1):  # type: ignore[no-untyped-def]
        return anything

    tool = make(loose)
    assert tool.validate({"anything": [1, {"a": None}]}) == {"anything": [1, {"a": None}], "n": 1}
    assert tool.input_schema["required"] == ["anything"]


def test_validate_fills_defaults_and_returns_json() -> None:
    assert make(typed).validate({"city": "Oslo"}) == {
        "city": "Oslo",
        "days": 3,
        "units": "metric",
        "tags": None,
    }


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"city": "Oslo", "extra": 1}, "extra"),
        ({}, "city"),
        ({"city": "Oslo", "days": "soon"}, "days"),
        ({"city": "Oslo", "units": "kelvin"}, "units"),
        ({"city": ["Oslo"]}, "city"),
    ],
)
def test_invalid_arguments_raise_naming_the_tool_and_field(
    arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ArgumentsInvalid) as info:
        make(typed).validate(arguments)
    assert "typed" in str(info.value)
    assert field in str(info.value)
    assert isinstance(info.value, ValueError)


def test_call_passes_validated_arguments() -> None:
    seen: list[tuple[Any, ...]] = []

    def add(ctx: ToolContext, a: int, b: int = 2) -> int:
        seen.append((ctx, a, b))
        return a + b

    tool = make(add)
    ctx: Any = object()
    assert tool.call(ctx, {"a": 1}) == 3
    assert seen == [(ctx, 1, 2)]


@pytest.mark.parametrize("name", ["celery.backend_cleanup", "mcpq.sweep", "celery.x"])
def test_reserved_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        make(typed, name=name)


def test_reserved_function_names_are_refused_too() -> None:
    reg = Registry()

    def fn(ctx: ToolContext) -> None:
        return None

    fn.__name__ = "mcpq.internal"
    with pytest.raises(ValueError, match="reserved"):
        reg.tool()(fn)
    assert reg.tools == {}


def test_names_and_descriptions() -> None:
    assert make(typed).name == "typed"
    assert make(typed).description == "Weather for a city."
    assert make(typed, name="weather", description="Forecast").name == "weather"
    assert make(typed, description="Forecast").description == "Forecast"

    def undocumented(ctx: ToolContext) -> None:
        return None

    assert make(undocumented).description == "undocumented"


def test_listing() -> None:
    tool = make(typed, name="weather")
    assert tool.listing() == {
        "name": "weather",
        "description": "Weather for a city.",
        "inputSchema": tool.input_schema,
    }


def test_decorator_returns_the_function_unchanged() -> None:
    reg = Registry()
    assert reg.tool()(typed) is typed


def test_defaults_and_modes() -> None:
    tool = make(typed)
    assert (tool.mode, tool.queue, tool.poll_interval_ms, tool.ask_first) == (
        "optional",
        None,
        None,
        None,
    )
    assert make(typed, task="required", queue="gpu").queue == "gpu"


@pytest.mark.parametrize(
    ("kw", "default", "effective"),
    [
        ({}, 5000, 5000),
        ({}, None, None),
        ({"ttl_ms": None}, 5000, None),
        ({"ttl_ms": 42}, 5000, 42),
        ({"ttl_ms": 42}, None, 42),
    ],
)
def test_effective_ttl(kw: dict[str, Any], default: int | None, effective: int | None) -> None:
    reg = Registry()
    reg.tool(**kw)(typed)
    assert reg.tools["typed"].ttl(default) == effective


def test_get_and_from_modules() -> None:
    reg = Registry()
    reg.tool()(typed)
    assert reg.get("typed") is reg.tools["typed"]
    assert reg.get("nope") is None
    # A registry is built from tool modules: their own @tool functions, in definition order.
    demo = Registry.from_modules(["mcpq.demo"])
    assert list(demo.tools) == ["build_report", "approve_deployment", "summarize"]
    assert demo.queues() == {"bulk"}
    assert Registry.from_modules(["json"]).tools == {}
    with pytest.raises(ModuleNotFoundError):
        Registry.from_modules(["no_such_module_for_mcpq_tests"])


def test_declaring_a_tool_registers_it_nowhere() -> None:
    @tool(task="never")
    def lonely(ctx: ToolContext) -> str:
        return "alone"

    assert lonely.__name__ == "lonely"  # the function itself, unchanged
    assert Registry().get("lonely") is None
    assert Registry.from_modules(["mcpq.demo"]).get("lonely") is None


def test_two_tools_of_one_name_are_refused() -> None:
    reg = Registry()
    reg.tool(name="same")(typed)

    def other(ctx: ToolContext) -> None:
        return None

    with pytest.raises(ValueError, match="two tools are named same"):
        reg.tool(name="same")(other)


def test_input_request_builders() -> None:
    schema = {"type": "object", "properties": {}}
    assert elicitation("Hi?", schema) == {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Hi?", "requestedSchema": schema},
    }
    messages = [{"role": "user", "content": {"type": "text", "text": "q"}}]
    assert sampling(messages, 50, temperature=0.1) == {
        "method": "sampling/createMessage",
        "params": {"messages": messages, "maxTokens": 50, "temperature": 0.1},
    }
