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

What the suite asks for and mcpq cannot serve yet (see ``tests/conformance``, which pins each
such failure with its cause):

- ``test_input_required_result_prompt``: a prompt that asks through MRTR. A prompt gets no
  context and ``prompts/get`` has no ``input_required`` round, so it is not declared here.
- ``test_input_required_result_capabilities``: questions chosen by the capabilities the caller
  declared (``ask_first`` given them as its second parameter).
- ``test_trigger_tool_change`` / ``test_trigger_prompt_change``: no public API announces a
  changed tool or prompt list (a list changes when a replica starts serving another one); they
  use mcpq's own nudge (``mcpq.shared.store.announce``), and change nothing.
- ``test_reconnection`` (``server-sse-polling``): a tool cannot close its response stream for
  the client to resume it (``Last-Event-ID``); not declared.
- ``json_schema_2020_12_tool``: an input schema comes from the function's signature, so the
  top-level ``$schema``, ``allOf`` and ``if``/``then``/``else`` cannot be declared.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcpq import (
    Audio,
    Context,
    EmbeddedResource,
    Image,
    InputRequest,
    Message,
    ToolError,
    elicitation,
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


# -- tools: questions asked mid-run (2025-11-25: on the call's stream; 2026-07-28: MRTR) -----------
@tool(task="never")
def test_sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")],
    ctx: Context,
) -> str:
    """Asks the client's model to answer a prompt (tools-call-sampling)."""
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    answer = ctx.sample([message], max_tokens=100)
    return f"LLM response: {_text(answer)}"


_USER_FORM = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


@tool(task="never")
def test_elicitation(
    message: Annotated[str, Field(description="The message to show the user")],
    ctx: Context,
) -> str:
    """Asks the user for their name and e-mail (tools-call-elicitation)."""
    answer = ctx.elicit(message, _USER_FORM)
    return f"User response: {_elicited(answer)}"


_DEFAULTS_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


@tool(task="never")
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks a form whose fields have defaults (elicitation-sep1034-defaults)."""
    answer = ctx.elicit("Please review and update the form fields with defaults", _DEFAULTS_FORM)
    return f"Elicitation completed: {_elicited(answer)}"


def _choices(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": const, "title": title} for const, title in pairs]


_ENUMS_FORM = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Choose one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Choose one titled option",
            "oneOf": _choices(
                ("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")
            ),
        },
        "legacyEnum": {
            "type": "string",
            "description": "Choose one option (legacy enumNames)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Choose several options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Choose several titled options",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": _choices(
                    ("value1", "First Choice"),
                    ("value2", "Second Choice"),
                    ("value3", "Third Choice"),
                )
            },
        },
    },
    "required": [],
}


@tool(task="never")
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks a form of single and multiple choices, titled and not (elicitation-sep1330-enums)."""
    answer = ctx.elicit("Please select options from the enum fields", _ENUMS_FORM)
    return f"Elicitation completed: {_elicited(answer)}"


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


# -- tools: MRTR (input-required-result-*) -------------------------------------------------------
def _ask_user_name(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    return {"user_name": elicitation("What is your name?", _NAME)}


@tool(task="never", ask_first=_ask_user_name)
def test_input_required_result_elicitation(ctx: Context) -> str:
    """MRTR: asks the user's name, then greets them."""
    return f"Hello, {_form(ctx.prelude['user_name']).get('name', 'stranger')}!"


def _ask_capital(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    question = "What is the capital of France?"
    message = {"role": "user", "content": {"type": "text", "text": question}}
    return {"capital_question": sampling([message], 100)}


@tool(task="never", ask_first=_ask_capital)
def test_input_required_result_sampling(ctx: Context) -> str:
    """MRTR: asks the client's model a question, then repeats its answer."""
    return f"Sampling result: {_text(ctx.prelude['capital_question'])}"


_LIST_ROOTS: InputRequest = {"method": "roots/list", "params": {}}


def _ask_roots(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    return {"client_roots": dict(_LIST_ROOTS)}


def _roots(answer: dict[str, Any]) -> list[Any]:
    roots = answer.get("roots")
    return roots if isinstance(roots, list) else []


@tool(task="never", ask_first=_ask_roots)
def test_input_required_result_list_roots(ctx: Context) -> str:
    """MRTR: asks the client for its roots, then counts them."""
    return f"Found {len(_roots(ctx.prelude['client_roots']))} root(s)"


def _ask_confirm(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    return {"confirm": elicitation("Please confirm", _OK)}


@tool(task="never", ask_first=_ask_confirm)
def test_input_required_result_request_state(ctx: Context) -> str:
    """MRTR with a requestState: asks for a confirmation; the retry echoes the state."""
    return f"state-ok: requestState validated (ok={_form(ctx.prelude['confirm']).get('ok')})"


def _ask_three(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    greeting = {"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}
    return {
        "user_name": elicitation("What is your name?", _NAME),
        "greeting": sampling([greeting], 50),
        "client_roots": dict(_LIST_ROOTS),
    }


@tool(task="never", ask_first=_ask_three)
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """MRTR: an elicitation, a sampling and a roots request in one round."""
    pre = ctx.prelude
    name = _form(pre["user_name"]).get("name")
    greeting, roots = _text(pre["greeting"]), len(_roots(pre["client_roots"]))
    return f"Name: {name}; Greeting: {greeting}; Roots: {roots}"


_COLOR = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}


@tool(task="never")
def test_input_required_result_multi_round(ctx: Context) -> str:
    """MRTR over two rounds: the second question comes only after the first is answered."""
    name = _form(ctx.elicit("Step 1: What is your name?", _NAME)).get("name")
    color = _form(ctx.elicit("Step 2: What is your favorite color?", _COLOR)).get("color")
    return f"Multi-round complete for {name} who likes {color}"


@tool(task="never", ask_first=_ask_confirm)
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """MRTR whose requestState is sealed: a retry with an altered state is refused."""
    return f"integrity-ok: state verified (ok={_form(ctx.prelude['confirm']).get('ok')})"


_VALUE = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def _ask_both(arguments: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, InputRequest]:
    # Only what the caller declared it can answer (an ask_first of two parameters gets them).
    sample = {"role": "user", "content": {"type": "text", "text": "Sample request"}}
    questions: dict[str, InputRequest] = {}
    if "elicitation" in capabilities:
        questions["elicit_input"] = elicitation("Elicitation input", _VALUE)
    if "sampling" in capabilities:
        questions["sample_input"] = sampling([sample], 50)
    return questions


@tool(task="never", ask_first=_ask_both)
def test_input_required_result_capabilities(ctx: Context) -> str:
    """MRTR that asks only what the client declared it can answer (elicitation, sampling)."""
    return f"capabilities-ok: received {', '.join(sorted(ctx.prelude))}"


# -- tools: schemas and headers ------------------------------------------------------------------
class address(BaseModel):  # noqa: N801 -- the suite reads inputSchema.$defs.address
    """A postal address."""

    model_config = ConfigDict(json_schema_extra={"$anchor": "addressDef"})

    street: str | None = None
    city: str | None = None


@tool(task="never")
def json_schema_2020_12_tool(
    name: str | None = None,
    address: address | None = None,
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
