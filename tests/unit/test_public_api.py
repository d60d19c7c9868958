"""The public API is ``mcpq``'s namespace: a tool module written against it alone type-checks
under ``mypy --strict``, imports nothing else of ours, and is served as written; the docs and the
bundled tools teach only those names."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mcpq
from mcpq.shared.registry import Registry

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "support" / "public_api_tools.py"
#: The same in the app idiom (``App``, ``Context``).
APP_EXAMPLE = REPO / "tests" / "support" / "app_tools.py"
#: Where tool authors and client users read their examples.
TEACHING = [REPO / "README.md", REPO / "docs" / "client.md", REPO / "mcpq" / "demo.py"]
TEACHING.append(REPO / "mcpq" / "conformance_fixtures.py")


def test_the_public_names_are_exported() -> None:
    public = ("App", "Context", "tool", "ToolContext", "ToolError", "TaskCancelled")
    for name in (*public, "ProtocolError", "elicitation", "sampling"):
        assert name in mcpq.__all__ and hasattr(mcpq, name), name


def test_a_tool_module_on_the_public_api_passes_mypy_strict() -> None:
    # pyproject's [tool.mypy] is strict; a file named on the command line replaces its packages.
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", *(str(p.relative_to(REPO)) for p in (EXAMPLE, APP_EXAMPLE))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("example", [EXAMPLE, APP_EXAMPLE], ids=["functions", "app"])
def test_the_example_imports_only_mcpq_of_ours(example: Path) -> None:
    names = {
        node.module or ""
        for node in ast.walk(ast.parse(example.read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    assert {name for name in names if name.startswith("mcpq")} == {"mcpq"}


def test_the_example_is_served_as_written() -> None:
    registry = Registry.from_modules(["tests.support.public_api_tools"])
    assert list(registry.tools) == ["add", "deploy", "review", "wait_and_ask"]
    assert registry.tools["add"].input_schema["required"] == ["a", "b"]
    assert registry.tools["review"].input_schema["required"] == ["text"]
    assert registry.tools["deploy"].mode == "required"


def test_the_docs_and_bundled_tools_teach_only_the_public_names() -> None:
    """``from mcpq.shared…`` in an example would teach an internal module."""
    internal = re.compile(r"(from|import) mcpq\.(shared|frontend|workers|ops)\b")
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in TEACHING
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if internal.search(line)
    ]
    assert found == []


def test_the_readme_s_first_tool_is_a_plain_function_with_a_bare_decorator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's first example, as written: ``@tool`` bare, no context, every argument in
    the schema, and the call as the worker makes it."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (first,) = [block for block in blocks if "@tool\ndef " in block]
    (tmp_path / "readme_first_tool.py").write_text(first)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry = Registry.from_modules(["readme_first_tool"])
    finally:
        sys.modules.pop("readme_first_tool", None)
    [(name, spec)] = registry.tools.items()
    assert name == "add"
    assert spec.input_schema["required"] == ["a", "b"]
    assert spec.call(None, {"a": 2, "b": 3}) == 5  # type: ignore[arg-type]


def test_the_readme_s_app_example_is_served_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (example,) = [block for block in blocks if "@app.tool" in block]
    (tmp_path / "readme_app.py").write_text(example)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry = Registry.from_modules(["readme_app:app"])
    finally:
        sys.modules.pop("readme_app", None)
    assert registry.server_name == "shop"
    assert registry.tools["refund"].mode == "required"
    assert registry.tools["refund"].input_schema["required"] == ["order_id"]
