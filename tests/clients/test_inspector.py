"""The MCP Inspector's CLI mode (``@modelcontextprotocol/inspector``, pinned in
``tests/clients/node/package.json``) against a live stack: ``mcp-inspector --cli URL
--transport http --method ...``, as ``npx @modelcontextprotocol/inspector`` runs it.

The CLI prints the JSON result on stdout and exits 0, or prints a JSON error envelope on stderr
and exits non-zero. Resources and prompts are ``tests.clients.resources_fixture``'s.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpq.ops.harness.stack import Stack
from tests.clients import resources_fixture as fixture
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


def test_cli_lists_resources_and_templates(node: NodeInstall, stack: Stack) -> None:
    ran, output = inspector(node, stack.url(0), "--method", "resources/list")
    listed = {r.get("uri"): r for r in output.get("resources", [])}
    assert {fixture.NOTES_URI, fixture.PIXEL_URI, fixture.BYTES_URI} <= listed.keys(), (
        ran.describe()
    )
    assert listed[fixture.NOTES_URI]["mimeType"] == "text/markdown", ran.describe()
    ran, output = inspector(node, stack.url(1), "--method", "resources/templates/list")
    templates = {t.get("uriTemplate") for t in output.get("resourceTemplates", [])}
    assert {fixture.COLORS_TEMPLATE, fixture.LINES_TEMPLATE} <= templates, ran.describe()


def test_cli_reads_a_resource(node: NodeInstall, stack: Stack) -> None:
    ran, output = inspector(
        node, stack.url(1), "--method", "resources/read", "--uri", "fixture://colors/navy"
    )
    (contents,) = output.get("contents", [])
    assert contents["uri"] == "fixture://colors/navy", ran.describe()
    assert json.loads(contents["text"]) == {"name": "navy", "hex": "#000080"}, ran.describe()


def test_cli_lists_and_gets_prompts(node: NodeInstall, stack: Stack) -> None:
    ran, output = inspector(node, stack.url(0), "--method", "prompts/list")
    prompts = {p.get("name"): p for p in output.get("prompts", [])}
    assert {"code_review", "incident_brief"} <= prompts.keys(), ran.describe()
    arguments = [(a["name"], a["required"]) for a in prompts["incident_brief"]["arguments"]]
    assert arguments == [("service", True), ("minutes", True)], ran.describe()
    ran, output = inspector(
        node,
        stack.url(0),
        "--method",
        "prompts/get",
        "--prompt-name",
        "code_review",
        "--prompt-args",
        "code=x = 1",
        "language=go",
    )
    (message,) = output.get("messages", [])
    assert message["content"]["text"] == "Review this go code (plain style):\n\nx = 1", (
        ran.describe()
    )
