"""What `mcpq dev` keeps beside its state: the data key it generated per Redis URL (so a restart
against a Redis that kept its data still opens its tasks), and the endpoint of a running one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mcpq.ops.dev.state import (
    data_key_path,
    dev_data_key,
    record_state,
    remove_state,
    running_dev_endpoint,
)
from mcpq.shared.sealing import parse_data_keys


def env_in(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}


def test_one_redis_url_keeps_one_key_and_its_password_stays_out_of_the_file(
    tmp_path: Path,
) -> None:
    env = env_in(tmp_path)
    first = dev_data_key(env, "redis://:hunter2@127.0.0.1:6390/0")
    assert parse_data_keys(first) is not None  # a usable MCPQ_DATA_KEYS entry
    assert dev_data_key(env, "redis://:hunter2@127.0.0.1:6390/0") == first  # the next start
    assert dev_data_key(env, "redis://:changed@127.0.0.1:6390/0") == first  # the same server
    assert dev_data_key(env, "redis://127.0.0.1:6391/0") != first  # another one

    path = data_key_path(env)
    assert path == tmp_path / "state" / "mcpq" / "dev-data-keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "hunter2" not in path.read_text() and "changed" not in path.read_text()


def test_a_key_file_readable_by_others_is_made_private_and_another_user_s_is_refused(
    tmp_path: Path,
) -> None:
    env = env_in(tmp_path)
    key = dev_data_key(env, "redis://127.0.0.1:6390/0")
    path = data_key_path(env)
    path.chmod(0o644)
    assert dev_data_key(env, "redis://127.0.0.1:6390/0") == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    if os.geteuid() != 0:
        pytest.skip("giving the file to another user needs root")
    os.chown(path, 12345, 12345)
    with pytest.raises(PermissionError, match="belongs to another user"):
        dev_data_key(env, "redis://127.0.0.1:6390/0")


def test_the_endpoint_of_the_running_dev_is_found_from_its_state_file(tmp_path: Path) -> None:
    env = env_in(tmp_path)
    assert running_dev_endpoint(env) is None
    state = record_state(
        env,
        redis_url="redis://127.0.0.1:6390/0",
        redis_shown="redis://127.0.0.1:6390/0",
        web_url="http://127.0.0.1:8123/mcp",
    )
    assert running_dev_endpoint(env) == "http://127.0.0.1:8123/mcp"
    remove_state(state)
    assert running_dev_endpoint(env) is None
