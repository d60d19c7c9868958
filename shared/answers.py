"""Is this an answer to that input request? Checked before an answer is stored, for every way an
answer arrives (``tasks/update``, an MRTR retry, a 2025-era client's POSTed response), so a tool
only ever sees answers of the shape it asked for.

- ``elicitation/create`` (form mode): ``action`` is accept, decline or cancel; an accepted
  answer's ``content`` must validate against the request's ``requestedSchema`` (JSON Schema,
  draft 2020-12, by the ``jsonschema`` library).
- ``sampling/createMessage``: a ``CreateMessageResult``: ``role``, ``content`` (a content block,
  or a list of them), ``model``.

:func:`accept` is the one check every way in calls: how many and how big, then each answer to a
request it answers; answers to keys that are not asked are left out (the spec: ignored).
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import invalid_params
from mcpq.shared.tools import InputRequest

_ACTIONS = {"accept", "decline", "cancel"}
_ROLES = {"assistant", "user"}


def _block(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def problem(request: InputRequest, answer: Any) -> str | None:
    """Why ``answer`` does not answer ``request``, or ``None`` when it does."""
    if not isinstance(answer, dict):
        return "an answer must be an object"
    method = request.get("method")
    params = request.get("params") or {}
    if method == "elicitation/create":
        if answer.get("action") not in _ACTIONS:
            return "action must be accept, decline or cancel"
        schema = params.get("requestedSchema")
        if answer["action"] != "accept" or not isinstance(schema, dict):
            return None
        content = answer.get("content", {})
        error = best_match(Draft202012Validator(schema).iter_errors(content))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "content"
        return f"content does not match the requested schema at {where}: {error.message[:200]}"
    if method == "sampling/createMessage":
        content = answer.get("content")
        blocks_ok = _block(content) or (
            isinstance(content, list) and bool(content) and all(_block(b) for b in content)
        )
        if answer.get("role") not in _ROLES or not blocks_ok:
            return "a sampling answer needs role (assistant or user) and content block(s)"
        if not isinstance(answer.get("model"), str):
            return "a sampling answer needs model (a string)"
    return None


def check_sizes(responses: dict[str, Any], max_count: int, max_bytes: int) -> None:
    """How many answers one request may carry, and how big each may be (``LimitExceeded``)."""
    if len(responses) > max_count:
        raise LimitExceeded(f"{len(responses)} answers, over MCPQ_MAX_ANSWERS ({max_count})")
    for key, value in responses.items():
        check_bytes(f"the answer {key[:64]!r}", value, max_bytes, "MCPQ_MAX_ANSWER_BYTES")


def accept(
    requests: dict[str, InputRequest],
    responses: dict[str, Any],
    max_count: int,
    max_bytes: int,
) -> dict[str, Any]:
    """The answers in ``responses`` to ``requests``, each checked against its request.

    Raises ``-32602`` for too many or too large answers, or for an answer
    that does not fit its request: then nothing may be stored, and the task (or the MRTR round)
    stays as it was. Keys not in ``requests`` are left out, not refused."""
    try:
        check_sizes(responses, max_count, max_bytes)
    except LimitExceeded as exc:
        raise invalid_params(f"Invalid params: {exc}") from None
    accepted = {key: value for key, value in responses.items() if key in requests}
    for key, value in accepted.items():
        if (why := problem(requests[key], value)) is not None:
            raise invalid_params(f"Invalid params: inputResponses[{key!r}]: {why}")
    return accepted
