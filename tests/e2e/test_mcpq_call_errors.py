"""`mcpq call` / `mcpq task` against a real `mcpq web` that refuses: one line per refusal naming
the HTTP status and what to do, exit 5; a question with no terminal to ask it on, exit 6 (and the
task `mcpq call` started is cancelled); `--answer` answers without a terminal; with neither
``--url`` nor ``MCPQ_URL``, the running `mcpq dev` is found.

The stack: API keys (``mcpq keys create``) that must grant the scope ``mcp``
(``MCPQ_OAUTH_SCOPES``), ``Host: 127.0.0.1`` only, one unfinished task per principal.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpq.ops.dev.state import record_state
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.redis_server import AOF_ARGS
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
MCPQ = [sys.executable, "-m", "mcpq"]
APPROVE = ("approve_deployment", "service=api", "version=1")


@pytest.fixture(scope="module")
def auth_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {
        **FAST_KNOBS,
        "MCPQ_AUTH": "apikey",
        "MCPQ_OAUTH_SCOPES": "mcp",
        "MCPQ_ALLOWED_HOSTS": "127.0.0.1",
        "MCPQ_MAX_OPEN_TASKS": "1",
    }
    workdir = tmp_path_factory.mktemp("call-errors")
    running = LiveStack("callerr", workdir, tools=DEFAULT_TOOLS, env=env, redis_args=AOF_ARGS)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def make_key(stack: Stack, name: str, *scopes: str) -> str:
    argv = [*MCPQ, "keys", "create", name, *(f"--scope={scope}" for scope in scopes)]
    made = subprocess.run(
        argv, env=stack.child_env(), capture_output=True, text=True, timeout=30, check=True
    )
    return made.stdout.strip()


@pytest.fixture(scope="module")
def key(auth_stack: Stack) -> str:
    return make_key(auth_stack, "cli", "mcp")


def mcpq(
    stack: Stack,
    *args: str,
    token: str | None = None,
    url: str | None = "",
    stdin: str | None = None,
    runtime_dir: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The client as a user runs it: ``url`` ``""`` is the stack's (as ``MCPQ_URL``), ``None``
    none at all; no `mcpq dev` runs unless ``runtime_dir`` holds its state file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    env["XDG_RUNTIME_DIR"] = str(runtime_dir or os.devnull)  # no state file can be there
    if url is not None:
        env["MCPQ_URL"] = url or stack.url(0)
    if token is not None:
        env["MCPQ_TOKEN"] = token
    return subprocess.run(
        [*MCPQ, *args],
        cwd=REPO,
        env=env,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refused_with(done: subprocess.CompletedProcess[str], line: str) -> None:
    """Exit 5 and exactly that one line on stderr."""
    assert (done.returncode, done.stderr) == (5, f"{line}\n"), done.stderr


def test_no_key_is_a_401_saying_which_variable_to_set(auth_stack: Stack) -> None:
    refused_with(
        mcpq(auth_stack, "call", "greet", "name=x"), "mcpq call: 401 no API key (set MCPQ_TOKEN)"
    )
    gone = mcpq(auth_stack, "task", "get", "some-task")
    refused_with(gone, "mcpq task: 401 no API key (set MCPQ_TOKEN)")


def test_a_revoked_key_is_a_401_that_never_shows_the_key(auth_stack: Stack) -> None:
    token = make_key(auth_stack, "leaver", "mcp")
    subprocess.run(
        [*MCPQ, "keys", "revoke", token.split("_")[1]],
        env=auth_stack.child_env(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    done = mcpq(auth_stack, "call", "greet", "name=x", token=token)
    refused_with(done, "mcpq call: 401 the key was revoked or is wrong")
    # The secret whole: it is URL-safe base64, so it may hold "_" itself (and start with one,
    # which left this check looking for "" in every 64th run).
    secret = token.split("_", 2)[2]
    assert len(secret) == 43 and secret not in done.stderr
    wrong = mcpq(auth_stack, "call", "greet", "name=x", "--token", "mcpq_not-a-key")
    refused_with(wrong, "mcpq call: 401 the key was revoked or is wrong")
    assert "not-a-key" not in wrong.stderr


def test_a_key_without_the_scope_is_a_403_naming_it(auth_stack: Stack) -> None:
    token = make_key(auth_stack, "narrow")
    refused_with(
        mcpq(auth_stack, "call", "greet", "name=x", token=token), "mcpq call: 403 missing scope mcp"
    )


def test_a_host_the_server_does_not_answer_to_is_a_421(auth_stack: Stack, key: str) -> None:
    other_name = auth_stack.url(0).replace("127.0.0.1", "localhost")
    port = other_name.split(":")[2].split("/")[0]
    done = mcpq(auth_stack, "call", "greet", "name=x", token=key, url=other_name)
    refused_with(
        done,
        f"mcpq call: 421 this server does not answer to host localhost:{port} "
        "(set MCPQ_ALLOWED_HOSTS)",
    )


def test_a_path_that_is_not_the_endpoint_is_a_404(auth_stack: Stack, key: str) -> None:
    wrong = auth_stack.url(0).removesuffix("/mcp") + "/nothing"
    done = mcpq(auth_stack, "call", "greet", "name=x", token=key, url=wrong)
    refused_with(done, f"mcpq call: 404 no MCP endpoint at {wrong} (check --url or MCPQ_URL)")


def test_a_server_that_is_not_running_is_named(auth_stack: Stack) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
    done = mcpq(auth_stack, "call", "greet", "name=x", url=url)
    refused_with(
        done, f"mcpq call: cannot reach {url}: connection refused (is the server running?)"
    )


def test_a_limit_is_a_429_saying_when_to_retry(auth_stack: Stack) -> None:
    token = make_key(auth_stack, "busy", "mcp")
    first = mcpq(auth_stack, "call", "slow_compute", "seconds=60", "--detach", token=token)
    assert first.returncode == 0, first.stderr
    try:
        second = mcpq(auth_stack, "call", "slow_compute", "seconds=1", token=token)
        assert second.returncode == 5, second.stderr
        assert re.fullmatch(
            r"mcpq call: 429 Too many unfinished tasks \(MCPQ_MAX_OPEN_TASKS\): retry in \d+ s\n",
            second.stderr,
        ), second.stderr
    finally:
        mcpq(auth_stack, "task", "cancel", first.stdout.strip(), token=token)


def tasks_of(stack: Stack, token: str) -> list[str]:
    """The statuses of the principal's tasks, read from the store (`mcpq tasks list`)."""
    principal = f"key:{token.split('_')[1]}"
    listed = subprocess.run(
        [*MCPQ, "tasks", "list", "--principal", principal, "--output", "json"],
        env=stack.child_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return sorted(task["status"] for task in json.loads(listed.stdout)["tasks"])


def test_a_question_with_no_terminal_is_not_asked_and_the_task_is_cancelled(
    auth_stack: Stack,
) -> None:
    """``echo | mcpq call ...`` used to read the pipe and stop on ``http://...: EOFError: EOF
    when reading a line``, leaving the task waiting for an answer until its TTL."""
    token = make_key(auth_stack, "ci", "mcp")
    done = mcpq(auth_stack, "call", *APPROVE, token=token, stdin="\n")
    assert done.returncode == 6, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "mcpq call: cannot prompt: stdin is not a terminal "
        "(answer with --answer KEY=JSON or run in a terminal)"
    )
    assert "Approve deploying api 1 to production?" in done.stderr  # the question is shown
    assert tasks_of(auth_stack, token) == ["cancelled"]


