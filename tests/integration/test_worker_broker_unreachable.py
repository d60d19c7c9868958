"""A worker that cannot reach its broker says so in one line and exits 3 (``MCPQ_BROKER_WAIT_S``).

- At start (``mcpq worker``, before it execs Celery: ``ops.runtime.broker_wait``): a broker on a
  closed port is one line naming the URL with its password hidden, exit 3 after the wait, no
  traceback.
- At runtime (``workers.broker_watch``): a worker whose private Redis is killed logs one line and
  exits 3 about the wait later, pool children included (io and prefork pools).
- An outage shorter than the wait is ridden out: the worker reconnects and still runs tasks.

Every server is the test's own: redis-servers on free ports (``ops.harness.stack.Stack``, stopped by
pid), workers as ``mcpq worker`` subprocesses in their own process groups.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpq.ops.harness.children import REPO
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.broker_wait import EXIT_UNREACHABLE, Target, wait_for_services
from mcpq.ops.runtime.processes import free_port, wait_until
from mcpq.shared.redis_urls import redact_url
from mcpq.shared.sealing import new_data_key
from mcpq.shared.settings import DEFAULT_TOOLS, Settings
from tests.support.stacks import LiveStack

HINT = "check REDIS_URL and that the server is running"


def _worker_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MCPQ_") and k not in {"REDIS_URL", "CELERY_BROKER_URL"}
    }
    env.update(
        PYTHONPATH=str(REPO),
        MCPQ_TOOLS="mcpq.demo",
        MCPQ_DATA_KEYS=new_data_key(),
        **extra,
    )
    return env


@pytest.mark.timeout(90)
def test_an_unreachable_broker_at_start_is_one_line_and_exit_3() -> None:
    port = free_port()  # nothing listens there
    url = f"redis://:hunter2@127.0.0.1:{port}/0"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mcpq", "worker"],
        cwd=REPO,
        env=_worker_env(REDIS_URL=url, MCPQ_BROKER_WAIT_S="2"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr

    assert done.returncode == EXIT_UNREACHABLE, output
    assert 1.9 <= elapsed < 30, f"gave up after {elapsed:.1f} s (wait: 2 s)"
    assert "hunter2" not in output
    assert "Traceback" not in output
    shown = f"redis://:***@127.0.0.1:{port}/0"
    assert [line for line in output.splitlines() if "cannot reach" in line] == [
        f"mcpq worker: cannot reach the broker at {shown} for 2 s (Connection refused): {HINT}"
    ], output
    waiting = [line for line in output.splitlines() if "waiting" in line]
    assert len(waiting) <= 1, output  # not one line per attempt
    assert "Celery" not in output and "celery@" not in output  # never exec'd


def test_the_wait_is_a_setting_in_seconds() -> None:
    assert Settings().broker_wait_s == 60.0
    assert Settings.from_env({"MCPQ_BROKER_WAIT_S": "2.5"}).broker_wait_s == 2.5
    assert Settings.from_env({"MCPQ_BROKER_WAIT_S": "0"}).broker_wait_s == 0.0
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(ValueError, match="MCPQ_BROKER_WAIT_S"):
            Settings.from_env({"MCPQ_BROKER_WAIT_S": bad})


def test_passwords_are_hidden_wherever_they_also_appear() -> None:
    assert redact_url("redis://:h1@h1:6379/0") == "redis://:***@h1:6379/0"
    assert redact_url("amqp://guest:pw@rabbit:5672/vh") == "amqp://guest:***@rabbit:5672/vh"
    assert redact_url("redis+sentinel://:pw@s1:26379,s2/mymaster") == (
        "redis+sentinel://:***@s1:26379,s2/mymaster"
    )
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.attempts = 0

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds

    def target(self, fails: int, what: str = "the broker") -> Target:
        def attempt() -> None:
            self.attempts += 1
            if self.attempts <= fails:
                raise ConnectionRefusedError(111, "Connection refused")

        return Target(what, "redis://:pw@h:1/0", "REDIS_URL", attempt)


def test_one_waiting_line_however_many_attempts_and_one_deadline_for_all() -> None:
    clock, out = FakeClock(), io.StringIO()
    status = wait_for_services(
        Settings(broker_wait_s=10),
        out=out,
        clock=lambda: clock.now,
        sleep=clock.sleep,
        found=[clock.target(fails=3), clock.target(fails=10**6, what="the task store")],
    )
    lines = out.getvalue().splitlines()
    assert status == EXIT_UNREACHABLE
    assert clock.attempts > 6 and 10 <= clock.now < 10 + 5  # retried until the one deadline
    assert lines == [
        "mcpq worker: waiting up to 10 s for the broker at redis://:***@h:1/0 (Connection refused)",
        "mcpq worker: cannot reach the task store at redis://:***@h:1/0 for 10 s "
        f"(Connection refused): {HINT}",
    ]


def test_a_broker_that_comes_up_within_the_wait_is_waited_for() -> None:
    clock, out = FakeClock(), io.StringIO()
    status = wait_for_services(
        Settings(broker_wait_s=60),
        out=out,
        clock=lambda: clock.now,
        sleep=clock.sleep,
        found=[clock.target(fails=5)],
    )
    assert (status, clock.attempts, len(out.getvalue().splitlines())) == (0, 6, 1)


def test_a_wait_of_0_gives_up_at_the_first_failure() -> None:
    clock, out = FakeClock(), io.StringIO()
    status = wait_for_services(
        Settings(broker_wait_s=0),
        out=out,
        clock=lambda: clock.now,
        sleep=clock.sleep,
        found=[clock.target(fails=1)],
    )
    assert (status, clock.attempts, clock.now) == (EXIT_UNREACHABLE, 1, 0.0)
    assert "for 0 s (Connection refused)" in out.getvalue()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pool", ["io", "cpu"])
def test_a_worker_that_loses_its_broker_exits_3_after_the_wait(pool: str, tmp_path: Path) -> None:
    stack = LiveStack("lost", tmp_path, tools=DEFAULT_TOOLS)
    try:
        stack.start(webs=0, workers=0)
        url = stack.redis_url
        worker = stack.spawn_pool("mcpq", "lost", pool=pool, MCPQ_BROKER_WAIT_S="3")
        stack.wait_ready(worker)
        worker.remember_descendants()
        assert stack.redis_server is not None
        stack.redis_server.kill()  # by pid: SIGKILL, the broker is gone for good
        lost_at = time.monotonic()

        wait_until(lambda: not worker.alive, timeout=60, interval=0.1, message="worker exit")
        elapsed = time.monotonic() - lost_at
        wait_until(lambda: not worker.leftovers(), timeout=30, interval=0.1, message="pool exit")

        log = worker.log()
        assert worker.popen.returncode == EXIT_UNREACHABLE, worker.tail(60)
        assert 2.5 <= elapsed < 60, f"exited {elapsed:.1f} s after the loss (wait: 3 s)"
        gave_up = [line for line in log.splitlines() if "cannot reach the broker at" in line]
        assert len(gave_up) == 2, worker.tail(60)  # "trying again", then giving up: one each
        assert f"cannot reach the broker at {url} for 3 s" in gave_up[-1]
        assert HINT in gave_up[-1]
        assert "Unrecoverable error" not in log
    finally:
        stack.close()


@pytest.mark.timeout(120)
def test_an_outage_shorter_than_the_wait_is_ridden_out(tmp_path: Path) -> None:
    stack = LiveStack("blip", tmp_path, tools=DEFAULT_TOOLS)
    try:
        stack.start(webs=1, workers=0)
        worker = stack.spawn_pool("mcpq", "blip", pool="io", MCPQ_BROKER_WAIT_S="30")
        stack.wait_ready(worker)

        stack.stop_redis()
        worker.wait_for_log("cannot reach the broker", timeout=30)  # noticed, retrying
        stack.start_redis_again()  # same port, well within the 30 s

        with McpClient(stack.url(0)) as client:

            def created() -> str | None:
                try:
                    return str(client.create_task("slow_compute", {"seconds": 0})["taskId"])
                except Exception:  # the web tier may answer 503 until it reconnects
                    return None

            task_id = wait_until(created, timeout=30, interval=0.2, message="a task created")
            client.wait_for_status(task_id, "completed", timeout=60, interval=0.1)
        assert worker.alive, worker.tail(60)
        assert "for 30 s" not in worker.log()  # it never gave up
    finally:
        stack.close()
