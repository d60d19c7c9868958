"""Ctrl-C while `mcpq call` follows a task, against a scripted server (no stack).

Each press is a real SIGINT sent to this process's main thread at a chosen step (while a request
is in flight, while the cancel is sent, in a prompt, as the live display stops), so the state it
lands in is the same on every run. The signal state the process inherited (SIGINT ignored or
blocked) is set by the test and restored after it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from rich.console import Console
from rich.file_proxy import FileProxy
from rich.live import Live

from mcpq.client import Task
from mcpq.ops.cli import call_follow, call_output

TASK_ID = "task-1"
#: Reads before the scripted task completes by itself: a Ctrl-C that never reaches the loop
#: shows as a completed task (exit 0) rather than a hang.
COMPLETES_AFTER = 12


def press_ctrl_c() -> None:
    """The terminal's SIGINT, as `mcpq call`'s main thread receives it (its other threads start
    with the main thread's signal mask, so a blocked SIGINT stays pending for it)."""
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


class ScriptedTask:
    """A task that works (``pollIntervalMs`` 50) until it is cancelled, then reads
    ``cancelled``; ``press_on`` presses Ctrl-C while the n-th request of a kind is in flight."""

    def __init__(self, press_on: dict[str, set[int]], status: str = "working") -> None:
        self.press_on = press_on
        self.status = status
        self.requests: Counter[str] = Counter()

    def handle(self, method: str) -> Task | None:
        self.requests[method] += 1
        if self.requests[method] in self.press_on.get(method, set()):
            press_ctrl_c()
        if method == "cancel":
            self.status = "cancelled"
            return None
        if method == "get" and self.requests["get"] >= COMPLETES_AFTER:
            self.status = "completed"
        return self.read()

    def read(self) -> Task:
        body: dict[str, Any] = {"taskId": TASK_ID, "status": self.status, "pollIntervalMs": 50}
        if self.status == "completed":
            body["result"] = {"content": [{"type": "text", "text": "done"}]}
        if self.status == "input_required":
            params = {"message": "Go?", "requestedSchema": {"type": "object", "properties": {}}}
            body["inputRequests"] = {"q": {"method": "elicitation/create", "params": params}}
        return Task.model_validate(body)


class InlinePortal:
    """The blocking portal's entry points, each call run at once on the calling thread."""

    def __init__(self, task: ScriptedTask) -> None:
        self.task = task

    def start_task_soon(self, func: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(self.task.handle(func.__name__))
        return future

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        return self.start_task_soon(func, *args).result()


def follow(task: ScriptedTask, screen: io.StringIO | None = None) -> int:
    """`follow` on the scripted task; a Ctrl-C that escapes it fails the test (rather than
    stopping the test run)."""
    terminal = screen is not None
    ui = Console(file=screen or io.StringIO(), force_terminal=terminal, highlight=False, width=80)
    args = argparse.Namespace(output="json", sampling_command=None)
    try:
        return call_follow.follow(InlinePortal(task), None, ui, TASK_ID, args)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C escaped the follow loop")


def printed_object(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    body = json.loads(capsys.readouterr().out)
    assert isinstance(body, dict)
    return body


@pytest.fixture(autouse=True)
def sigint_state() -> Iterator[None]:
    """Python's own SIGINT handler, unblocked; whatever the test changes is put back."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield
    # Ignoring discards a press still pending (a regression): it must fail one test, not
    # interrupt the test run.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    signal.signal(signal.SIGINT, handler)


@pytest.fixture
def stdin_on(request: pytest.FixtureRequest) -> Iterator[None]:
    """fd 0 on a pseudo-terminal (``"tty"``) or on /dev/null (``"null"``) for the test."""
    saved = os.dup(0)
    if request.param == "tty":
        master, replacement = os.openpty()
    else:
        master, replacement = -1, os.open(os.devnull, os.O_RDONLY)
    os.dup2(replacement, 0)
    yield
    os.dup2(saved, 0)
    for fd in (saved, replacement, master):
        if fd >= 0:
            os.close(fd)


def test_first_ctrl_c_cancels_and_the_loop_waits_for_cancelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    task = ScriptedTask(press_on={"get": {2}})
    screen = io.StringIO()
    assert follow(task, screen) == call_output.EXIT_CANCELLED
    assert task.requests["cancel"] == 1
    assert "cancelling the task… (Ctrl-C again to detach)" in screen.getvalue()
    assert printed_object(capsys) == {
        "status": "cancelled",
        "taskId": TASK_ID,
        "statusMessage": None,
    }
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_second_ctrl_c_while_the_cancel_is_sent_detaches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The old loop handled the first press in an ``except KeyboardInterrupt`` block; a second
    press landing there, while ``tasks/cancel`` was in flight, escaped it: no detach, no taskId."""
    task = ScriptedTask(press_on={"get": {2}, "cancel": {1}})
    assert follow(task) == call_output.EXIT_DETACHED
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"taskId": TASK_ID, "status": "detached"}
    assert f"detached; the task goes on: {TASK_ID}" in captured.err


def test_ctrl_c_reaches_the_loop_when_sigint_was_blocked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A blocked SIGINT survives exec and Python never unblocks it: the press stayed pending
    while the task ran to its end."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    task = ScriptedTask(press_on={"get": {2}})
    assert follow(task) == call_output.EXIT_CANCELLED
    assert printed_object(capsys)["status"] == "cancelled"
    assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # blocked again
    assert signal.SIGINT not in signal.sigpending()


@pytest.mark.parametrize("stdin_on", ["tty"], indirect=True)
@pytest.mark.usefixtures("stdin_on")
def test_ctrl_c_reaches_the_loop_when_a_launcher_left_sigint_ignored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An ignored SIGINT survives exec and Python leaves it ignored (a launcher that ignores
    SIGINT while its child runs; a test run started in the background by a shell)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    task = ScriptedTask(press_on={"get": {2}})
    assert follow(task) == call_output.EXIT_CANCELLED
    assert printed_object(capsys)["status"] == "cancelled"
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


@pytest.mark.parametrize("stdin_on", ["null"], indirect=True)
@pytest.mark.usefixtures("stdin_on")
def test_a_background_job_keeps_sigint_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    """SIGINT ignored and stdin on /dev/null: how a shell without job control starts ``cmd &``;
    the terminal's Ctrl-C is for the foreground job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    task = ScriptedTask(press_on={"get": {2}})
    assert follow(task) == call_output.EXIT_COMPLETED
    assert task.requests["cancel"] == 0
    assert printed_object(capsys)["status"] == "completed"


def test_ctrl_c_in_a_prompt_interrupts_it_and_cancels(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def prompt_left_waiting(ui: Console, params: object) -> object:
        press_ctrl_c()
        time.sleep(10)  # a line that never comes: only the press can end the prompt
        raise AssertionError("the prompt was not interrupted")

    monkeypatch.setattr(call_follow, "ask_form", prompt_left_waiting)
    task = ScriptedTask(press_on={}, status="input_required")
    began = time.monotonic()
    assert follow(task) == call_output.EXIT_CANCELLED
    assert time.monotonic() - began < 5
    assert task.requests == Counter({"get": 2, "cancel": 1})
    assert printed_object(capsys)["status"] == "cancelled"


def test_the_terminal_is_restored_when_ctrl_c_lands_as_the_display_stops(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old loop let ``KeyboardInterrupt`` land inside rich's ``Live.stop``, which then left
    the cursor hidden and stdout redirected to the live display."""
    stop = Live.stop

    def stop_as_ctrl_c_is_pressed(live: Live) -> None:
        press_ctrl_c()
        stop(live)

    monkeypatch.setattr(Live, "stop", stop_as_ctrl_c_is_pressed)
    screen = io.StringIO()
    assert follow(ScriptedTask(press_on={}), screen) == call_output.EXIT_COMPLETED
    shown = screen.getvalue()
    assert shown.rfind("\x1b[?25h") > shown.rfind("\x1b[?25l")  # the cursor shown again
    assert not isinstance(sys.stdout, FileProxy)
    assert printed_object(capsys)["status"] == "completed"
