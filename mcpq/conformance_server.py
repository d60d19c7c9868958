"""The fixtures of the official MCP conformance suite's server scenarios (everything but the tasks
ones, which are ``mcpq.conformance_fixtures``): the ``test_*`` tools, the ``test://`` resources
and template, and the ``test_*`` prompts.

Names, inputs and outputs are fixed by the suite (``@modelcontextprotocol/conformance``, run by
``ops/harness/conformance_runner.py``, served beside ``mcpq.conformance_fixtures``). Plain
``@tool``/``@resource``/``@prompt`` functions, not an ``App``: the module names no server.

The order is the suite's: the first tool (``test_simple_text``) answers ``arguments: {}`` with a
plain result (``http-header-validation`` calls whichever tool is listed first), every tool and
prompt has a description (``tools-list``, ``prompts-list``), and the first resource is a cheap
read (``caching`` reads it). Questions are raw JSON schemas, sent exactly as written.

The tools and the prompt that ask the client (mid-run, and the ``input-required-result-*``
family) are ``mcpq.conformance_questions``.

What the suite asks for and mcpq serves differently or not at all:

- ``test_trigger_tool_change`` / ``test_trigger_prompt_change``: no public API announces a
  changed tool or prompt list (a list changes when a replica starts serving another one); they
  use mcpq's own nudge (``mcpq.shared.store.announce``), and change nothing.
- ``test_reconnection`` (``server-sse-polling``): a tool cannot close its response stream for
  the client to resume it (``Last-Event-ID``); not declared.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from pydantic import Field

from mcpq import (
    Audio,
    Context,
    EmbeddedResource,
    Image,
    InputRequest,
    Message,
    ToolError,
    prompt,
    resource,
    sampling,
    tool,
)

#: A 1x1 PNG and a minimal RIFF/WAVE header (the suite's own constants), base64.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)
WAV_MIN = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

#: Between two progress reports: longer than the web tier's coalescing of reports
#: (``MCPQ_REPORT_DELAY_MS``, 100 ms), so that each one reaches the stream on its own.
PROGRESS_PAUSE_S = 0.3
#: Between two log messages (the suite's reference spaces them 50 ms apart).
LOG_PAUSE_S = 0.05

_NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _text(answer: dict[str, Any]) -> str:
    """The text of a sampling answer (``CreateMessageResult``), or ``""``."""
    content = answer.get("content")
    blocks = content if isinstance(content, list) else [content]
    return "".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )


def _form(answer: dict[str, Any]) -> dict[str, Any]:
    """The content of an elicitation answer (``ElicitResult``), ``{}`` unless accepted."""
    content = answer.get("content")
    return content if answer.get("action") == "accept" and isinstance(content, dict) else {}


def _elicited(answer: dict[str, Any]) -> str:
    content = json.dumps(answer.get("content"), separators=(",", ":"))
    return f"action={answer.get('action')}, content={content}"


# -- tools: content ------------------------------------------------------------------------------
@tool(task="never")
def test_simple_text() -> str:
    """Returns a simple text response (tools-call-simple-text)."""
    return "This is a simple text response for testing."


@tool(task="never")
def test_image_content() -> Image:
    """Returns a 1x1 PNG image (tools-call-image)."""
    return Image(PNG_1X1, mime_type="image/png")


@tool(task="never")
def test_audio_content() -> Audio:
    """Returns a short WAV audio clip (tools-call-audio)."""
    return Audio(WAV_MIN, mime_type="audio/wav")


@tool(task="never")
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource (tools-call-embedded-resource)."""
    return EmbeddedResource(
        "test://embedded-resource",
        text="This is an embedded resource content.",
        mime_type="text/plain",
    )


@tool(task="never")
def test_multiple_content_types() -> list[str | Image | EmbeddedResource]:
    """Returns text, an image and an embedded resource (tools-call-mixed-content)."""
    data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
    return [
        "Multiple content types test:",
        Image(PNG_1X1, mime_type="image/png"),
        EmbeddedResource("test://mixed-content-resource", text=data, mime_type="application/json"),
    ]


@tool(task="never")
def test_error_handling() -> str:
    """Always fails with a tool execution error (tools-call-error)."""
    raise ToolError("This tool intentionally returns an error for testing")


# -- tools: progress and logs --------------------------------------------------------------------
@tool(task="never")
def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 before it answers (tools-call-with-progress)."""
    for step in (0, 50, 100):
        ctx.report_progress(step, 100, f"Completed step {step} of 100")
        ctx.sleep(PROGRESS_PAUSE_S)
    return "Progress test completed"


@tool(task="never")
def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs (tools-call-with-logging)."""
    ctx.info("Tool execution started", logger_name="conformance")
    ctx.sleep(LOG_PAUSE_S)
    ctx.info("Tool processing data", logger_name="conformance")
    ctx.sleep(LOG_PAUSE_S)
    ctx.info("Tool execution completed", logger_name="conformance")
    return "Tool with logging executed successfully"


