"""Declaring tools the way the MCP Python SDK and FastMCP teach it: ``@tool`` with or without
parentheses, the context found by its annotation (or left out), and every mistake refused when
its module is imported, in one line that names the fix (``mcpq.shared.tool_signature``)."""

from __future__ import annotations

import inspect
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from mcpq.shared.registry import Registry, ToolModuleError
from mcpq.shared.tools import (
    Tool,
    ToolContext,
    ToolDefinitionError,
    tool,
)


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Write a tool module of a fresh name into a folder on the path; returns (name, path)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str, stem: str = "tools") -> tuple[str, Path]:
        name = f"{stem}_{uuid.uuid4().hex[:8]}"
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source).lstrip())
        written.append(name)
        return name, path

    yield write
    for name in written:
        sys.modules.pop(name, None)


def spec(fn: Callable[..., Any]) -> Tool:
    marked: Tool = fn.__mcpq_tool__  # type: ignore[attr-defined]
    return marked


# -- @tool with or without parentheses -----------------------------------------------------------
def test_tool_works_bare_called_and_with_options(write_module: Any) -> None:
    name, _ = write_module(
        """
        from mcpq import tool

        @tool
        def bare(a: int) -> int:
            return a

        @tool()
        def called(a: int) -> int:
            return a

        @tool(task="required")
        def configured(a: int) -> int:
            return a
        """
    )
    registry = Registry.from_modules([name])
    assert list(registry.tools) == ["bare", "called", "configured"]
    assert registry.tools["configured"].mode == "required"
    assert registry.tools["bare"].input_schema["required"] == ["a"]


def test_a_registry_takes_a_bare_decorator_too() -> None:
    registry = Registry()

    @registry.tool
    def double(a: int) -> int:
        return 2 * a

    assert double(2) == 4  # the function itself, unchanged
    assert registry.tools["double"].call(object(), {"a": 3}) == 6  # type: ignore[arg-type]


# -- where the context goes ----------------------------------------------------------------------
def test_a_tool_without_a_context_keeps_every_argument() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    added = spec(tool(add))
    assert added.context is None
    assert added.input_schema["required"] == ["a", "b"]
    assert added.call(object(), {"a": 1, "b": 2}) == 3  # type: ignore[arg-type]


def test_the_context_is_found_by_its_annotation_wherever_it_stands() -> None:
    seen: list[Any] = []

    def review(text: str, context: ToolContext, times: int = 1) -> str:
        seen.append(context)
        return text * times

    reviewed = spec(tool(review))
    assert reviewed.context == "context"
    assert set(reviewed.input_schema["properties"]) == {"text", "times"}
    ctx: Any = object()
    assert reviewed.call(ctx, {"text": "a", "times": 2}) == "aa"
    assert seen == [ctx]  # passed by keyword, under its own name


class SpecialContext(ToolContext):
    """A subclass of the protocol (a tool author's own, narrower annotation)."""


def test_optional_and_subclass_annotations_are_the_context() -> None:
    def optional(a: int, ctx: ToolContext | None = None) -> int:
        return a

    def old_optional(a: int, ctx: Optional[ToolContext] = None) -> int:  # noqa: UP045
        return a

    def subclass(a: int, c: SpecialContext) -> int:
        return a

    assert [spec(tool(fn)).context for fn in (optional, old_optional, subclass)] == [
        "ctx",
        "ctx",
        "c",
    ]


def test_a_string_annotation_of_a_name_only_type_checkers_see_is_the_context(
    write_module: Any,
) -> None:
    name, _ = write_module(
        """
        from __future__ import annotations

        from typing import TYPE_CHECKING

        from mcpq import tool

        if TYPE_CHECKING:
            from mcpq import ToolContext


        @tool
        def add(a: int, ctx: ToolContext, b: int = 2) -> int:
            return a + b
        """
    )
    added = Registry.from_modules([name]).tools["add"]
    assert added.context == "ctx"
    assert added.input_schema["required"] == ["a"]
    assert added.call(object(), {"a": 1}) == 3  # type: ignore[arg-type]


def test_an_unannotated_first_ctx_is_the_context_for_tools_written_before() -> None:
    def legacy(ctx, city: str) -> str:  # type: ignore[no-untyped-def]
        return str(city)

    def named_context(context, city: str) -> str:  # type: ignore[no-untyped-def]
        return str(city)

    def annotated_otherwise(ctx: str, city: str) -> str:
        return ctx + city

    assert spec(tool(legacy)).context == "ctx"
    assert spec(tool(named_context)).context == "context"
    # Annotated with another type, it is an argument like any other.
    assert spec(tool(annotated_otherwise)).context is None
    assert spec(tool(annotated_otherwise)).input_schema["required"] == ["ctx", "city"]


