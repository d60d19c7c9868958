"""What a running tool hands the store is bounded (``mcpq.shared.bounds``): an oversized result or
step value is the tool's error, a long status message is cut; nothing oversized reaches Redis."""

from __future__ import annotations

import pytest

from mcpq.shared.bounds import json_bytes
from mcpq.shared.errors import ToolError
from mcpq.shared.store import TaskStatus
from mcpq.workers.context import RunContext
from mcpq.workers.run_parts import outcome_of as _outcome
from tests.support.white_box import quiet_watch


def test_an_oversized_result_ends_as_a_tool_error_naming_the_setting() -> None:
    status, payload, _ = _outcome(lambda: "x" * 5_000, "big", max_result_bytes=1_000)
    assert status is TaskStatus.COMPLETED and payload["isError"] is True
    text = payload["content"][0]["text"]
    assert "MCPQ_MAX_RESULT_BYTES (1000)" in text
    assert json_bytes(payload) < 1_000
    status, payload, _ = _outcome(lambda: "x" * 500, "small", max_result_bytes=1_000)
    assert payload.get("isError") is not True and payload["content"][0]["text"] == "x" * 500


def test_an_oversized_step_value_is_a_tool_error_and_is_not_stored(store, tasks) -> None:
    ref, gen = tasks.running()
    ctx = RunContext(store, ref, gen, {}, 1.0, watch=quiet_watch(), max_step_bytes=100)
    assert ctx.step("small", lambda: [1, 2]) == [1, 2]
    with pytest.raises(ToolError, match="MCPQ_MAX_STEP_BYTES"):
        ctx.step("big", lambda: "y" * 1_000)
    assert store.redis.hkeys(store.keys.steps(ref)) == ["small"]


def test_a_long_status_message_is_cut_and_marked(store, tasks) -> None:
    ref, gen = tasks.running()
    ctx = RunContext(store, ref, gen, {}, 1.0, watch=quiet_watch(), max_message_chars=20)
    ctx.report("z" * 500)
    record = store.record(ref)
    assert record is not None and record.message == "z" * 19 + "…"
