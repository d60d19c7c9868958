"""The conformance suite's fixtures that ask the client: mid-run (``test_sampling``,
``test_elicitation`` and its SEP-1034/SEP-1330 forms: on a 2025-era call's stream) and the
``input-required-result-*`` family, which asks before it runs (MRTR: ``ask_first``, answered
through ``input_required`` rounds of ``tools/call``) or mid-run.
Served after ``mcpq.conformance_server`` (whose first tool the suite calls first) and beside
``mcpq.conformance_fixtures``; the same rules as those: the suite's names and outputs, plain
``@tool`` functions, raw JSON schemas sent as written. ``test_input_required_result_capabilities``
asks only what the caller declared it can answer (an ``ask_first`` of two parameters gets the
client's capabilities). ``test_input_required_result_prompt`` is a prompt that asks the same
way (``prompts/get`` rounds)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mcpq import Answered, Context, InputRequest, elicitation, prompt, sampling, tool
from mcpq.conformance_server import _NAME, _OK, _elicited, _form, _text


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


_CONTEXT = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
}


def _ask_context(arguments: dict[str, Any]) -> dict[str, InputRequest]:
    return {"user_context": elicitation("What context should the prompt use?", _CONTEXT)}


@prompt(ask_first=_ask_context)
def test_input_required_result_prompt(answers: Answered) -> str:
    """MRTR on prompts/get: asks for context, then renders a prompt with it."""
    return f"Use this context: {_form(answers['user_context']).get('context', '')}"