@tool(task="never")
def test_logging_tool(ctx: Context) -> str:
    """Logs one info message: sent only to a request that set a log level (server-stateless)."""
    ctx.info("test_logging_tool ran", logger_name="conformance")
    return "Logging evaluated"


# -- tools: the stateless wire (server-stateless) ------------------------------------------------
def _ask_sampling(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    message = {"role": "user", "content": {"type": "text", "text": "Say hello."}}
    return {"hello": sampling([message], 20)}


@tool(task="never", ask_first=_ask_sampling)
def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability before it runs: a caller without it gets -32021."""
    return f"Success: {_text(ctx.prelude['hello'])}"


def _announce(name: str) -> str:
    # NOTE: mcpq's own nudge (no public API announces a list change: a list changes when a
    # replica starts serving another one). Nothing is added or removed: tools/list stays the
    # same on every replica (tools-list-deterministic-order), as in the suite's reference.
    from mcpq.shared.store.announce import announce_list_changed  # (loads redis-py)

    announce_list_changed([name])
    return f"{name} list change announced"


@tool(task="never")
def test_trigger_tool_change() -> str:
    """Announces a changed tool list to the subscriptions/listen streams that asked for it."""
    return _announce("tools")


@tool(task="never")
def test_trigger_prompt_change() -> str:
    """Announces a changed prompt list to the subscriptions/listen streams that asked for it."""
    return _announce("prompts")


_CONFIRM_STREAM = {
    "type": "object",
    "properties": {"proceed": {"type": "boolean"}},
    "required": ["proceed"],
}


@tool(task="never")
def test_streaming_elicitation(ctx: Context) -> str:
    """Reports progress, then asks the user: an input_required result on 2026-07-28, never a
    request on the response stream (server-stateless)."""
    ctx.report_progress(1, 2, "about to ask")
    answer = ctx.elicit("Proceed with the streaming test?", _CONFIRM_STREAM)
    return f"Streaming complete: {_elicited(answer)}"


# -- tools: schemas and headers ------------------------------------------------------------------
#: The suite's schema (json-schema-2020-12), declared as written: a signature cannot say the
#: top-level $schema, allOf/anyOf across arguments or if/then/else.
_CONTACT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@tool(task="never", input_schema=_CONTACT_SCHEMA)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: Literal["phone", "email"] | None = None,  # noqa: N803 -- the suite's name
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return f"name={name}, contact={contactMethod}"


@tool(task="never")
def test_x_mcp_header(
    region: Annotated[
        str, Field(description="Routing region", json_schema_extra={"x-mcp-header": "Region"})
    ],
) -> str:
    """Echoes a parameter that clients mirror into the Mcp-Param-Region header (SEP-2243)."""
    return f"region={region}"


# -- resources -----------------------------------------------------------------------------------
@resource(
    "test://static-text",
    name="static-text",
    title="Static Text Resource",
    description="A static text resource for testing",
    mime_type="text/plain",
)
def static_text() -> str:
    return "This is the content of the static text resource."


@resource(
    "test://static-binary",
    name="static-binary",
    title="Static Binary Resource",
    description="A static binary resource (image) for testing",
    mime_type="image/png",
)
def static_binary() -> bytes:
    return base64.b64decode(PNG_1X1)


@resource(
    "test://watched-resource",
    name="watched-resource",
    title="Watched Resource",
    description="A resource clients may subscribe to",
    mime_type="text/plain",
)
def watched_resource() -> str:
    return "Watched resource content"


@resource(
    "test://template/{id}/data",
    name="template",
    title="Resource Template",
    description="A resource template with parameter substitution",
    mime_type="application/json",
    complete={"id": ["1", "123", "42"]},
)
def template_data(id: str) -> str:  # the template's variable is named id
    body = {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}
    return json.dumps(body, separators=(",", ":"))


# -- prompts -------------------------------------------------------------------------------------
@prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."


@prompt(complete={"arg1": ["test", "testValue1", "other"], "arg2": ["testValue2"]})
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with required arguments"""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@prompt
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[  # noqa: N803 -- the suite's name
        str, Field(description="URI of the resource to embed")
    ],
) -> list[Message]:
    """A prompt that includes an embedded resource"""
    text = "Embedded resource content for testing."
    return [
        Message(EmbeddedResource(resourceUri, text=text, mime_type="text/plain")),
        Message("Please process the embedded resource above."),
    ]


@prompt
def test_prompt_with_image() -> list[Message]:
    """A prompt that includes image content"""
    return [
        Message(Image(PNG_1X1, mime_type="image/png")),
        Message("Please analyze the image above."),
    ]
