"""Unexpected exceptions reach the client as a generic error carrying a random error id; the
log line with the traceback carries the same id. A ``ToolError``'s text passes unchanged.

(``tests/ops/test_safe_errors_logs.py`` runs the same through a real worker and web tier.)"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from mcpq.frontend import methods
from mcpq.shared.errors import ToolError
from mcpq.shared.store import TaskStatus
from mcpq.workers.run_parts import outcome_of as _outcome
from tests.unit.fakes import Mcp

SECRET = "secret detail 41d7"
LIMIT = 1024 * 1024


def _raise(exc: Exception) -> Any:
    def call() -> Any:
        raise exc

    return call


def test_a_tool_crash_is_a_generic_tool_error_with_an_id_that_the_log_repeats(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="mcpq.worker"):
        status, payload, message = _outcome(_raise(AttributeError(SECRET)), "crash", LIMIT)
    assert (status, message) == (TaskStatus.COMPLETED, "")
    assert payload["isError"] is True
    [block] = payload["content"]
    match = re.fullmatch(r"internal error in tool crash \(error id ([0-9a-f]{16})\)", block["text"])
    assert match, block
    assert SECRET not in str(payload) and "AttributeError" not in str(payload)
    [logged] = caplog.records
    assert logged.error_id == match.group(1)  # type: ignore[attr-defined]
    assert logged.exc_info is not None and str(logged.exc_info[1]) == SECRET


def test_two_crashes_get_two_ids() -> None:
    texts = {
        _outcome(_raise(KeyError(SECRET)), "crash", LIMIT)[1]["content"][0]["text"]
        for _ in range(2)
    }
    assert len(texts) == 2


def test_a_tool_error_reaches_the_client_unchanged() -> None:
    status, payload, _ = _outcome(_raise(ToolError("the file is locked")), "t", LIMIT)
    assert status is TaskStatus.COMPLETED
    assert payload["isError"] is True
    assert payload["content"][0]["text"] == "the file is locked"


def test_the_web_tiers_own_crash_answers_an_error_id_that_its_log_repeats(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def boom(services: Any, req: Any) -> dict[str, Any]:
        raise RuntimeError(SECRET)

    monkeypatch.setitem(methods.ROUTES, "tools/list", ((methods.PROTOCOL_VERSION, boom),))
    with caplog.at_level(logging.ERROR, logger="mcpq.web"):
        reply = mcp.post("tools/list", rid=3)
    assert reply.code() == (200, -32603)
    match = re.fullmatch(r"Internal error \(error id ([0-9a-f]{16})\)", reply.error["message"])
    assert match, reply.error
    assert SECRET.encode() not in reply.content
    [logged] = [r for r in caplog.records if r.getMessage() == "unhandled error"]
    assert logged.error_id == match.group(1)  # type: ignore[attr-defined]
    assert logged.exc_info is not None
