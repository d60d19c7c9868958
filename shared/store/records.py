"""A task as stored in Redis (its hash, parsed): what the store hands out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.states import TERMINAL, TaskStatus

#: The fields of a task hash a poll reads (``read.lua``): every one :meth:`TaskRecord.from_hash`
#: reads but the call's own (``args``, ``caps``, ``pre``: only a reader that asks for the call
#: gets them), ``owner`` first (the script compares it). A test holds this list and
#: ``from_hash`` together.
#: How many of a synchronous call's log messages its hash keeps (``report.lua``'s ``LOG_KEEP``):
#: fields ``log:<n>``, the last ones up to ``logs``.
LOG_KEEP = 100

POLL_FIELDS = (
    "owner",
    "status",
    "created_ms",
    "updated_ms",
    "ttl_ms",
    "poll_ms",
    "tool",
    "queue",
    "msg",
    "sync",
    "gen",
    "runs",
    "reports",
    "prog",
    "total",
    "logs",
    "result",
    "error",
    "trace",
)


@dataclass
class TaskRecord:
    """The fields of one task hash (see ``keyspace`` for the schema), parsed."""

    ref: str
    status: TaskStatus
    created_ms: int
    updated_ms: int
    ttl_ms: int | None
    poll_ms: int
    tool: str
    queue: str = ""
    message: str = ""
    owner: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    caps: dict[str, Any] = field(default_factory=dict)
    pre: dict[str, Any] = field(default_factory=dict)
    sync: bool = False
    gen: int = 0
    runs: int = 0
    reports: int = 0  # progress messages the tool reported so far
    progress: float | None = None  # report_progress's numbers, as of the latest report
    total: float | None = None
    logs: int = 0  # log messages of a synchronous call so far (fields log:<n>)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    #: The create's W3C traceparent (empty when untraced): a poll's span links to the task's trace.
    trace: str = ""

    @classmethod
    def from_hash(cls, ref: str, h: dict[str, str], payloads: Payloads = PLAIN) -> TaskRecord:
        """``payloads`` opens the sealed fields (raises ``UnreadablePayload`` if one does not)."""
        ttl = h.get("ttl_ms", "")
        opened = payloads.open_task(ref, h)
        return cls(
            ref=ref,
            status=TaskStatus(h["status"]),
            created_ms=int(h["created_ms"]),
            updated_ms=int(h["updated_ms"]),
            ttl_ms=int(ttl) if ttl else None,
            poll_ms=int(h.get("poll_ms") or 1000),
            tool=h.get("tool", ""),
            queue=h.get("queue", ""),
            message=opened.get("msg", ""),
            owner=h.get("owner", ""),
            arguments=opened.get("args", {}),
            caps=opened.get("caps", {}),
            pre=opened.get("pre", {}),
            sync=h.get("sync") == "1",
            gen=int(h.get("gen") or 0),
            runs=int(h.get("runs") or 0),
            reports=int(h.get("reports") or 0),
            progress=_number(h.get("prog")),
            total=_number(h.get("total")),
            logs=int(h.get("logs") or 0),
            result=opened.get("result", None),
            error=opened.get("error", None),
            trace=h.get("trace", ""),
        )

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def _number(raw: str | None) -> float | None:
    return float(raw) if raw else None
