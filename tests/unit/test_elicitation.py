"""Typed elicitation (``mcpq.shared.elicitation``): the form a model is asked as, and the
typed result of the client's answer."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass

import pydantic
import pytest

from mcpq.shared.elicitation import Elicited, form


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Order(pydantic.BaseModel):
    item: str
    count: int = 1
    size: Size
    note: str | None = None


@dataclass
class Refund:
    cents: int
    ok: bool


class Nested(pydantic.BaseModel):
    order: Order


def test_a_pydantic_model_is_a_flat_form() -> None:
    asked = form(Order)
    assert not asked.wrapped
    schema = asked.schema
    assert schema["type"] == "object"
    assert schema["required"] == ["item", "size"]
    assert schema["properties"]["size"]["enum"] == ["small", "large"]  # inlined, no $ref
    assert schema["properties"]["note"]["type"] == "string"  # str | None: its one branch
    assert "default" not in schema["properties"]["note"], "MCP allows no null default"
    assert schema["properties"]["count"]["default"] == 1
    assert "$defs" not in schema


def test_an_accepted_answer_is_a_validated_instance() -> None:
    answer = {"action": "accept", "content": {"item": "tea", "size": "large"}}
    result = form(Order).result(answer)
    assert result == Elicited("accept", Order(item="tea", size=Size.LARGE), answer["content"])
    assert isinstance(result.data, Order) and result.data.count == 1


def test_a_dataclass_and_a_primitive() -> None:
    refund = form(Refund).result({"action": "accept", "content": {"cents": 5, "ok": True}})
    assert refund.data == Refund(5, True)
    asked = form(bool)
    assert asked.wrapped
    assert asked.schema == {
        "type": "object",
        "properties": {"value": {"type": "boolean"}},
        "required": ["value"],
    }
    assert asked.result({"action": "accept", "content": {"value": False}}).data is False


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_or_cancelled_question_has_no_data(action: str) -> None:
    assert form(Order).result({"action": action}) == Elicited(action, None)  # type: ignore[arg-type]


def test_an_answer_the_model_refuses_raises() -> None:
    with pytest.raises(pydantic.ValidationError):
        form(Refund).result({"action": "accept", "content": {"cents": "many", "ok": True}})


def test_a_model_that_cannot_be_a_form_is_refused_naming_the_fix() -> None:
    with pytest.raises(TypeError) as refused:
        form(Nested)
    assert str(refused.value) == (
        "elicit: Nested cannot be a form (its field 'order' is not a string, number, boolean "
        "or enum): MCP forms hold strings, numbers, booleans and enums only; use a model of "
        "such fields"
    )


def test_an_answer_awaits_to_itself() -> None:
    answer = form(bool).result({"action": "accept", "content": {"value": True}})

    async def awaited() -> Elicited[bool]:
        return await answer

    assert asyncio.run(awaited()) is answer
