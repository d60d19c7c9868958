"""The MCP methods: one table routes a method name to its handler, per protocol version.

Each handler takes the services and the validated request and returns a result object
(``resultType`` and ``_meta.serverInfo`` are stamped by the dispatcher) or a stream. A method is
added with its module and one row here: its handlers, each from the oldest version that has it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcpq.frontend.calls import call_tool
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.legacy import methods as legacy
from mcpq.frontend.methods import (
    completion,
    discover,
    prompts,
    resources,
    subscribe,
    subscriptions,
    tasks,
    tools,
)
from mcpq.frontend.services import Services
from mcpq.frontend.streams import StreamReply
from mcpq.shared.protocol import LEGACY_TASKS_VERSION, LEGACY_VERSIONS, PROTOCOL_VERSION
from mcpq.shared.wire import Result

Handler = Callable[[Services, RpcRequest], Awaitable[Result | StreamReply]]

_OLDEST = LEGACY_VERSIONS[0]
_2026, _TASKS_2025 = PROTOCOL_VERSION, LEGACY_TASKS_VERSION

#: method -> ``(since, handler)`` pairs, oldest first: a request of version ``v`` is served by
#: the handler of the newest ``since`` <= ``v``; ``None`` where a version dropped the method.
ROUTES: dict[str, tuple[tuple[str, Handler | None], ...]] = {
    "ping": ((_OLDEST, legacy.ping), (_2026, None)),
    "logging/setLevel": ((_OLDEST, legacy.set_level), (_2026, None)),
    "tools/list": ((_OLDEST, tools.list_tools),),
    "tools/call": ((_OLDEST, call_tool),),
    "tasks/get": ((_TASKS_2025, legacy.get_task), (_2026, tasks.get)),
    "tasks/result": ((_TASKS_2025, legacy.task_result), (_2026, None)),
    "tasks/list": ((_TASKS_2025, legacy.list_tasks), (_2026, None)),
    "tasks/cancel": ((_TASKS_2025, legacy.cancel_task), (_2026, tasks.cancel)),
    "tasks/update": ((_2026, tasks.update),),
    "resources/list": ((_OLDEST, resources.list_resources),),
    "resources/templates/list": ((_OLDEST, resources.list_templates),),
    "resources/read": ((_OLDEST, resources.read_resource),),
    "resources/subscribe": ((_OLDEST, subscribe.subscribe), (_2026, None)),
    "resources/unsubscribe": ((_OLDEST, subscribe.unsubscribe), (_2026, None)),
    "prompts/list": ((_OLDEST, prompts.list_prompts),),
    "prompts/get": ((_OLDEST, prompts.get_prompt),),
    "completion/complete": ((_OLDEST, completion.complete),),
    "server/discover": ((_2026, discover.discover),),
    "subscriptions/listen": ((_2026, subscriptions.listen),),
}


def handler(method: str, version: str) -> Handler | None:
    """The handler of ``method`` for a request of protocol ``version``, if it has one."""
    chosen: Handler | None = None
    for since, candidate in ROUTES.get(method, ()):
        if since <= version:  # ISO dates compare as strings
            chosen = candidate
    return chosen
