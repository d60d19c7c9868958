"""``completion/complete``: values for a prompt's argument or a template's variable, from the
``complete=`` its declaration gave (a list, or a function of the partial value and the
arguments already chosen, run on the web's own threads). An unknown prompt or template is
``-32602``; an argument with no provider gets no values."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import Services
from mcpq.shared.errors import invalid_params
from mcpq.shared.resources import Completer
from mcpq.shared.wire import CompleteResult

#: The spec's cap on the values of one answer.
MAX_VALUES = 100


async def complete(services: Services, rpc: RpcRequest) -> CompleteResult:
    ref, argument = rpc.params.get("ref"), rpc.params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise invalid_params("Invalid params: completion/complete needs ref and argument")
    name, value = argument.get("name"), argument.get("value", "")
    if not isinstance(name, str) or not isinstance(value, str):
        raise invalid_params("Invalid params: argument needs a name and a string value")
    context = rpc.params.get("context") or {}
    chosen = context.get("arguments") if isinstance(context, dict) else None
    chosen = {k: v for k, v in (chosen or {}).items() if isinstance(v, str)}
    completer = _completer(services, rpc, ref, name)
    if completer is None:
        return CompleteResult(completion={"values": [], "hasMore": False})
    if callable(completer):
        call: Callable[[str, dict[str, str]], Iterable[str]] = completer
        values = await services.user_code.run(
            f"completion of {name}", lambda: call(value, chosen), _strings, rpc.owner
        )
    else:
        values = [v for v in _strings(completer) if v.startswith(value)]
    shown = values[:MAX_VALUES]
    return CompleteResult(
        completion={"values": shown, "total": len(values), "hasMore": len(values) > len(shown)}
    )


def _completer(
    services: Services, rpc: RpcRequest, ref: dict[str, Any], name: str
) -> Completer | None:
    kind = ref.get("type")
    if kind == "ref/prompt":
        prompt = services.registry.prompts.get(str(ref.get("name")))
        if prompt is None:
            raise invalid_params(f"Invalid params: unknown prompt {str(ref.get('name'))[:100]!r}")
        services.auth.require(rpc.principal, prompt.scopes, f"prompt {prompt.name}")
        return prompt.complete.get(name)
    if kind == "ref/resource":
        uri = str(ref.get("uri"))
        template = services.registry.templates.get(uri)
        if template is None:
            if uri in services.registry.resources:
                return None  # a static resource has no variables to complete
            raise invalid_params(f"Invalid params: unknown resource template {uri[:200]!r}")
        services.auth.require(rpc.principal, template.scopes, f"resource {template.name}")
        return template.complete.get(name)
    raise invalid_params("Invalid params: ref.type must be ref/prompt or ref/resource")


def _strings(values: Any) -> list[str]:
    return [str(v) for v in values]
