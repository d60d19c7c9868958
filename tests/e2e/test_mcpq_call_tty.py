"""`mcpq call` / `mcpq task` under a real pseudo-terminal (pexpect), against a live stack."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.stacks import LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cli_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = LiveStack("clitty", tmp_path_factory.mktemp("clitty"), tools=DEFAULT_TOOLS)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def env_for(stack: Stack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    return {**env, "MCPQ_URL": stack.url(0), "TERM": "xterm", "COLUMNS": "100", "NO_COLOR": "1"}


def spawn(stack: Stack, *args: str, preexec_fn: Callable[[], None] | None = None) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "mcpq", *args],
        cwd=str(REPO),
        env=env_for(stack),
        encoding="utf-8",
        timeout=30,
        preexec_fn=preexec_fn,
    )


def sigint_ignored_and_blocked() -> None:
    """What a launcher may leave behind (both survive exec): SIGINT ignored, as a shell without
    job control starts a background job (a test run started with `&`), and blocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def press_ctrl_c(child: pexpect.spawn) -> None:
    """Type the interrupt character of the child's terminal (`sendintr` would send the one of
    the terminal the tests run in, if any)."""
    child.send(termios.tcgetattr(child.child_fd)[6][termios.VINTR].decode())


def mcpq(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpq", *args],
        cwd=REPO,
        env=env_for(stack),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_call_answers_the_form_from_the_keyboard(cli_stack: Stack) -> None:
    child = spawn(cli_stack, "call", "approve_deployment", "service=api", "version=1")
    child.expect("Approve deploying api 1 to production")
    child.expect("accept/decline/cancel")
    child.sendline("accept")
    child.expect(r"Approve.*Deploy it now\?")  # the form's field: its title and description
    child.sendline("y")
    child.expect("Why")
    child.sendline("")
    child.expect("Deployed api 1.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_cancels_the_task(cli_stack: Stack) -> None:
    """Whatever SIGINT state the client inherits: with Python's defaults, a client started with
    SIGINT ignored or blocked never heard the key, and its status line went on."""
    argv = ("call", "slow_compute", "seconds=60", "label=tty", "--output", "json")
    child = spawn(cli_stack, *argv, preexec_fn=sigint_ignored_and_blocked)
    child.expect("computing tty")  # the live status line shows the tool's statusMessage
    press_ctrl_c(child)
    child.expect("cancelling the task")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 4, child.before
    # stdout and stderr share the terminal (and the status line's escapes): find the object.
    (line,) = [x for x in child.before.splitlines() if '{"status"' in x]
    body = json.loads(line[line.index("{") :])
    assert body["status"] == "cancelled"
    with McpClient(cli_stack.url(0)) as raw:
        assert raw.task(body["taskId"])["status"] == "cancelled"


def test_detach_then_task_get_and_json_output(cli_stack: Stack) -> None:
    started = mcpq(cli_stack, "call", "slow_compute", "seconds=0.5", "label=bg", "--detach")
    assert started.returncode == 0, started.stderr
    task_id = started.stdout.strip()
    assert task_id and " " not in task_id
    with McpClient(cli_stack.url(0)) as raw:
        raw.wait_for_status(task_id, "completed", timeout=20)
    got = mcpq(cli_stack, "task", "get", task_id, "--output", "json")
    assert got.returncode == 0, got.stderr
    body = json.loads(got.stdout)
    assert body["taskId"] == task_id and body["status"] == "completed"
    assert body["result"]["content"][0]["text"] == "bg: computed in 0.5s"
    text = mcpq(cli_stack, "task", "get", task_id)
    assert text.stdout.strip() == "bg: computed in 0.5s"


def test_exit_codes_and_bad_input(cli_stack: Stack) -> None:
    tool_error = mcpq(cli_stack, "call", "failing_job")
    assert tool_error.returncode == 1 and "failed on purpose" in tool_error.stderr
    failed = mcpq(cli_stack, "call", "protocol_error_job", "--output", "json")
    assert failed.returncode == 3 and json.loads(failed.stdout)["status"] == "failed"
    bad = mcpq(cli_stack, "call", "slow_compute", "seconds=soon")
    assert bad.returncode == 2 and "seconds: expected a number" in bad.stderr
    unknown = mcpq(cli_stack, "call", "no_such_tool")
    assert unknown.returncode == 2 and "no tool 'no_such_tool'" in unknown.stderr
    gone = mcpq(cli_stack, "task", "get", "no-such-task")
    assert gone.returncode == 5 and "Traceback" not in gone.stderr
    # A tool that never runs as a task answers at once.
    greet = mcpq(cli_stack, "call", "greet", "--json", '{"name": "tty"}')
    assert greet.returncode == 0 and greet.stdout.strip() == "Hello, tty!"
