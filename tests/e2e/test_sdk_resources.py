"""The official Python SDK (``mcp`` 2.3.x) as the client, 2026-07-28: resources, resource
templates, prompts, completion, log levels and ``subscriptions/listen``, through the SDK's own
``Client`` methods.

The resources and prompts are ``tests.clients.resources_fixture``'s (the real-client tests read
the same ones on the 2025-era wire), the logging tool ``tests.clients.tools_clients``'s
``log_levels``. The e2e session stack does not serve them, so this module starts a stack of its
own: one Redis, one web, one io-pool worker. Log messages need no ``logging/setLevel`` here
(2026-07-28 has none): the SDK's ``log_level`` stamps
``_meta["io.modelcontextprotocol/logLevel"]`` on every request, and without it no message comes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.subscriptions import PromptsListChanged, ResourceUpdated, ToolsListChanged

from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store.announce import announce_list_changed, announce_updated
from tests.clients import resources_fixture as fixture
from tests.support.anyio_run import run
from tests.support.stacks import LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TOOLS = f"{DEFAULT_TOOLS},tests.clients.tools_clients,tests.clients.resources_fixture"
CLIENT_INFO = types.Implementation(name="mcpq-e2e-sdk-resources", version="1.0.0")
MODERN = "2026-07-28"
Logged = tuple[str, str | None, Any]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = LiveStack("sdk-resources", tmp_path_factory.mktemp("sdk-resources"), tools=TOOLS)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def sdk(stack: Stack, **options: Any) -> Client:
    return Client(stack.url(0), client_info=CLIENT_INFO, **options)


def test_resources_listed_and_read_text_binary_and_templates(stack: Stack) -> None:
    async def main() -> None:
        async with sdk(stack) as client:
            assert client.protocol_version == MODERN
            capabilities = client.server_capabilities
            assert capabilities is not None
            assert capabilities.resources is not None and capabilities.prompts is not None
            assert capabilities.completions is not None and capabilities.logging is not None

            listed = await client.list_resources()
            resources = {r.uri: r for r in listed.resources}
            notes = resources[fixture.NOTES_URI]
            assert (notes.name, notes.title, notes.mime_type) == (
                "release_notes",
                "Release notes",
                "text/markdown",
            )
            assert notes.description == "The release notes (a text resource)."
            assert resources[fixture.PIXEL_URI].mime_type == "image/png"
            assert (listed.ttl_ms, listed.cache_scope) == (0, "private")
            templates = await client.list_resource_templates()
            uris = {t.uri_template: t for t in templates.resource_templates}
            assert {fixture.COLORS_TEMPLATE, fixture.LINES_TEMPLATE} <= uris.keys()
            assert uris[fixture.COLORS_TEMPLATE].mime_type == "application/json"

            (text,) = (await client.read_resource(fixture.NOTES_URI)).contents
            assert isinstance(text, types.TextResourceContents), text
            assert (text.uri, text.mime_type, text.text) == (
                fixture.NOTES_URI,
                "text/markdown",
                fixture.NOTES,
            )
            (png,) = (await client.read_resource(fixture.PIXEL_URI)).contents
            assert isinstance(png, types.BlobResourceContents), png
            assert png.mime_type == "image/png"
            assert base64.b64decode(png.blob) == fixture.PIXEL
            (raw,) = (await client.read_resource(fixture.BYTES_URI)).contents
            assert isinstance(raw, types.BlobResourceContents), raw
            assert raw.mime_type == "application/octet-stream"
            assert base64.b64decode(raw.blob) == fixture.ALL_BYTES
            (color,) = (await client.read_resource("fixture://colors/tomato")).contents
            assert isinstance(color, types.TextResourceContents), color
            assert json.loads(color.text) == {"name": "tomato", "hex": "#ff6347"}
            (line,) = (await client.read_resource("fixture://orders/3/lines/4")).contents
            assert isinstance(line, types.TextResourceContents), line
            assert line.text == "order 3, line 4"

    run(main)


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("fixture://nothing", "Resource not found"),
        ("fixture://orders/3/lines/x", "line"),
        ("fixture://colors/%2e%2e%2fsecret", "Resource not found"),
    ],
    ids=["unknown", "mistyped-variable", "traversal"],
)
def test_a_refused_read_is_32602(stack: Stack, uri: str, says: str) -> None:
    refused: list[MCPError] = []

    async def main() -> None:
        async with sdk(stack) as client:
            with pytest.raises(MCPError) as raised:
                await client.read_resource(uri)
            refused.append(raised.value)

    run(main)
    (error,) = refused
    assert error.error.code == -32602 and says in error.error.message, error.error
    assert error.error.data == {"uri": uri}, error.error


def test_a_resource_s_tool_error_is_its_words(stack: Stack) -> None:
    """``ToolError`` in a template's function: its text reaches the client (-32603)."""
    refused: list[MCPError] = []

    async def main() -> None:
        async with sdk(stack) as client:
            with pytest.raises(MCPError) as raised:
                await client.read_resource("fixture://colors/mauve")
            refused.append(raised.value)

    run(main)
    (error,) = refused
    assert (error.error.code, error.error.message) == (-32603, "no colour named mauve")


