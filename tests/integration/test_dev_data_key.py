"""`mcpq dev` keeps the data key it generated for a Redis of the developer's (``REDIS_URL``):

- restarted against a Redis that kept its data (AOF), it still reads the tasks of the earlier
  run (before, a new key at every start: "stored task data could not be decrypted");
- the key is in a file of mode 0600 under ``$XDG_STATE_HOME/mcpq``, never on the terminal or in
  the logs;
- a Redis that holds tasks sealed with a key it does not have is refused in one line, before
  anything starts.

Every Redis is the test's own (a persistent ``RedisProcess`` on a free port, stopped by pid).
"""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisProcess
from mcpq.shared.sealing import new_data_key
from mcpq.shared.settings import Settings
from mcpq.shared.store import NewTask, open_store, task_ref
from tests.integration.test_dev_launcher import _kill_leftovers, rpc
from tests.integration.test_dev_quiet import TOOL_MODULE, dev_env, start_dev
from tests.support.procs import OutputLines, free_port, wait_until
from tests.support.redis_server import AOF_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def extra(redis: RedisProcess, tmp_path: Path) -> dict[str, str]:
    """`mcpq dev` against ``redis``, with the module ``shouting`` and a state folder of its own
    (the developer sets no data key: `mcpq dev` generates it)."""
    return {
        "REDIS_URL": redis.url,
        "MCPQ_TOOLS": "shouting",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "MCPQ_DATA_KEYS": "",
    }


def run_dev_until_ready(
    tmp_path: Path, env: dict[str, str]
) -> tuple[OutputLines, int, subprocess.Popen[bytes]]:
    port = free_port()
    launcher = start_dev(tmp_path, port, **env)
    output = OutputLines(launcher)
    try:
        output.wait_for("; Ctrl-C stops", timeout=120)
    except BaseException:
        _kill_leftovers(launcher, set())
        raise
    return output, port, launcher


def stop_dev(launcher: subprocess.Popen[bytes], output: OutputLines) -> None:
    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=60) == 0, output.text[-3000:]
    output.join()


def test_a_restart_on_a_persistent_redis_keeps_earlier_tasks_readable(tmp_path: Path) -> None:
    (tmp_path / "shouting.py").write_text(TOOL_MODULE)
    data = tmp_path / "redis-data"
    data.mkdir()
    with RedisProcess(extra_args=AOF_ARGS, data_dir=data) as redis:
        env = extra(redis, tmp_path)
        # Given a task that completed under a first `mcpq dev`
        output, port, launcher = run_dev_until_ready(tmp_path, env)
        try:
            call = {"name": "shout", "arguments": {"text": "kept"}}
            task_id = rpc(port, "tools/call", call, "shout")["taskId"]
            wait_until(
                lambda: (
                    rpc(port, "tasks/get", {"taskId": task_id}, task_id)["status"] == "completed"
                ),
                timeout=30,
                message="the task to complete",
            )
            stop_dev(launcher, output)
        finally:
            _kill_leftovers(launcher, set())
        first_output = output.text

        # When Redis restarts from its AOF, and `mcpq dev` starts again against it
        redis.restart()
        output, port, launcher = run_dev_until_ready(tmp_path, env)
        try:
            # Then the earlier task opens: its result is readable
            got = rpc(port, "tasks/get", {"taskId": task_id}, task_id)
            assert got["status"] == "completed", got
            assert got["result"]["content"][0]["text"] == "KEPT", got
            stop_dev(launcher, output)
        finally:
            _kill_leftovers(launcher, set())

    # And the key is in a file of this user's only, never on the terminal or in a log file
    keys = tmp_path / "state" / "mcpq" / "dev-data-keys.json"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys.parent.stat().st_mode) == 0o700
    key = keys.read_text().split('"')[-2]  # {"keys": {"<url>": "<id>:<key>"}}
    secret = key.partition(":")[2]
    assert len(secret) >= 40, key
    logs = tmp_path / "run" / "mcpq"
    shown = [first_output, output.text, *(p.read_text() for p in logs.glob("dev-*/*.log"))]
    assert not any(secret in text for text in shown)


def test_a_redis_holding_tasks_sealed_with_another_key_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    with RedisProcess(extra_args=IN_MEMORY_ARGS) as redis:
        # Given a Redis holding a task sealed with a key this `mcpq dev` does not have
        foreign = new_data_key()
        store = open_store(Settings.from_env({"REDIS_URL": redis.url, "MCPQ_DATA_KEYS": foreign}))
        spec = NewTask(
            ref=task_ref("task-sealed-elsewhere"),
            tool="shout",
            queue="mcpq",
            owner="someone",
            arguments={"text": "secret"},
            caps={},
            ttl_ms=600_000,
            poll_ms=500,
        )
        assert store.create(spec, 60_000) is not None
        store.close()

        # When `mcpq dev` starts against it
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "mcpq", "dev", "--port", str(free_port())],
            cwd=tmp_path,
            env=dev_env(tmp_path, **extra(redis, tmp_path)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - started

    # Then it refuses in one line naming the key's id and the fix, and starts nothing
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    kid = foreign.partition(":")[0]
    assert lines == [
        f"mcpq | Redis at {redis.url} (REDIS_URL) holds tasks sealed with data key '{kid}', "
        "which MCPQ_DATA_KEYS does not hold: set MCPQ_DATA_KEYS to the entry that sealed them, "
        "or point REDIS_URL at another database"
    ], lines
    assert done.returncode == 1
    assert took < 20, f"{took:.1f} s: something was started first"
    assert not (tmp_path / "run" / "mcpq").exists(), "no state file, no log folder"
