"""``mcpq status`` on a store it cannot read: one line naming the Redis it tried, exit 1."""

from __future__ import annotations

import pytest

from mcpq.ops.cli.main import main
from mcpq.ops.runtime.processes import free_port


def test_an_unreachable_redis_is_one_line_with_its_redacted_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    env = {"REDIS_URL": url, "MCPQ_DATA_KEYS": "plaintext", "MCPQ_REDIS_TIMEOUT_S": "0.5"}
    assert main(["status", "--no-ping"], environ=env) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mcpq status: task store unavailable"), err
    assert "Connection refused" in err and "hunter2" not in err and ":***@" in err


def test_a_malformed_data_key_is_one_line_naming_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0", "MCPQ_DATA_KEYS": "short"}
    assert main(["status", "--no-ping"], environ=env) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MCPQ_DATA_KEYS" in err, err