def test_prompts_listed_got_with_arguments_and_completed(stack: Stack) -> None:
    async def main() -> None:
        async with sdk(stack) as client:
            listed = await client.list_prompts()
            prompts = {p.name: p for p in listed.prompts}
            review = prompts["code_review"]
            assert review.title == "Code review"
            assert review.description == "Asks for a review of a piece of code."
            assert [(a.name, a.required, a.description) for a in review.arguments or []] == [
                ("code", True, "The code to review"),
                ("language", False, None),
                ("style", False, None),
            ]

            got = await client.get_prompt(
                "code_review", {"code": "fn main() {}", "language": "rust"}
            )
            assert got.description == "Asks for a review of a piece of code."
            (message,) = got.messages
            assert message.role == "user" and isinstance(message.content, types.TextContent)
            assert message.content.text == "Review this rust code (plain style):\n\nfn main() {}"

            incident = await client.get_prompt("incident_brief", {"service": "api", "minutes": "5"})
            shapes = [(m.role, type(m.content).__name__) for m in incident.messages]
            assert shapes == [
                ("user", "TextContent"),
                ("assistant", "TextContent"),
                ("user", "EmbeddedResource"),
                ("user", "ImageContent"),
            ]
            embedded = incident.messages[2].content
            assert isinstance(embedded, types.EmbeddedResource)
            assert isinstance(embedded.resource, types.TextResourceContents)
            assert embedded.resource.text == fixture.NOTES
            image = incident.messages[3].content
            assert isinstance(image, types.ImageContent)
            assert base64.b64decode(image.data) == fixture.PIXEL

            with pytest.raises(MCPError) as refused:
                await client.get_prompt("incident_brief", {"service": "api", "minutes": "x"})
            assert refused.value.error.code == -32602 and "minutes" in refused.value.error.message

            prompt = types.PromptReference(type="ref/prompt", name="code_review")
            languages = await client.complete(prompt, {"name": "language", "value": "p"})
            assert languages.completion.values == ["python", "perl", "php"]
            assert (languages.completion.total, languages.completion.has_more) == (3, False)
            styles = await client.complete(
                prompt, {"name": "style", "value": "t"}, context_arguments={"language": "python"}
            )
            assert styles.completion.values == ["typed"]
            template = types.ResourceTemplateReference(
                type="ref/resource", uri=fixture.COLORS_TEMPLATE
            )
            names = await client.complete(template, {"name": "name", "value": "ta"})
            assert names.completion.values == ["tan"]

    run(main)


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (None, []),
        (
            "warning",
            [
                ("warning", None, {"label": "sdk", "level": "warning"}),
                ("error", "clients.fixture", "sdk: error"),
            ],
        ),
        (
            "debug",
            [
                ("debug", None, "sdk: debug"),
                ("info", "clients.fixture", "sdk: info"),
                ("warning", None, {"label": "sdk", "level": "warning"}),
                ("error", "clients.fixture", "sdk: error"),
            ],
        ),
    ],
    ids=["no-log-level", "warning", "debug"],
)
def test_a_synchronous_call_gets_the_log_messages_of_its_level(
    stack: Stack, level: types.LoggingLevel | None, expected: list[Logged]
) -> None:
    logs: list[Logged] = []
    texts: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.logger, params.data))

    async def main() -> None:
        async with sdk(stack, log_level=level, logging_callback=on_log) as client:
            assert client.protocol_version == MODERN
            result = await client.call_tool("log_levels", {"label": "sdk"})
            texts.extend(c.text for c in result.content if isinstance(c, types.TextContent))
            texts.append(f"logs at the result: {len(logs)}")

    run(main)
    assert texts == ["logged 4 messages (sdk)", f"logs at the result: {len(expected)}"]
    assert logs == expected


def test_a_listener_hears_of_a_change_announced_by_another_process(stack: Stack) -> None:
    """``Client.listen`` (``subscriptions/listen``): an update of the URI it named and a changed
    prompt list, announced from this process (not the web's) through Redis; the tool list,
    which it did not ask about, says nothing. Announced until heard: a notice reaches only the
    streams open when it is published, and the stream opens on another task of this loop."""
    uri = "fixture://colors/navy"
    heard: list[Any] = []

    async def announce_until(done: anyio.Event) -> None:
        while not done.is_set():
            await anyio.to_thread.run_sync(announce_list_changed, ["tools"], stack.store())
            await anyio.to_thread.run_sync(announce_updated, uri, stack.store())
            await anyio.to_thread.run_sync(announce_list_changed, ["prompts"], stack.store())
            await anyio.sleep(0.3)

    async def main() -> None:
        async with sdk(stack) as client, anyio.create_task_group() as tasks:
            listening = client.listen(resource_subscriptions=[uri], prompts_list_changed=True)
            async with listening as subscription:
                honored = subscription.honored
                assert list(honored.resource_subscriptions or []) == [uri], honored
                assert honored.prompts_list_changed and not honored.tools_list_changed, honored
                done = anyio.Event()
                tasks.start_soon(announce_until, done)
                with anyio.fail_after(30):
                    async for event in subscription:
                        heard.append(event)
                        if {type(e) for e in heard} == {ResourceUpdated, PromptsListChanged}:
                            break
                done.set()

    run(main)
    assert ResourceUpdated(uri) in heard, heard
    assert PromptsListChanged() in heard, heard
    assert not [e for e in heard if isinstance(e, ToolsListChanged)], heard