# -- refusals: one line, naming the fix ----------------------------------------------------------
def test_an_argument_type_without_a_json_schema_is_refused_naming_tool_parameter_and_type(
    write_module: Any,
) -> None:
    name, path = write_module(
        """
        from mcpq import tool


        class Point:
            pass


        @tool
        def locate(label: str, p: Point) -> str:
            return label
        """
    )
    with pytest.raises(ToolDefinitionError) as refused:
        Registry.from_modules([name])
    assert str(refused.value) == (
        "tool 'locate', parameter 'p': pydantic cannot build a JSON schema for its type Point: "
        "use a JSON-ready type (str, int, float, bool, list, dict, a pydantic model, a "
        f"dataclass or a TypedDict) ({path}:8)"
    )


def test_two_tools_of_one_name_in_two_modules_are_refused_naming_both(write_module: Any) -> None:
    first, first_path = write_module(
        """
        from mcpq import tool


        @tool(name="same")
        def one() -> str:
            return "1"
        """
    )
    second, second_path = write_module(
        """
        from mcpq import tool


        @tool(name="same")
        def other() -> str:
            return "2"
        """
    )
    with pytest.raises(ToolDefinitionError) as refused:
        Registry.from_modules([first, second])
    assert str(refused.value) == (
        f"two tools are named same: {first}.one ({first_path}:4) and {second}.other "
        f"({second_path}:4): rename one with @tool(name=...)"
    )


def test_the_decorator_on_a_class_is_refused(write_module: Any) -> None:
    name, path = write_module(
        """
        from mcpq import tool


        @tool
        class Weather:
            pass
        """
    )
    with pytest.raises(ToolDefinitionError) as refused:
        Registry.from_modules([name])
    assert str(refused.value) == (
        "@tool decorates a function, not the class Weather: put it on a def or async def at "
        f"the top level of the module ({path}:4)"
    )


def test_the_decorator_on_a_staticmethod_object_is_refused() -> None:
    def helper() -> str:
        return "x"

    code = helper.__code__
    with pytest.raises(ToolDefinitionError) as refused:
        tool(staticmethod(helper))
    assert str(refused.value) == (
        "@tool decorates a function, not a staticmethod object: put it on a def or async def "
        f"at the top level of the module ({code.co_filename}:{code.co_firstlineno})"
    )


def test_a_lambda_is_a_tool_only_with_a_name() -> None:
    named = spec(tool(name="double")(lambda a: 2 * a))
    assert named.name == "double" and named.context is None
    anonymous = lambda a: a  # noqa: E731
    code = anonymous.__code__
    with pytest.raises(ToolDefinitionError) as refused:
        tool(anonymous)
    assert str(refused.value) == (
        "@tool got a lambda, which has no name: pass one, tool(name=...) "
        f"({code.co_filename}:{code.co_firstlineno})"
    )


def test_star_args_positional_only_and_two_contexts_are_refused() -> None:
    def star(*values: int) -> int:
        return sum(values)

    def slash(a: int, /) -> int:
        return a

    def twice(ctx: ToolContext, other: ToolContext) -> None:
        return None

    lines = []
    for fn in (star, slash, twice):
        with pytest.raises(ToolDefinitionError) as refused:
            tool(fn)
        lines.append(str(refused.value).rpartition(" (")[0])
    assert lines == [
        "tool 'star', parameter *values: arguments arrive by name: declare each one as a "
        "named parameter",
        "tool 'slash', parameter 'a' is positional-only: arguments arrive by name: remove the '/'",
        "tool 'twice' has 2 ToolContext parameters (ctx, other): keep one",
    ]


def test_an_argument_type_defined_only_for_type_checkers_is_refused(write_module: Any) -> None:
    name, path = write_module(
        """
        from __future__ import annotations

        from typing import TYPE_CHECKING

        from mcpq import tool

        if TYPE_CHECKING:
            from decimal import Decimal


        @tool
        def price(amount: Decimal) -> str:
            return str(amount)
        """
    )
    with pytest.raises(ToolDefinitionError) as refused:
        Registry.from_modules([name])
    assert str(refused.value) == (
        "tool 'price', parameter 'amount': its type 'Decimal' names nothing the module "
        f"defines when it runs: import it at run time, not only for type checkers ({path}:11)"
    )


