"""``prompts/list`` and ``prompts/get``, on both wires. A prompt's function runs on the web's
own threads (``mcpq.frontend.user_code``); its arguments are checked by their types first
(``-32602``), an unknown prompt is ``-32602``, a prompt with scopes needs them (403)."""

from __future__ import annotations

from typing import Any

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.methods.pages import more, page
from mcpq.frontend.services import Services
from mcpq.shared.errors import invalid_params
from mcpq.shared.prompts import PromptArgumentsInvalid, messages
from mcpq.shared.wire import GetPromptResult, PromptsList


async def list_prompts(services: Services, rpc: RpcRequest) -> PromptsList:
    listed, following = page(rpc, [p.listing() for p in services.registry.prompts.values()])
    hints: dict[str, Any] = {} if rpc.legacy else {"ttl_ms": 0, "cache_scope": "private"}
    return PromptsList(prompts=list(listed), **more(following), **hints)


async def get_prompt(services: Services, rpc: RpcRequest) -> GetPromptResult:
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
    fn = prompt.fn
    rendered = await services.user_code.run(
        f"prompt {name}", lambda: fn(**arguments), messages, rpc.owner
    )
    if prompt.description:
        return GetPromptResult(messages=rendered, description=prompt.description)
    return GetPromptResult(messages=rendered)
