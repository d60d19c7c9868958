"""What ``mcpq call`` and ``mcpq task`` print on stdout, and the exit status it means.

Exit codes (``EXIT_*``): 0 completed, 1 the tool reported an error (``isError``), 2 usage, 3 the
task failed, 4 cancelled, 5 the server could not be reached or refused the request, 130
detached by a second Ctrl-C (the task goes on). ``--output json`` prints one object instead of
text; the status line and prompts go to stderr either way.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

    from mcpq.client import Task

EXIT_COMPLETED = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_UNREACHABLE = 5
EXIT_DETACHED = 130
_STATUS_EXIT = {"completed": EXIT_COMPLETED, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}


def print_result(
    task: Task | None, status: str, result: types.CallToolResult | None, output: str
) -> int:
    """The outcome on stdout (text, or one JSON object); the exit status it means."""
    import mcp_types as types

    code = _STATUS_EXIT.get(status, EXIT_COMPLETED)
    if result is not None and result.is_error:
        code = EXIT_TOOL_ERROR
    if output == "json":
        body: dict[str, Any] = {"status": status}
        if task is not None:
            body["taskId"] = task.task_id
            body["statusMessage"] = task.status_message
            if task.error is not None:
                body["error"] = task.error
        if result is not None:
            body["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        print(json.dumps(body))
        return code
    if result is not None:
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        shown = "\n".join(texts) if texts else json.dumps(result.structured_content)
        print(shown, file=sys.stderr if result.is_error else sys.stdout)
    elif task is not None and not task.done:
        message = f": {task.status_message}" if task.status_message else ""
        print(f"{task.status}{message}")
    elif task is not None:
        error = (task.error or {}).get("message") or task.status_message or ""
        print(f"task {status}" + (f": {error}" if error else ""), file=sys.stderr)
    return code


def print_task_id(output: str, task_id: str, status: str) -> None:
    """A task left running (``--detach``, or detached by Ctrl-C): its taskId, or one JSON
    object with its status too."""
    body = {"taskId": task_id, "status": status}
    print(json.dumps(body) if output == "json" else task_id)
