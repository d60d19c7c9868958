"""A 10 s outage of the developer's Redis (``REDIS_URL``) under a busy `mcpq dev` is a few honest
lines on the terminal, and the details are in the children's log files.

Before: about 500 lines with some 20 tracebacks (every refused call, every reconnect, Celery's
``UnpickleableExceptionWrapper`` for each run the outage stopped, its deprecation warning, the
relayed noise of each child). Now: at most 6 lines (the launcher's "unreachable" and "reachable
again", and what a child says once it is over), no traceback, no ``UnpickleableExceptionWrapper``,
no ``CPendingDeprecationWarning``; and afterwards the stack serves again.

The Redis is the test's own (AOF on, a free port), killed with SIGKILL and started again on the
same port and data by pid, never by name.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest

from mcpq.ops.runtime.redis_binary import RedisProcess
from tests.integration.test_dev_launcher import _kill_leftovers, post, rpc
from tests.integration.test_dev_quiet import start_dev
from tests.integration.test_dev_reload import PROTOCOL
from tests.support.procs import OutputLines, free_port, wait_until
from tests.support.redis_server import AOF_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(300)]

SLOW_TOOL = '''
from mcpq.shared.tools import ToolContext, tool


@tool(task="required")
def slow(ctx: ToolContext, seconds: int) -> str:
    """Reports and sleeps, a second at a time."""
    for i in range(seconds):
        ctx.report(f"second {i}")
        ctx.sleep(1)
    return "slept"
'''


class Poller:
    """A client asking for a task's state twice a second (through the outage too)."""

    def __init__(self, port: int, task_id: str) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}
            },
        }
        self._body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {"taskId": task_id, "_meta": meta},
        }
        self._port, self._task_id = port, task_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=40)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            # The web answers 503 during the outage; a connection it refuses is fine too.
            with contextlib.suppress(OSError):
                post(self._port, self._body, "tasks/get", self._task_id)


def test_a_10_s_redis_outage_is_at_most_6_lines_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "slowtools.py").write_text(SLOW_TOOL)
    data = tmp_path / "redis-data"
    data.mkdir()
    with RedisProcess(extra_args=AOF_ARGS, data_dir=data) as redis:
        port = free_port()
        launcher = start_dev(
            tmp_path,
            port,
            REDIS_URL=redis.url,
            MCPQ_TOOLS="mcpq.demo,slowtools",
            XDG_STATE_HOME=str(tmp_path / "state"),
        )
        output = OutputLines(launcher)
        try:
            output.wait_for("; Ctrl-C stops", timeout=120)
            # Given runs in both pools, and a client polling one of them
            slow = {"name": "slow", "arguments": {"seconds": 60}}
            report = {"name": "build_report", "arguments": {"topic": "outage", "steps": 60}}
            tasks = [rpc(port, "tools/call", slow, "slow")["taskId"] for _ in range(2)]
            tasks.append(rpc(port, "tools/call", report, "build_report")["taskId"])
            time.sleep(2)  # the runs have started
            before = len(output.lines)

            with Poller(port, tasks[0]):
                # When Redis is away for 10 s
                redis.kill()
                time.sleep(10)
                redis.start()  # the same port and data
                output.wait_for("mcpq | Redis reachable again", timeout=30)
                time.sleep(8)  # what the children say once it is over
            said = [line.rstrip("\n") for line in output.lines[before:]]
            text = "\n".join(said)

            # Then the terminal shows a few lines: when it went, when it came back
            assert len(said) <= 6, text
            assert said[0].startswith(
                f"mcpq | Redis at {redis.url} (REDIS_URL) is unreachable (Connection refused): "
                "web and workers retry until it is back; their lines go to "
            ), text
            assert "Traceback" not in text
            assert "UnpickleableExceptionWrapper" not in text
            assert "CPendingDeprecationWarning" not in text

            # And the details are in the children's log files, without Celery's wrapper
            logs = tmp_path / "run" / "mcpq" / f"dev-{port}"
            web_log = (logs / "web.log").read_text()
            worker_logs = (logs / "worker.log").read_text() + (logs / "bulk.log").read_text()
            assert "call refused for now" in web_log  # the poller's 503s
            assert "cannot reach the broker" in worker_logs
            assert "reached the broker at" in worker_logs  # the outage's end, in the log too
            assert "UnpickleableExceptionWrapper" not in worker_logs
            assert "CPendingDeprecationWarning" not in worker_logs
            assert "Error on restarting Gossip" not in worker_logs

            # And the stack serves again: a new run completes
            quick = {"name": "slow", "arguments": {"seconds": 1}}
            ref = {"taskId": rpc(port, "tools/call", quick, "slow")["taskId"]}
            wait_until(
                lambda: rpc(port, "tasks/get", ref, ref["taskId"])["status"] == "completed",
                timeout=60,
                message="a run after the outage to complete",
            )
        finally:
            _kill_leftovers(launcher, set())
