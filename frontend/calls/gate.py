"""The tool gate of ``tools/call``, one for every wire: may this caller call this tool, and as
what: a task, or a synchronous call (answered when its hidden task ends)?

In order: the lookup (-32602 for an unknown tool), the caller's authorization for the tool's
scopes (403), the caller's creation rate when this process knows it is spent (429, before the
arguments are validated and without Redis: a flooding client costs little), then the decision
table of the caller's wire.

2026-07-28 (the opt-in is per request: the Tasks extension in ``_meta``'s capabilities):

| opt-in | tool mode          | answer                                        |
| yes    | optional, required | a task (``CreateTaskResult``), after any MRTR  |
| yes/no | never              | synchronous                                   |
| no     | optional           | synchronous                                   |
| no     | required           | ``-32021`` with ``data.requiredCapabilities`` |

2025-era sessions (the opt-in is per call: ``params.task``, 2025-11-25; older versions have
no tasks at all, so a ``required`` tool runs synchronously for them, as durable as any run):

| tool mode | plain call                          | with ``params.task`` |
| never     | synchronous                         | -32601 (forbidden)   |
| optional  | synchronous                         | a task               |
| required  | 2025-11-25: -32601; older: sync     | a task               |

A tool that asks before it starts (``ask_first``) needs MRTR, which only 2026-07-28 has.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpq.frontend import web_metrics
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.params import ToolCallParams
from mcpq.frontend.services import Services
from mcpq.shared.errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    McpError,
    invalid_params,
    missing_tasks_capability,
)
from mcpq.shared.protocol import LEGACY_TASKS_VERSION
from mcpq.shared.tools import Tool


@dataclass(frozen=True)
class Admitted:
    tool: Tool
    as_task: bool


def admit(services: Services, rpc: RpcRequest, call: ToolCallParams) -> Admitted:
    tool = services.registry.get(call.name)
    if tool is None:
        raise invalid_params(f"Unknown tool: {call.name}")
    services.auth.require(rpc.principal, tool.scopes, f"tool {call.name}")
    if (refused := services.tasks.rate_refusals.refusal(rpc.owner)) is not None:
        web_metrics.LIMIT_REJECTIONS.labels("rate").inc()
        raise refused
    as_task = _legacy_mode(rpc, tool, call) if rpc.legacy else _mode(rpc, tool)
    return Admitted(tool, as_task)


def _mode(rpc: RpcRequest, tool: Tool) -> bool:
    if tool.mode == "required" and not rpc.tasks_opt_in:
        raise missing_tasks_capability()
    return rpc.tasks_opt_in and tool.mode != "never"


def _legacy_mode(rpc: RpcRequest, tool: Tool, call: ToolCallParams) -> bool:
    if call.task is not None and tool.mode == "never":
        text = f"Tool {tool.name} does not support task-augmented calls"
        raise McpError(METHOD_NOT_FOUND, text)
    if call.task is None and tool.mode == "required" and rpc.version >= LEGACY_TASKS_VERSION:
        raise McpError(METHOD_NOT_FOUND, f"Tool {tool.name} must be called as a task (params.task)")
    if tool.ask_first is not None:
        # Its questions come before any run exists: only MRTR (2026-07-28) can ask them.
        text = f"Tool {tool.name} asks its questions before it starts: "
        raise McpError(INTERNAL_ERROR, text + "call it with protocol 2026-07-28")
    return call.task is not None
