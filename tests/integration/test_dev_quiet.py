"""An honest, quiet `mcpq dev`:

- start-up is a short block (Redis, tools, workers and pools, endpoint), at most 15 lines, and it
  appears only once its own web child answers and each worker has sent a heartbeat; the
  children's banners are in log files (and on screen with ``--verbose``);
- a tool module in the folder `mcpq dev` runs in is found, by the web and the workers;
- a tool module that does not import is one line naming ``MCPQ_TOOLS`` and the module, before
  anything starts;
- killed with SIGKILL, it takes every child with it (Celery workers lead sessions of their own);
- stopping it logs no ``Bad file descriptor`` from gunicorn's workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_dev_launcher import alive, launcher_env, rpc
from tests.support.procs import (
    OutputLines,
    descendant_pids,
    free_port,
    kill_process_group,
    start_process_group,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOOL_MODULE = '''
from mcpq.shared.tools import ToolContext, tool


@tool(task="required")
def shout(ctx: ToolContext, text: str) -> str:
    """Upper-case the text."""
    return text.upper()
'''


def dev_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # mcpq itself stays importable (PYTHONPATH names the checkout); the tool module is found
    # only because the launcher makes its own folder importable. The runtime folder (state
    # file, logs) is tmp_path/run.
    env = launcher_env(tmp_path)
    env.update(extra)
    return env


def start_dev(tmp_path: Path, port: int, *args: str, **extra: str) -> subprocess.Popen[bytes]:
    (tmp_path / "run").mkdir(exist_ok=True)
    return start_process_group(
        [sys.executable, "-m", "mcpq", "dev", "--port", str(port), *args],
        env=dev_env(tmp_path, **extra),
        cwd=str(tmp_path),
    )


def test_quiet_start_is_a_short_block_serves_the_folder_s_tools_and_dies_with_its_launcher(
    tmp_path: Path,
) -> None:
    (tmp_path / "shouting.py").write_text(TOOL_MODULE)
    port = free_port()
    launcher = start_dev(tmp_path, port, MCPQ_TOOLS="shouting")
    output = OutputLines(launcher)
    tree: set[int] = set()
    try:
        # Given a launcher that says it is ready
        output.wait_for("; Ctrl-C stops", timeout=120)
        lines = [line.rstrip() for line in output.lines if line.strip()]

        # Then start-up took at most 15 lines, and they name what runs where
        assert len(lines) <= 15, "\n".join(lines)
        text = "\n".join(lines)
        assert f"mcpq | MCP endpoint: http://127.0.0.1:{port}/mcp" in lines, text
        assert "mcpq | tools from shouting: shout" in lines, text
        assert "workers: mcpq-mcpq (io pool, " in text, text
        assert "mcpq-bulk (cpu pool, 1 process, queue bulk)" in text, text
        assert "redis: redis://127.0.0.1:" in text, text
        assert "has not reported yet" not in text, text  # both workers were seen
        assert not any(line.startswith(("web |", "worker |", "bulk |")) for line in lines), text
        assert "Traceback" not in text
        # And the children's start-up output went to their log files instead
        logs = tmp_path / "run" / "mcpq" / f"dev-{port}"
        assert "Booting worker" not in (logs / "web.log").read_text()  # WARNING level
        assert {"web.log", "worker.log", "bulk.log", "redis.log"} <= {
            p.name for p in logs.iterdir()
        }

        # When a client runs the folder's tool as a task, the worker found the module too
        created = rpc(port, "tools/call", {"name": "shout", "arguments": {"text": "hi"}}, "shout")
        ref = {"taskId": created["taskId"]}
        done = wait_until(
            lambda: (
                (t := rpc(port, "tasks/get", ref, ref["taskId"]))["status"] == "completed" and t
            ),
            timeout=30,
            message="the task to complete",
        )
        assert done["result"]["content"][0]["text"] == "HI"

        # When the launcher is killed outright
        tree = descendant_pids(launcher.pid)
        assert len(tree) >= 6, tree  # redis, gunicorn + workers, two celery nodes (+ pool)
        os.kill(launcher.pid, signal.SIGKILL)

        # Then every process it started goes with it
        try:
            wait_until(lambda: not alive(tree), timeout=30, message="the children to exit")
        except TimeoutError:
            pytest.fail(f"still running after the launcher's SIGKILL: {sorted(alive(tree))}")
    finally:
        kill_process_group(launcher, timeout=5)
        for pid in alive(tree):
            os.kill(pid, signal.SIGKILL)


def test_verbose_shows_the_children_and_stopping_logs_no_socket_error(tmp_path: Path) -> None:
    port = free_port()
    launcher = start_dev(tmp_path, port, "--verbose")
    output = OutputLines(launcher)
    try:
        output.wait_for("; Ctrl-C stops", timeout=120)
        assert "Booting worker with pid" in output.text  # gunicorn, at INFO
        assert "[queues]" not in output.text or "mcpq-mcpq" in output.text
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=30) == 0
        output.join()
        assert "mcpq | stopped" in output.text, output.text[-3000:]
        assert "Shutting down: Master" in output.text  # gunicorn's stop was logged ...
        assert "Bad file descriptor" not in output.text  # ... without a socket error
        assert "Error while closing socket" not in output.text
    finally:
        kill_process_group(launcher, timeout=5)


def run_dev_briefly(tmp_path: Path, **extra: str) -> tuple[int, list[str], float]:
    (tmp_path / "run").mkdir(exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mcpq", "dev", "--port", str(free_port())],
        cwd=tmp_path,
        env=dev_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return done.returncode, lines, time.monotonic() - started


def test_a_missing_tool_module_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    code, lines, took = run_dev_briefly(tmp_path, MCPQ_TOOLS="nosuchmod")
    assert code == 1
    assert lines == [
        "mcpq | MCPQ_TOOLS=nosuchmod: no module named 'nosuchmod' here: tool modules are "
        "found in the current folder and on PYTHONPATH"
    ], lines
    assert took < 20, f"{took:.1f} s: something was started first"


def test_a_tool_module_that_fails_is_one_line_naming_it_and_the_cause(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import json\n\nraise RuntimeError('boom at import')\n")
    (tmp_path / "needs.py").write_text("import nosuchdependency  # noqa\n")
    code, lines, _ = run_dev_briefly(tmp_path, MCPQ_TOOLS="mcpq.demo,broken")
    assert code == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith("mcpq | MCPQ_TOOLS=mcpq.demo,broken: module 'broken' failed"), lines
    assert "RuntimeError: boom at import" in lines[0]
    assert f"{tmp_path / 'broken.py'}:3" in lines[0]

    code, lines, _ = run_dev_briefly(tmp_path, MCPQ_TOOLS="needs")
    assert code == 1
    assert lines == [
        "mcpq | MCPQ_TOOLS=needs: module 'needs' failed to import: ModuleNotFoundError: "
        "No module named 'nosuchdependency'"
    ], lines
