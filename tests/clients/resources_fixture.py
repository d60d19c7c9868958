"""Test-only resources, resource templates and prompts for the real-client tests
(``tests/clients``, and ``tests/e2e/test_sdk_resources.py`` for the ``mcp`` 2.3 client).

Served beside the built-in tools through ``MCPQ_TOOLS`` (``tests.clients.conftest``), so the
clients read what is written here rather than the demo's content. Plain module-level
``@resource`` / ``@prompt`` functions on the public API, under a scheme of their own
(``fixture://``) that no bundled module uses. The values are constants: a test compares what a
client decoded with them.
"""

from __future__ import annotations

import base64
from typing import Annotated

from pydantic import Field

from mcpq import EmbeddedResource, Image, Message, ToolError, prompt, resource

NOTES_URI = "fixture://notes/release"
NOTES = "# Release notes\n\nVersion 2 ships on Friday: ünïcode survives the wire.\n"
PIXEL_URI = "fixture://images/pixel.png"
#: A 1x1 PNG (a real one: clients may look at it).
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
BYTES_URI = "fixture://blobs/all-bytes"
#: Every byte value once: a blob that survives base64 both ways only if nothing reinterprets it.
ALL_BYTES = bytes(range(256))
COLORS_TEMPLATE = "fixture://colors/{name}"
COLORS = {"teal": "#008080", "tan": "#d2b48c", "tomato": "#ff6347", "navy": "#000080"}
LINES_TEMPLATE = "fixture://orders/{order_id}/lines/{line}"
LANGUAGES = ("python", "perl", "php", "go", "rust")
STYLES = {"python": ("pep8", "typed"), "go": ("gofmt",)}


@resource(NOTES_URI, mime_type="text/markdown", title="Release notes")
def release_notes() -> str:
    """The release notes (a text resource)."""
    return NOTES


@resource(PIXEL_URI, mime_type="image/png", title="Pixel")
def pixel() -> bytes:
    """A 1x1 PNG (a binary resource)."""
    return PIXEL


@resource(BYTES_URI)
def all_bytes() -> bytes:
    """Every byte value once (a blob with no MIME type of its own)."""
    return ALL_BYTES


@resource(COLORS_TEMPLATE, mime_type="application/json", complete={"name": sorted(COLORS)})
def color(name: str) -> dict[str, str]:
    """A colour by its name (a template; its variable completes from a list)."""
    if name not in COLORS:
        raise ToolError(f"no colour named {name}")
    return {"name": name, "hex": COLORS[name]}


@resource(LINES_TEMPLATE, mime_type="text/plain")
def order_line(order_id: int, line: Annotated[int, Field(ge=1)]) -> str:
    """One line of an order (a template of two typed variables)."""
    return f"order {order_id}, line {line}"


def _languages(value: str, chosen: dict[str, str]) -> list[str]:
    return [language for language in LANGUAGES if language.startswith(value)]


def _styles(value: str, chosen: dict[str, str]) -> list[str]:
    """Depends on the language already chosen (the request's ``context.arguments``)."""
    styles = STYLES.get(chosen.get("language", ""), ("plain",))
    return [style for style in styles if style.startswith(value)]


@prompt(title="Code review", complete={"language": _languages, "style": _styles})
def code_review(
    code: Annotated[str, Field(description="The code to review")],
    language: str = "python",
    style: str = "plain",
) -> str:
    """Asks for a review of a piece of code."""
    return f"Review this {language} code ({style} style):\n\n{code}"


@prompt("incident_brief", description="A conversation about an incident, with attachments.")
def incident(service: str, minutes: int) -> list[Message]:
    return [
        Message(f"{service} was down for {minutes} minutes. Write the incident brief."),
        Message(
            f"I will start from the release notes ({minutes * 60} s of downtime).", "assistant"
        ),
        Message(EmbeddedResource(NOTES_URI, text=NOTES, mime_type="text/markdown")),
        Message(Image(PIXEL, mime_type="image/png")),
    ]