def test_a_syntax_error_is_reported_at_the_users_file_and_line(write_module: Any) -> None:
    name, path = write_module(
        """
        from mcpq import tool


        @tool
        def broken(a: int) -> int
            return a
        """
    )
    with pytest.raises(ToolModuleError) as failed:
        Registry.from_modules([name])
    assert str(failed.value) == (
        f"module {name!r} failed to import: SyntaxError: expected ':' ({path}:5)"
    )


def test_an_error_raised_at_import_is_reported_at_the_users_line(write_module: Any) -> None:
    name, path = write_module(
        """
        import json

        json.loads("{not json")
        """
    )
    with pytest.raises(ToolModuleError) as failed:
        Registry.from_modules([name])
    # The line of the user's call, not of the library that raised.
    assert str(failed.value) == (
        f"module {name!r} failed to import: JSONDecodeError: Expecting property name enclosed "
        f"in double quotes: line 1 column 2 (char 1) ({path}:3)"
    )


def test_a_module_that_declares_no_tool_is_a_one_line_warning(
    write_module: Any, caplog: pytest.LogCaptureFixture
) -> None:
    name, _ = write_module("VALUE = 1\n")
    registry = Registry.from_modules([name])
    line = (
        f"module {name!r} declares no tool, resource or prompt: mark its functions with @tool "
        "(a tool imported from another module counts only there)"
    )
    assert registry.tools == {} and registry.warnings == [line]
    assert [r.getMessage() for r in caplog.records if r.name == "mcpq.tools"] == [line]


@pytest.mark.parametrize(
    "module",
    [
        "mcpq.demo",
        "mcpq.conformance_fixtures",
        "mcpq.ops.bench.bench_tools",
        "tests.e2e.tools_fixture",
        "tests.clients.tools_clients",
        "tests.faults.tools_faults",
        "tests.multihost.tools_multihost",
        "tests.ops.tools_crash",
        "tests.ops.tools_pools",
    ],
)
def test_every_tool_of_the_repository_keeps_its_context(module: str) -> None:
    tools = Registry.from_modules([module]).tools.values()
    # Every tool that takes a `ctx` gets it as its context; one without (greet) takes none.
    assert tools and all(
        t.context == ("ctx" if "ctx" in inspect.signature(t.fn).parameters else None) for t in tools
    )
    assert any(t.context == "ctx" for t in tools)
    assert all("ctx" not in t.input_schema["properties"] for t in tools)


class Context:
    """What FastMCP and the MCP SDK call their context."""


def test_another_sdk_s_context_annotation_is_refused_naming_ours() -> None:
    def search(query: str, ctx: Context) -> str:
        return query

    code = search.__code__
    with pytest.raises(ToolDefinitionError) as refused:
        tool(search)
    assert str(refused.value) == (
        "tool 'search', parameter 'ctx': pydantic cannot build a JSON schema for its type "
        "Context: if it is the context, annotate it ToolContext (from mcpq import ToolContext) "
        f"({code.co_filename}:{code.co_firstlineno})"
    )


def test_a_wrapped_function_is_read_through_its_wrapper(write_module: Any) -> None:
    name, _ = write_module(
        """
        from __future__ import annotations

        import functools
        from decimal import Decimal

        from mcpq import ToolContext, tool


        def logged(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)

            return wrapper


        @tool
        @logged
        def price(amount: Decimal, ctx: ToolContext) -> str:
            return str(amount)
        """
    )
    priced = Registry.from_modules([name]).tools["price"]
    assert priced.context == "ctx"
    assert priced.call(object(), {"amount": "1.5"}) == "1.5"  # type: ignore[arg-type]


def test_task_takes_fastmcp_s_booleans_and_refuses_anything_else() -> None:
    registry = Registry()

    @registry.tool(task=True)
    def may(x: int) -> int:
        return x

    @registry.tool(task=False)
    def never(x: int) -> int:
        return x

    assert (registry.tools["may"].mode, registry.tools["never"].mode) == ("optional", "never")
    with pytest.raises(ToolDefinitionError) as refused:

        @registry.tool(task="sometimes")  # type: ignore[call-overload]
        def odd(x: int) -> int:
            return x

    assert str(refused.value).startswith(
        "odd: task must be 'never', 'optional' or 'required' (or True/False), not 'sometimes'"
    )
