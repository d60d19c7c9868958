"""Following one task of ``mcpq call`` / ``mcpq task watch`` to its end in the terminal.

The loop polls ``tasks/get`` at the task's ``pollIntervalMs``, shows a live status line on a
terminal, and asks the task's questions when it reads ``input_required`` (a prompt reads the
terminal from the main thread; the SDK client runs on the blocking portal's event loop). While a
task is followed, Ctrl-C is SIGINT taken by :class:`ops.cli.call_interrupts.CtrlC` (counted by its
handler and read by the loop, so no press is lost to the frame it lands in or to a launcher that
left SIGINT ignored): the first Ctrl-C cancels the task and waits for it to read ``cancelled``,
even in a prompt; a second one detaches and prints the taskId.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from mcpq.ops.cli.call_interrupts import TICK_S, CtrlC
from mcpq.ops.cli.call_output import EXIT_DETACHED, print_result, print_task_id
from mcpq.ops.cli.call_prompts import UsageError, ask_form, ask_sampling

if TYPE_CHECKING:
    import mcp_types as types
    from anyio.from_thread import BlockingPortal
    from mcp import Client
    from rich.console import Console

    from mcpq.client import Task

T = TypeVar("T")


class _StatusLine:
    """The live status line (rich's spinner and text) on a terminal; nothing elsewhere, so a
    script's stderr gets no redraw noise. Stopped while a prompt owns the terminal."""

    def __init__(self, ui: Console) -> None:
        self._status = ui.status("starting…") if ui.is_terminal else None

    def show(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    def start(self) -> None:
        if self._status is not None:
            self._status.start()

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()


def follow(
    portal: BlockingPortal, client: Client, ui: Console, task_id: str, args: argparse.Namespace
) -> int:
    """Poll to the end, answering questions; Ctrl-C cancels, a second one detaches."""
    with CtrlC() as ctrl_c:
        return _Follower(portal, client, ui, task_id, args, ctrl_c).run()


class _Follower:
    """Follows one task. Ctrl-C is read as a count (:class:`CtrlC`), between steps: the first
    press sends ``tasks/cancel`` and goes on polling until the task reads ``cancelled``; the
    second detaches, whatever the loop was doing when it came."""

    def __init__(
        self,
        portal: BlockingPortal,
        client: Client,
        ui: Console,
        task_id: str,
        args: argparse.Namespace,
        ctrl_c: CtrlC,
    ) -> None:
        self.portal, self.client, self.ui = portal, client, ui
        self.task_id, self.args, self.ctrl_c = task_id, args, ctrl_c
        self.line = _StatusLine(ui)
        self.began = time.monotonic()
        self.answered: set[str] = set()
        self.cancelling = False

    def run(self) -> int:
        self.line.start()
        try:
            task = self._until_done()
        finally:
            self.line.stop()
        if task is None:
            print(f"detached; the task goes on: {self.task_id}", file=sys.stderr)
            print_task_id(self.args.output, self.task_id, "detached")
            return EXIT_DETACHED
        return print_result(task, task.status, task.call_tool_result(), self.args.output)

    def _until_done(self) -> Task | None:
        """The task's last read, or ``None`` once a second Ctrl-C detaches."""
        from mcpq import client as tasks

        while self.ctrl_c.presses < 2:
            if self.ctrl_c.presses and not self.cancelling:
                self._cancel()
                continue
            task = self._request(tasks.get)
            if task is None:  # Ctrl-C while reading: the loop's top acts on it
                continue
            if task.done:
                return task
            if task.status == "input_required" and not self.cancelling:
                self._answer(task)
            else:
                self._pause(task)
        return None

    def _cancel(self) -> None:
        from mcpq import client as tasks

        self.cancelling = True
        self.line.stop()
        self.ui.print("cancelling the task… (Ctrl-C again to detach)")
        self.line.start()
        self._request(tasks.cancel)

    def _request(self, method: Callable[[Client, str], Awaitable[T]]) -> T | None:
        """``method(client, task_id)`` on the event loop; ``None`` if Ctrl-C comes first."""
        return self.ctrl_c.wait(self.portal.start_task_soon(method, self.client, self.task_id))

    def _answer(self, task: Task) -> None:
        """Ask the task's questions; a prompt waits for a line, so Ctrl-C interrupts it by
        raising (the press is counted all the same, and the loop cancels)."""
        self.line.stop()
        try:
            with self.ctrl_c.raising():
                asked = answer_questions(
                    self.portal, self.client, self.ui, task, self.answered, self.args
                )
            self.answered |= asked
        except KeyboardInterrupt:
            pass
        finally:
            self.line.start()

    def _pause(self, task: Task) -> None:
        """Show the status line until the next poll is due, or until Ctrl-C is pressed."""
        from mcpq import client as tasks

        pause = max((task.poll_interval_ms or 1000) / 1000, tasks.MIN_POLL_S)
        deadline = time.monotonic() + pause
        presses = self.ctrl_c.presses
        while (now := time.monotonic()) < deadline and self.ctrl_c.presses == presses:
            self.line.show(_status_line(task, now - self.began, self.cancelling))
            time.sleep(min(TICK_S, deadline - now))


def _status_line(task: Task, elapsed: float, cancelling: bool) -> str:
    from rich.markup import escape

    state = "cancelling" if cancelling else task.status
    message = f" — {escape(task.status_message)}" if task.status_message else ""
    return f"[bold]{state}[/bold]{message} [dim]{elapsed:.0f}s[/dim]"


def answer_questions(
    portal: BlockingPortal,
    client: Client,
    ui: Console,
    task: Task,
    answered: set[str],
    args: argparse.Namespace,
) -> set[str]:
    """Ask the task's outstanding questions in the terminal (forms filled from ``--answer``
    first) and send the answers."""
    import mcp_types as types

    from mcpq import client as tasks

    given = getattr(args, "answers", None)
    responses: types.InputResponses = {}
    for key, request in (task.input_requests or {}).items():
        if key in answered:
            continue
        if isinstance(request, types.ElicitRequest):
            responses[key] = (
                ask_form(ui, request.params, given) if given else ask_form(ui, request.params)
            )
        elif isinstance(request, types.CreateMessageRequest):
            responses[key] = ask_sampling(ui, request.params, args.sampling_command)
        else:
            raise UsageError(f"the task asks for {request.method}, which this client cannot answer")
    if responses:
        portal.call(tasks.update, client, task.task_id, responses)
    return set(responses)
