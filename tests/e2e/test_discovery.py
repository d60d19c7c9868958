"""``server/discover`` and ``tools/list`` on the live stack."""

from __future__ import annotations

import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.shared.protocol import PROTOCOL_VERSION, TASKS_EXTENSION

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def test_discover_advertises_the_tasks_extension(client: McpClient) -> None:
    result = client.request("server/discover", tasks=False).result
    assert result["supportedVersions"] == [PROTOCOL_VERSION]
    assert result["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}
    assert "tasks" not in result["capabilities"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]


def test_tools_list_includes_the_fixture_and_test_tools(client: McpClient) -> None:
    result = client.request("tools/list").result
    names = {t["name"] for t in result["tools"]}
    assert {"greet", "slow_compute", "failing_job", "confirm_delete", "multi_input"} <= names
    assert "touch_then_sleep" in names, "MCPQ_TOOLS loaded tests.e2e.tools_fixture"


def test_tools_list_is_a_cacheable_result(client: McpClient) -> None:
    result = client.request("tools/list").result
    assert isinstance(result.get("ttlMs"), int) and result["ttlMs"] >= 0, result.keys()
    assert result.get("cacheScope") in {"public", "private"}, result.keys()
