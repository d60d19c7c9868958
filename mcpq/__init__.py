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

from mcpq.shared.app import App, resource_updated
from mcpq.shared.brought.common import step, step_key
from mcpq.shared.content import Audio, EmbeddedResource, Image
from mcpq.shared.elicitation import Elicited
from mcpq.shared.errors import ProtocolError, TaskCancelled, ToolError
from mcpq.shared.prompts import Answered, Message, prompt
from mcpq.shared.resources import resource
from mcpq.shared.tools import InputRequest, ToolContext, elicitation, sampling, tool

#: The context a tool receives (FastMCP's and the MCP SDK's name for it): ``ToolContext``.
Context = ToolContext

__all__ = [
    "Answered",
    "App",
    "Audio",
    "Context",
    "Elicited",
    "EmbeddedResource",
    "Image",
    "InputRequest",
    "Message",
    "ProtocolError",
    "TaskCancelled",
    "ToolContext",
    "ToolError",
    "elicitation",
    "prompt",
    "resource",
    "resource_updated",
    "sampling",
    "step",
    "step_key",
    "tool",
]
