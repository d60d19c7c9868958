"""``prompts/list`` and ``prompts/get``, on both wires. A prompt's function runs on the web's
own threads (``mcpq.frontend.user_code``); its arguments are checked by their types first
(``-32602``), an unknown prompt is ``-32602``, a prompt with scopes needs them (403).

A prompt with ``ask_first`` questions (2026-07-28 MRTR, SEP-2322) answers ``input_required``
until every one is answered, as ``tools/call`` does (``mcpq.frontend.calls.mrtr``): the answers
so far travel in the sealed ``requestState``, bound to the principal, the method, the prompt and
its arguments, so any replica serves the next round and a tampered state is ``-32602``. Nothing
is created, so a state may be replayed: rendering twice has no effect beyond the answer."""

from __future__ import annotations

from typing import Any

from mcpq.frontend import params
from mcpq.frontend.calls.mrtr import next_round
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.methods.pages import more, page
from mcpq.frontend.services import Services
from mcpq.shared.errors import invalid_params
from mcpq.shared.prompts import Prompt, PromptArgumentsInvalid, messages
from mcpq.shared.request_state import InvalidRequestState
from mcpq.shared.tools import first_questions
from mcpq.shared.wire import GetPromptResult, InputRequiredResult, PromptsList

#: The ``kind`` inside a prompt's sealed state.
_PROMPT_STATE = "prompt"


async def list_prompts(services: Services, rpc: RpcRequest) -> PromptsList:
    listed, following = page(rpc, [p.listing() for p in services.registry.prompts.values()])
    hints: dict[str, Any] = {} if rpc.legacy else {"ttl_ms": 0, "cache_scope": "private"}
    return PromptsList(prompts=list(listed), **more(following), **hints)


async def get_prompt(services: Services, rpc: RpcRequest) -> GetPromptResult | InputRequiredResult:
    name = rpc.params.get("name")
    if not isinstance(name, str) or not name:
        raise invalid_params("Invalid params: name must be a non-empty string")
    prompt = services.registry.prompts.get(name)
    if prompt is None:
        raise invalid_params(f"Invalid params: unknown prompt {name[:100]!r}")
    services.auth.require(rpc.principal, prompt.scopes, f"prompt {name}")
    given = rpc.params.get("arguments") or {}
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise invalid_params("Invalid params: arguments must be an object of strings")
    try:
        arguments = prompt.validate(given)
    except PromptArgumentsInvalid as exc:
        raise invalid_params(f"Invalid params: {exc}") from None
    answered: dict[str, Any] = {}
    if prompt.ask_first is not None:
        gathered = _gather(services, rpc, prompt, given, arguments)
        if isinstance(gathered, InputRequiredResult):
            return gathered
        answered = gathered
    rendered = await services.user_code.run(
        f"prompt {name}", lambda: prompt.render(arguments, answered), messages, rpc.owner
    )
    if prompt.description:
        return GetPromptResult(messages=rendered, description=prompt.description)
    return GetPromptResult(messages=rendered)


def _gather(
    services: Services,
    rpc: RpcRequest,
    prompt: Prompt,
    given: dict[str, str],
    arguments: dict[str, Any],
) -> dict[str, Any] | InputRequiredResult:
    """Every answer to the prompt's questions, or the next ``input_required`` round. The state
    is bound to the arguments as sent; the questions are asked from them as typed."""
    if rpc.legacy:  # MRTR is 2026-07-28's; a 2025-era prompts/get cannot be asked anything
        raise invalid_params(
            f"Invalid params: prompt {prompt.name!r} asks the client first (input_required), "
            "which needs protocol version 2026-07-28"
        )
    assert prompt.ask_first is not None
    signer, token = services.signer, rpc.params.get("requestState")
    collected: dict[str, Any] = {}
    if token is not None:
        try:
            body = signer.open(token, rpc.owner, rpc.method, prompt.name, given)
        except InvalidRequestState as exc:
            raise invalid_params(f"Invalid params: {exc}") from None
        if body.get("kind") != _PROMPT_STATE or not isinstance(body.get("answers"), dict):
            raise invalid_params("Invalid params: requestState is not one this server gave")
        collected = body["answers"]
    requests = first_questions(prompt.ask_first, arguments, rpc.caps)
    responses = params.input_responses(rpc, required=False)
    collected, missing = next_round(services, rpc, requests, collected, responses)
    if not missing:
        return collected
    state = {"kind": _PROMPT_STATE, "answers": collected}
    sealed = signer.seal(rpc.owner, rpc.method, prompt.name, given, state)
    return InputRequiredResult(input_requests=missing, request_state=sealed)
