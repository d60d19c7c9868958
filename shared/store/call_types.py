"""A store call as data: a Lua script's run (:class:`ScriptCall`: which script, which KEYS and
ARGV, how to read the reply) or plain commands in one pipeline (:class:`PipelineCall`), and the
helpers that read Lua's replies. The calls themselves are built by concern (``calls`` lists
them all); each store's driver executes them (``plans``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mcpq.shared.store.states import Reply

T = TypeVar("T")
Arg = str | int | float


@dataclass(frozen=True)
class ScriptCall(Generic[T]):
    """One Lua script run: its name, KEYS, ARGV and the parser of its reply."""

    script: str
    keys: Sequence[str]
    args: Sequence[Arg]
    parse: Callable[[Any], T]


Queue = Callable[[Any], Any]
"""One command queued on a pipeline (redis-py's sync and asyncio pipelines queue alike)."""


@dataclass(frozen=True)
class PipelineCall(Generic[T]):
    """Plain (non-script) commands as data: one pipeline, no transaction, and how to read its
    replies. For reads, and for writes that need no condition (the worker heartbeat)."""

    commands: Sequence[Queue]
    parse: Callable[[list[Any]], T]


def as_dict(flat: Sequence[str]) -> dict[str, str]:
    """A Lua table of alternating names and values (``HGETALL``'s shape) as a dict."""
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def flatten(pairs: dict[str, str]) -> list[str]:
    """The reverse of :func:`as_dict`: names and values, alternating (for ARGV)."""
    return [item for kv in pairs.items() for item in kv]


def reply_code(reply: Any) -> Reply:
    """A script's code, whether it answered a bare string or a table led by one."""
    return Reply(str(reply[0]) if isinstance(reply, list) else str(reply))
