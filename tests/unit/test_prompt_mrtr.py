"""MRTR on ``prompts/get`` (SEP-2322: ``input_required`` is not only for tools): a prompt's
``ask_first`` questions, answered through rounds with a sealed ``requestState``; the function gets
the answers in its :class:`~mcpq.Answered` parameter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpq import Answered, App, elicitation, sampling
from mcpq.shared.errors import MISSING_CAPABILITY
from mcpq.shared.registry import Registry
from mcpq.shared.tool_signature import ToolDefinitionError
from tests.unit.fakes import Mcp, Reply
from tests.unit.test_legacy import Session

ELICIT: dict[str, Any] = {"elicitation": {}}
FOCUS = {"type": "object", "properties": {"focus": {"type": "string"}}, "required": ["focus"]}
SECURITY = {"action": "accept", "content": {"focus": "security"}}

app = App("reviews")


def _ask_focus(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"focus": elicitation(f"What should the {arguments['language']} review stress?", FOCUS)}


@app.prompt(ask_first=_ask_focus)
def review(code: str, answers: Answered, language: str = "python") -> str:
    """Review code, stressing what the user chose."""
    return f"Review this {language} code for {answers['focus']['content']['focus']}:\n{code}"


def _ask_model(arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": "a title"}}
    return {"title": sampling([message], 20)}


@app.prompt(ask_first=_ask_model)
def titled(answers: Answered) -> str:
    return str(answers["title"]["content"]["text"])


@pytest.fixture
def reviews(make_mcp: Callable[..., Mcp]) -> Mcp:
    registry = Registry()
    registry._add_app(app)
    return make_mcp(tools=registry)


def get(mcp: Mcp, arguments: dict[str, str], **extra: Any) -> Reply:
    caps = extra.pop("caps", ELICIT)
    params = {"name": extra.pop("name", "review"), "arguments": arguments, **extra}
    return mcp.post("prompts/get", params, opt_in=False, caps=caps)


def test_a_prompt_asks_first_then_renders_with_the_answers(reviews: Mcp) -> None:
    first = get(reviews, {"code": "x = 1"})
    assert first.status == 200, first.content
    asked = first.result
    assert asked["resultType"] == "input_required"
    assert asked["inputRequests"] == {
        "focus": elicitation("What should the python review stress?", FOCUS)
    }
    state = asked["requestState"]
    done = get(reviews, {"code": "x = 1"}, requestState=state, inputResponses={"focus": SECURITY})
    assert done.status == 200, done.content
    assert done.result["resultType"] == "complete"
    text = done.result["messages"][0]["content"]["text"]
    assert text == "Review this python code for security:\nx = 1"
    # Nothing is created by a render: the same state and answers render again.
    again = get(reviews, {"code": "x = 1"}, requestState=state, inputResponses={"focus": SECURITY})
    assert again.result["messages"] == done.result["messages"]


def test_answers_in_the_first_call_need_no_round(reviews: Mcp) -> None:
    done = get(reviews, {"code": "y"}, inputResponses={"focus": SECURITY})
    assert done.result["resultType"] == "complete"


def test_an_answer_that_fails_its_schema_is_32602_as_on_tools_call(reviews: Mcp) -> None:
    wrong = {"action": "accept", "content": {"colour": "blue"}}
    reply = get(reviews, {"code": "y"}, inputResponses={"focus": wrong})
    assert reply.code() == (400, -32602)
    assert "does not match the requested schema" in reply.error["message"]


def test_an_answer_to_another_key_is_asked_again(reviews: Mcp) -> None:
    again = get(reviews, {"code": "y"}, inputResponses={"other": SECURITY}).result
    assert again["resultType"] == "input_required" and set(again["inputRequests"]) == {"focus"}


def test_a_state_for_other_arguments_or_tampered_is_32602(reviews: Mcp) -> None:
    state = get(reviews, {"code": "x = 1"}).result["requestState"]
    other = get(reviews, {"code": "rm -rf /"}, requestState=state, inputResponses={})
    assert other.code() == (400, -32602)
    tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    bad = get(reviews, {"code": "x = 1"}, requestState=tampered)
    assert bad.code() == (400, -32602)
    assert "Traceback" not in bad.content.decode()


def test_a_question_the_client_cannot_answer_is_missing_capability(reviews: Mcp) -> None:
    reply = get(reviews, {}, name="titled", caps={})
    assert reply.error["code"] == MISSING_CAPABILITY
    assert reply.error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_a_2025_session_is_told_the_prompt_needs_2026(reviews: Mcp) -> None:
    session = Session(reviews)
    reply = session.request("prompts/get", {"name": "review", "arguments": {"code": "y"}})
    assert reply.code() == (200, -32602)
    assert "2026-07-28" in reply.error["message"]


def test_answered_without_ask_first_is_refused_at_declaration() -> None:
    with pytest.raises(ToolDefinitionError, match="ask_first"):

        @App("x").prompt
        def lonely(answers: Answered) -> str:
            return ""
