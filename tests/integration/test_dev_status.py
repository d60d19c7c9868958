"""`mcpq status` beside a running `mcpq dev` with ``REDIS_URL`` unset: the launcher records its
Redis in a per-user state file (mode 0600), status finds it and says so on its first line, and
the file goes when the launcher stops."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mcpq.ops.cli.status import locate_redis
from tests.support.procs import (
    OutputLines,
    free_port,
    kill_process_group,
    start_process_group,
)

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def environment(runtime: Path) -> dict[str, str]:
    """The caller's environment without REDIS_URL, with a private runtime directory."""
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "MCPQ_SECRET", "PORT"}}
    pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(
        XDG_RUNTIME_DIR=str(runtime),
        PYTHONPATH=os.pathsep.join(pythonpath),
        PYTHONUNBUFFERED="1",
        WEB_CONCURRENCY="1",
    )
    return env


def test_status_finds_a_running_dev_and_names_its_redis(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = environment(runtime)
    port = free_port()
    launcher = start_process_group(
        [sys.executable, "-m", "mcpq", "dev", "--port", str(port), "--no-worker"],
        env=env,
        cwd=str(REPO),
    )
    output = OutputLines(launcher)
    try:
        output.wait_for(f"http://127.0.0.1:{port}/mcp", timeout=90)
        state = runtime / "mcpq" / "dev.json"
        assert stat.S_IMODE(state.stat().st_mode) == 0o600
        redis_line = output.wait_for("mcpq | redis: ", timeout=5)
        dev_url = redis_line.split("mcpq | redis: ", 1)[1].split()[0]

        run = subprocess.run(
            [sys.executable, "-m", "mcpq", "status", "--no-ping"],
            env=env,
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        first = run.stdout.splitlines()[0]
        assert first.startswith(f"redis: {dev_url} (the running mcpq dev, pid {launcher.pid}")
        assert "REDIS_URL is unset" in first
        assert "tasks:" in run.stdout

        # Ctrl-C: the launcher removes its file; status then says it uses the default
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=30) == 0, output.text[-4000:]
        assert not state.exists()
        assert "no mcpq dev is running" in locate_redis(env).line
    finally:
        kill_process_group(launcher, timeout=5)


def test_a_stale_or_foreign_state_file_is_ignored(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = tmp_path / "mcpq" / "dev.json"
    state.parent.mkdir()
    state.write_text(
        f'{{"pid": {dead.pid}, "redis_url": "redis://127.0.0.1:1/0", '
        '"redis_shown": "redis://127.0.0.1:1/0", "web_url": ""}'
    )
    state.chmod(0o600)
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    assert "no mcpq dev is running" in locate_redis(env).line, "its pid is gone"
    state.write_text(state.read_text().replace(str(dead.pid), str(os.getpid())))
    assert "the running mcpq dev" in locate_redis(env).line
    assert locate_redis(env).environ["REDIS_URL"] == "redis://127.0.0.1:1/0"
    state.chmod(0o666)
    assert "no mcpq dev is running" in locate_redis(env).line, "writable by others"
    assert locate_redis({**env, "REDIS_URL": "redis://:pw@h:1/0"}).line == (
        "redis: redis://:***@h:1/0 (REDIS_URL)"
    )


def test_status_of_an_unreachable_redis_is_one_line_and_exit_1(tmp_path: Path) -> None:
    env = environment(tmp_path)
    env["REDIS_URL"] = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    run = subprocess.run(
        [sys.executable, "-m", "mcpq", "status"],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("mcpq status: task store unavailable")
    assert (
        f"redis: redis://:***@127.0.0.1:{env['REDIS_URL'].rsplit(':', 1)[1].split('/')[0]}"
        in lines[0]
    )
    assert "hunter2" not in run.stderr