def test_answers_given_up_front_need_no_terminal(auth_stack: Stack) -> None:
    token = make_key(auth_stack, "pipeline", "mcp")
    answers = ("--answer", "approve=true", "--answer", 'reason="release train"')
    done = mcpq(auth_stack, "call", *APPROVE, *answers, token=token)
    assert (done.returncode, done.stdout) == (0, "Deployed api 1.\n"), done.stderr
    # and from another command, for a task started with --detach
    started = mcpq(auth_stack, "call", *APPROVE, "--detach", token=token)
    task_id = started.stdout.strip()
    deadline = time.monotonic() + 30
    while not mcpq(auth_stack, "task", "get", task_id, token=token).stdout.startswith(
        "input_required"
    ):
        assert time.monotonic() < deadline, "the task never asked"
        time.sleep(0.2)
    answered = mcpq(auth_stack, "task", "answer", task_id, "--answer", "approve=false", token=token)
    assert answered.returncode == 0 and "answered 1" in answered.stderr, answered.stderr
    watched = mcpq(auth_stack, "task", "watch", task_id, token=token)
    assert watched.stdout == "Deployment of api 1 was not approved.\n", watched.stderr


def test_call_and_task_find_a_running_mcpq_dev(auth_stack: Stack, key: str, tmp_path: Path) -> None:
    """`mcpq dev --port N` records its endpoint; with neither --url nor MCPQ_URL, `mcpq call`
    used to go to port 8000 whatever N was."""
    record_state(
        {"XDG_RUNTIME_DIR": str(tmp_path)},
        redis_url=auth_stack.redis_url,
        redis_shown=auth_stack.redis_url,
        web_url=auth_stack.url(0),
    )
    done = mcpq(auth_stack, "call", "greet", "name=dev", token=key, url=None, runtime_dir=tmp_path)
    assert (done.returncode, done.stdout) == (0, "Hello, dev!\n"), done.stderr
    gone = mcpq(
        auth_stack, "task", "get", "no-such-task", token=key, url=None, runtime_dir=tmp_path
    )
    refused_with(gone, "mcpq task: 400 Failed to retrieve task: Task not found (code -32602)")


def test_zz_a_store_outage_is_a_503_saying_when_to_retry(auth_stack: Stack, key: str) -> None:
    """Last in the module: the stack's Redis is stopped for it (and started again, its data kept
    on disk)."""
    auth_stack.stop_redis()
    try:
        done = mcpq(auth_stack, "call", "greet", "name=x", token=key)
    finally:
        auth_stack.start_redis_again()
    assert done.returncode == 5, done.stderr
    assert re.fullmatch(r"mcpq call: 503 task store unavailable: retry in \d+ s\n", done.stderr), (
        done.stderr
    )
