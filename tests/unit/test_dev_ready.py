"""`mcpq dev`'s readiness counts only its own web child, and its parent-death guard refuses to
run a command whose launcher is already gone."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from mcpq.ops.dev.ready import DevWorker, own_web_answers, ready_block, web_answers
from mcpq.ops.runtime import parent_death


@pytest.fixture
def foreign_server() -> Iterator[int]:
    """An HTTP server of this test process on a free loopback port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's socket table")
def test_an_answer_from_another_process_on_the_port_is_not_readiness(foreign_server: int) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert web_answers(foreign_server)  # something answers ...
        assert not own_web_answers(other.pid, foreign_server)  # ... but not the web child
        assert own_web_answers(os.getpid(), foreign_server)  # the listener's owner counts
    finally:
        other.kill()
        other.wait()


def test_the_guard_runs_nothing_when_its_launcher_is_gone() -> None:
    marker = "echo should-not-run"
    # The "launcher" pid is not this process's parent: the launcher died before the signal
    # could be armed, so the command must not start (it would outlive everything).
    assert parent_death.main([str(os.getppid() + 1_000_000), "15", "sh", "-c", marker]) == 1


def test_the_guard_arms_the_signal_and_execs_the_command() -> None:
    argv = parent_death.guarded([sys.executable, "-c", "print('ran')"])
    assert argv[:3] == [sys.executable, "-m", "mcpq.ops.runtime.parent_death"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr


def test_the_ready_block_is_short_and_names_late_workers() -> None:
    workers = [
        DevWorker("worker", "mcpq-mcpq@", "io", 100, "mcpq"),
        DevWorker("bulk", "mcpq-bulk@", "cpu", 1, "bulk"),
    ]
    lines = ready_block(
        redis="redis://127.0.0.1:1/0 (REDIS_URL)",
        tools=[f"t{i}" for i in range(12)],
        modules="a,b",
        workers=workers,
        late=workers[1:],
        endpoint="http://127.0.0.1:8000/mcp",
        flower="http://127.0.0.1:5555/",
        logs="/tmp/logs",
        served={"resources": [{}], "templates": [], "prompts": [{}, {}]},
    )
    assert len(lines) <= 8
    assert (
        "tools from a,b: t0, t1, t2, t3, t4, t5, … (12 in all); "
        "also 1 resource, 2 prompts (mcpq tools lists them)"
    ) in lines
    assert (
        "workers: mcpq-mcpq (io pool, 100 threads, queue mcpq); "
        "mcpq-bulk (cpu pool, 1 process, queue bulk)" in lines
    )
    assert "bulk has not reported yet: its tools wait until it does" in lines


def test_a_tool_module_that_declares_nothing_is_a_warning_in_the_block() -> None:
    warning = "module 'empty' declares no tool: mark its tool functions with @tool"
    lines = ready_block(
        redis="redis://127.0.0.1:1/0 (REDIS_URL)",
        tools=[],
        modules="empty",
        workers=[],
        late=[],
        endpoint="http://127.0.0.1:8000/mcp",
        flower=None,
        logs=None,
        warnings=[warning],
    )
    assert lines[1:3] == ["tools from empty: none", f"warning: {warning}"]
