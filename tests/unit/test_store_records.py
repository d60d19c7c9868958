"""A poll reads only the fields named in ``POLL_FIELDS`` (``read.lua`` gets them from there):
every field ``TaskRecord.from_hash`` reads must be among them or be the call's own."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from mcpq.shared.store.records import POLL_FIELDS, TaskRecord

#: The call's own fields: a poll leaves them in Redis.
CALL_FIELDS = ("args", "caps", "pre")


class _Recording(dict[str, str]):
    """A task hash that remembers which fields were asked for."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        self.asked.add(name)
        return super().get(name, default)


def test_every_field_the_record_reads_is_a_poll_field_or_the_calls_own() -> None:
    h = _Recording(
        {
            "owner": "alice",
            "status": "completed",
            "created_ms": "1",
            "updated_ms": "2",
            "ttl_ms": "60000",
            "poll_ms": "500",
            "tool": "echo",
            "queue": "q",
            "sync": "0",
            "gen": "1",
            "runs": "1",
            "reports": "0",
            "result": '{"content": []}',
            "args": '{"text": "hi"}',
        }
    )
    record = TaskRecord.from_hash("ref", h)
    assert record.result == {"content": []} and record.arguments == {"text": "hi"}
    assert h.asked - set(CALL_FIELDS) <= set(POLL_FIELDS), "a field from_hash reads is not read"
    assert POLL_FIELDS[0] == "owner"  # read.lua compares it first
    assert not set(CALL_FIELDS) & set(POLL_FIELDS)


def test_the_records_and_the_wire_load_no_redis_client() -> None:
    """``mcpq.shared.wire`` (the results mcpq emits) needs the task record, not the store: importing
    it loads no redis-py (``mcpq.shared.store`` imports its stores on first use)."""
    code = (
        "import sys, mcpq.shared.wire, mcpq.shared.store.records\n"
        "from mcpq.shared.store import TaskRecord, TaskStatus, task_ref\n"
        "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
