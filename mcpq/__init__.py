"""mcpq: an MCP server whose tools run as durable tasks.

The public API for tool authors is this package's namespace::

    from mcpq import ToolContext, tool

    @tool
    def add(a: int, b: int) -> int:
        return a + b

Everything else under ``mcpq`` (``mcpq.frontend``, ``mcpq.workers``, ``mcpq.shared``,
``mcpq.ops``) is mcpq's own and may change without notice. :mod:`mcpq.client` is the Python
tasks client (the ``client`` extra).
"""

from mcpq.shared.errors import ProtocolError, TaskCancelled, ToolError
from mcpq.shared.tools import InputRequest, ToolContext, elicitation, sampling, tool

__all__ = [
    "InputRequest",
    "ProtocolError",
    "TaskCancelled",
    "ToolContext",
    "ToolError",
    "elicitation",
    "sampling",
    "tool",
]
