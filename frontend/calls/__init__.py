"""``tools/call`` end to end, for the 2026-07-28 and the 2025-era wires alike.

| module       | what it does                                                               |
| ``pipeline`` | the one entry (:func:`call_tool`): which path a call takes                 |
| ``gate``     | may this caller call this tool, and as a task or synchronously             |
| ``state``    | the sealed ``requestState``: one typed model per kind of retry             |
| ``mrtr``     | rounds of questions before a task exists (``ask_first``)                   |
| ``sync``     | a synchronous call: its hidden task followed to its end, asked again       |

A task itself is created, answered and cancelled by ``frontend.task_service``; a call's stream is
``mcpq.frontend.streams``.
"""

from mcpq.frontend.calls.pipeline import call_tool

__all__ = ["call_tool"]
