"""The MCP Inspector's CLI mode (``@modelcontextprotocol/inspector``, pinned in
``tests/clients/node/package.json``) against a live stack: ``mcp-inspector --cli URL
--transport http --method ...``, as ``npx @modelcontextprotocol/inspector`` runs it.

The CLI prints the JSON result on stdout and exits 0, or prints a JSON error envelope on stderr
and exits non-zero.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
from tests.clients.node_clients import NodeInstall, NodeRun, installed_or_skip, run_inspector_cli

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def node() -> NodeInstall:
    return installed_or_skip()


def inspector(node: NodeInstall, url: str, *args: str) -> tuple[NodeRun, dict[str, Any]]:
    """Run the CLI and require exit 0 and a JSON object on stdout."""
    ran = run_inspector_cli(node, [url, "--transport", "http", *args])
    if ran.returncode != 0:
        pytest.fail(ran.describe())
    try:
        output = json.loads(ran.stdout)
    except ValueError:
        pytest.fail(f"stdout is not JSON\n{ran.describe()}")
    assert isinstance(output, dict), ran.describe()
    return ran, output


def test_cli_lists_tools(node: NodeInstall, stack: Stack) -> None:
    ran, output = inspector(node, stack.url(0), "--method", "tools/list")
    names = {tool.get("name") for tool in output.get("tools", [])}
    assert {"greet", "ask_color", "count_up"} <= names, ran.describe()


def test_cli_calls_a_tool(node: NodeInstall, stack: Stack) -> None:
    ran, output = inspector(
        node,
        stack.url(1),
        "--method",
        "tools/call",
        "--tool-name",
        "greet",
        "--tool-arg",
        "name=Ada",
    )
    texts = [c.get("text") for c in output.get("content", []) if c.get("type") == "text"]
    assert texts == ["Hello, Ada!"], ran.describe()
    assert not output.get("isError"), ran.describe()
