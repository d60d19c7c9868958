"""A task as stored in Redis, and its wire form (the spec's ``DetailedTask``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared import jsonutil

TERMINAL = frozenset({"completed", "failed", "cancelled"})


def iso(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, e.g. ``2026-11-30T04:52:00.891Z``."""
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _json(raw: str | None, default: Any) -> Any:
    return default if not raw else jsonutil.loads(raw)


@dataclass
class TaskRecord:
    """The fields of one task hash, parsed."""

    ref: str
    status: str
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
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @classmethod
    def from_hash(cls, ref: str, h: dict[str, str]) -> TaskRecord:
        ttl = h.get("ttl_ms", "")
        return cls(
            ref=ref,
            status=h["status"],
            created_ms=int(h["created_ms"]),
            updated_ms=int(h["updated_ms"]),
            ttl_ms=int(ttl) if ttl else None,
            poll_ms=int(h.get("poll_ms") or 1000),
            tool=h.get("tool", ""),
            queue=h.get("queue", ""),
            message=h.get("msg", ""),
            owner=h.get("owner", ""),
            arguments=_json(h.get("args"), {}),
            caps=_json(h.get("caps"), {}),
            pre=_json(h.get("pre"), {}),
            sync=h.get("sync") == "1",
            gen=int(h.get("gen") or 0),
            runs=int(h.get("runs") or 0),
            result=_json(h.get("result"), None),
            error=_json(h.get("error"), None),
        )

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def wire(self, task_id: str, inputs: dict[str, str] | None = None) -> dict[str, Any]:
        """The flat ``DetailedTask``: the status-specific field and nothing forbidden."""
        task: dict[str, Any] = {
            "taskId": task_id,
            "status": self.status,
            "createdAt": iso(self.created_ms),
            "lastUpdatedAt": iso(self.updated_ms),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }
        if self.message:
            task["statusMessage"] = self.message
        if self.status == "input_required":
            task["inputRequests"] = {k: jsonutil.loads(v) for k, v in (inputs or {}).items()}
        elif self.status == "completed":
            task["result"] = self.result or {"resultType": "complete", "content": []}
        elif self.status == "failed":
            task["error"] = self.error or {"code": -32603, "message": "Task failed"}
        return task
