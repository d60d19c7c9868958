"""A TTL of 0 or less is refused wherever one is set: a task would expire the moment it is
created. ``null`` (unlimited) stays allowed where it was (the default TTL, a tool's own)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpq.shared.settings import Settings
from mcpq.shared.tools import ToolContext, tool
from tests.unit.fakes import Mcp
from tests.unit.test_legacy import Session


@pytest.mark.parametrize("name", ["MCPQ_DEFAULT_TTL_MS", "MCPQ_SYNC_TTL_MS"])
@pytest.mark.parametrize("raw", ["0", "-1", "-3600000"])
def test_a_ttl_setting_of_zero_or_less_is_refused_naming_it(name: str, raw: str) -> None:
    with pytest.raises(ValueError, match=f"^{name}: must be a positive number of milliseconds"):
        Settings.from_env({name: raw})


def test_ttl_settings_take_positive_values_and_the_default_may_be_unlimited() -> None:
    read = Settings.from_env({"MCPQ_DEFAULT_TTL_MS": "1", "MCPQ_SYNC_TTL_MS": "250"})
    assert (read.default_ttl_ms, read.sync_ttl_ms) == (1, 250)
    assert Settings.from_env({"MCPQ_DEFAULT_TTL_MS": "null"}).default_ttl_ms is None
    with pytest.raises(ValueError, match=r"^MCPQ_SYNC_TTL_MS: "):
        Settings.from_env({"MCPQ_SYNC_TTL_MS": "null"})  # never unlimited: a hidden task


def test_max_runs_defaults_to_three_and_takes_zero_for_no_limit() -> None:
    assert Settings().max_runs == Settings.from_env({}).max_runs == 3
    assert Settings.from_env({"MCPQ_MAX_RUNS": "0"}).max_runs == 0
    with pytest.raises(ValueError, match=r"^MCPQ_MAX_RUNS: must be 0"):
        Settings.from_env({"MCPQ_MAX_RUNS": "-1"})


def _body(ctx: ToolContext) -> str:
    return "ok"


@pytest.mark.parametrize("ttl", [0, -1, True, 1.5, "60000"])
def test_a_tool_declaring_a_ttl_of_zero_or_less_or_not_an_int_is_refused(ttl: Any) -> None:
    with pytest.raises(ValueError, match=r"^short_lived: ttl_ms must be a positive number"):
        tool("short_lived", ttl_ms=ttl)(_body)


@pytest.mark.parametrize("ttl", [None, 1, 60_000])
def test_a_tool_may_declare_a_positive_or_unlimited_ttl(ttl: int | None) -> None:
    tool("long_lived", ttl_ms=ttl)(_body)


@pytest.mark.parametrize("ttl", [0, -5, 1.5, "60000", True])
def test_a_2025_client_asking_for_a_ttl_of_zero_or_less_gets_32602(mcp: Mcp, ttl: Any) -> None:
    session = Session(mcp)
    params = {"name": "echo", "arguments": {"text": "a"}, "task": {"ttl": ttl}}
    reply = session.request("tools/call", params)
    assert reply.status == 200  # 2025-era errors go out with HTTP 200
    assert reply.error["code"] == -32602
    assert "task.ttl must be a positive integer" in reply.error["message"]
