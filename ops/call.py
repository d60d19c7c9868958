"""``mcpq call TOOL`` and ``mcpq task get|watch|answer|cancel TASK_ID``: a terminal client.

Built on :mod:`mcpq.client` (the ``client`` extra: the ``mcp`` SDK and ``rich``). The SDK is
async; the terminal is not: the SDK client lives on an event loop in a background thread (an
anyio blocking portal) and this module's main thread drives the conversation, so every prompt
reads the terminal from the main thread. While a task is followed, Ctrl-C is SIGINT taken by
:class:`ops.call_interrupts.CtrlC` (counted by its handler and read by the loop, so no press is
lost to the frame it lands in or to a launcher that left SIGINT ignored): the first Ctrl-C
cancels the task and waits for it to read ``cancelled``, even in a prompt; a second one detaches
and prints the taskId. Before the task exists, Ctrl-C is a plain ``KeyboardInterrupt`` (130).

Exit codes (``EXIT_*``): 0 completed, 1 the tool reported an error (``isError``), 2 usage, 3 the
task failed, 4 cancelled, 5 the server could not be reached or refused the request, 130
detached by a second Ctrl-C (the task goes on).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ops.call_interrupts import TICK_S, CtrlC
from ops.call_prompts import UsageError, ask_form, ask_sampling

if TYPE_CHECKING:
    import mcp_types as types
    from anyio.from_thread import BlockingPortal
    from mcp import Client
    from rich.console import Console

    from mcpq.client import Task
    from shared.settings import Settings

T = TypeVar("T")

EXIT_COMPLETED = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_UNREACHABLE = 5
EXIT_DETACHED = 130
_STATUS_EXIT = {"completed": EXIT_COMPLETED, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}


def add_parsers(sub: Any) -> None:
    """Register ``call`` and ``task`` on `mcpq`'s sub-parsers."""
    call = sub.add_parser("call", help="call a tool as a task and follow it (a terminal client)")
    call.add_argument("tool", help="the tool's name (see tools/list)")
    call.add_argument(
        "arguments", nargs="*", metavar="key=value", help="arguments, typed by the tool's schema"
    )
    call.add_argument("--json", dest="json_args", metavar="ARGS", help="arguments as JSON")
    call.add_argument("--detach", action="store_true", help="print the taskId at once and exit")
    call.add_argument(
        "--sampling-command",
        metavar="CMD",
        help="answer sampling requests with this command (the prompt on its stdin, the answer "
        "on its stdout) instead of asking",
    )
    _common(call)

    task = sub.add_parser("task", help="get, watch, answer or cancel a task by its taskId")
    task_sub = task.add_subparsers(dest="task_command", required=True, metavar="ACTION")
    for name, text in (
        ("get", "print the task (status, message, result)"),
        ("watch", "follow the task to its end, answering its questions"),
        ("answer", "answer the task's outstanding questions once"),
        ("cancel", "cancel the task"),
    ):
        action = task_sub.add_parser(name, help=text)
        # (An id with a leading '-', which mcpq no longer hands out, goes after `--`.)
        action.add_argument(
            "task_id", metavar="TASK_ID", help="the taskId (after -- if it starts with -)"
        )
        if name in {"watch", "answer"}:
            action.add_argument("--sampling-command", metavar="CMD")
        _common(action)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the MCP endpoint (default: $MCPQ_URL or the local dev one)")
    parser.add_argument("--token", help="bearer token (default: $MCPQ_TOKEN)")
    parser.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: one object on stdout"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """``mcpq call`` / ``mcpq task``; returns the exit status."""
    try:
        from mcp import MCPError  # the `client` extra
        from rich.console import Console
    except ImportError as exc:
        print(
            f"mcpq {args.command}: needs the client extra ({exc.name} missing): "
            "pip install 'mcpq[client]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    ui = Console(stderr=True, highlight=False)
    where = args.url or settings.client_url
    try:
        with _connected(where, args.token or settings.client_token, ui, args) as (portal, client):
            if args.command == "call":
                return _call(portal, client, ui, args)
            return _task(portal, client, ui, args)
    except KeyboardInterrupt:
        print(f"mcpq {args.command}: interrupted", file=sys.stderr)
        return EXIT_DETACHED
    except Exception as exc:  # the portal may wrap it in an exception group
        return _failure(args.command, where, _leaf(exc), MCPError)


def _failure(command: str, where: str, exc: BaseException, mcp_error: type[Exception]) -> int:
    """One line, never a traceback: a bad argument (2); an error the server answered, or an
    unreachable server, TLS, a broken proxy (5)."""
    if isinstance(exc, UsageError):
        print(f"mcpq {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, mcp_error):
        error = exc.error  # type: ignore[attr-defined]
        print(f"mcpq {command}: {error.message} (code {error.code})", file=sys.stderr)
        return EXIT_UNREACHABLE
    print(f"mcpq {command}: {where}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_UNREACHABLE


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def _connected(
    url: str, token: str, ui: Console, args: argparse.Namespace
) -> Iterator[tuple[BlockingPortal, Client]]:
    from anyio.from_thread import start_blocking_portal

    from mcpq import client as tasks

    command = getattr(args, "sampling_command", None)

    # Only MRTR rounds before a task exists reach these (on the loop thread, while the main
    # thread waits for `start`); a task's own questions are asked by the main thread.
    async def on_input(params: types.ElicitRequestParams) -> types.ElicitResult:
        return ask_form(ui, params)

    async def on_sampling(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return ask_sampling(ui, params, command)

    with start_blocking_portal() as portal:
        connection = tasks.connect(
            url,
            token=token or None,
            on_input=on_input,
            on_sampling=on_sampling,
            client_name="mcpq-cli",
        )
        with portal.wrap_async_context_manager(connection) as client:
            yield portal, client


# -- mcpq call ---------------------------------------------------------------------------------
def _call(portal: BlockingPortal, client: Client, ui: Console, args: argparse.Namespace) -> int:
    import mcp_types as types

    from mcpq import client as tasks

    listed = portal.call(client.list_tools)
    tool = next((t for t in listed.tools if t.name == args.tool), None)
    if tool is None:
        raise UsageError(f"no tool {args.tool!r} on this server")
    arguments = parse_arguments(args.arguments, args.json_args, tool.input_schema)
    started = portal.call(tasks.start, client, args.tool, arguments)
    if isinstance(started, types.CallToolResult):  # a tool that never runs as a task
        return _print_result(None, "completed", started, args.output)
    if args.detach:
        _emit(args.output, {"taskId": started.task_id, "status": started.status}, started.task_id)
        return EXIT_COMPLETED
    return _follow(portal, client, ui, started.task_id, args)


def parse_arguments(
    pairs: list[str], raw_json: str | None, schema: Mapping[str, Any]
) -> dict[str, Any]:
    """``key=value`` pairs typed by the tool's input schema (integers, numbers, booleans, JSON
    for objects and arrays; strings as typed), over ``--json``'s object."""
    arguments: dict[str, Any] = {}
    if raw_json is not None:
        try:
            arguments = json.loads(raw_json)
        except ValueError as exc:
            raise UsageError(f"--json: not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise UsageError("--json: must be a JSON object")
    properties = schema.get("properties") or {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected key=value, got {pair!r}")
        arguments[key] = _typed(key, value, properties.get(key) or {})
    return arguments


_TRUE, _FALSE = {"true", "yes", "y", "1", "on"}, {"false", "no", "n", "0", "off"}


def _typed(key: str, value: str, prop: Mapping[str, Any]) -> Any:
    kinds = prop.get("type")
    if kinds is None and isinstance(prop.get("anyOf"), list):
        kinds = [p.get("type") for p in prop["anyOf"] if isinstance(p, dict)]
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if "string" in kinds:
        return value
    try:
        if "integer" in kinds:
            return int(value)
        if "number" in kinds:
            return float(value)
    except ValueError:
        raise UsageError(f"{key}: expected a number, got {value!r}") from None
    if "boolean" in kinds:
        if value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise UsageError(f"{key}: expected true or false, got {value!r}")
    if kinds & {"object", "array"}:
        try:
            return json.loads(value)
        except ValueError:
            raise UsageError(f"{key}: expected JSON, got {value!r}") from None
    return value  # not in the schema: the server says what it wants


# -- following a task --------------------------------------------------------------------------
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


def _follow(
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
            _emit(self.args.output, {"taskId": self.task_id, "status": "detached"}, self.task_id)
            return EXIT_DETACHED
        return _print_result(task, task.status, task.call_tool_result(), self.args.output)

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
                asked = _answer(self.portal, self.client, self.ui, task, self.answered, self.args)
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


def _answer(
    portal: BlockingPortal,
    client: Client,
    ui: Console,
    task: Task,
    answered: set[str],
    args: argparse.Namespace,
) -> set[str]:
    """Ask the task's outstanding questions in the terminal and send the answers."""
    import mcp_types as types

    from mcpq import client as tasks

    responses: types.InputResponses = {}
    for key, request in (task.input_requests or {}).items():
        if key in answered:
            continue
        if isinstance(request, types.ElicitRequest):
            responses[key] = ask_form(ui, request.params)
        elif isinstance(request, types.CreateMessageRequest):
            responses[key] = ask_sampling(ui, request.params, args.sampling_command)
        else:
            raise UsageError(f"the task asks for {request.method}, which this client cannot answer")
    if responses:
        portal.call(tasks.update, client, task.task_id, responses)
    return set(responses)


# -- mcpq task ---------------------------------------------------------------------------------
def _task(portal: BlockingPortal, client: Client, ui: Console, args: argparse.Namespace) -> int:
    from mcpq import client as tasks

    task_id = args.task_id
    if args.task_command == "watch":
        return _follow(portal, client, ui, task_id, args)
    if args.task_command == "cancel":
        portal.call(tasks.cancel, client, task_id)
    task = portal.call(tasks.get, client, task_id)
    if args.task_command == "answer":
        if task.status != "input_required":
            ui.print(f"nothing to answer: the task is {task.status}")
        else:
            count = len(_answer(portal, client, ui, task, set(), args))
            ui.print(f"answered {count}")
            task = portal.call(tasks.get, client, task_id)
    return _print_result(task, task.status, task.call_tool_result(), args.output)


# -- output ------------------------------------------------------------------------------------
def _print_result(
    task: Task | None, status: str, result: types.CallToolResult | None, output: str
) -> int:
    """The outcome on stdout (text, or one JSON object); the exit status it means."""
    import mcp_types as types

    code = _STATUS_EXIT.get(status, EXIT_COMPLETED)
    if result is not None and result.is_error:
        code = EXIT_TOOL_ERROR
    if output == "json":
        body: dict[str, Any] = {"status": status}
        if task is not None:
            body["taskId"] = task.task_id
            body["statusMessage"] = task.status_message
            if task.error is not None:
                body["error"] = task.error
        if result is not None:
            body["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        print(json.dumps(body))
        return code
    if result is not None:
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        shown = "\n".join(texts) if texts else json.dumps(result.structured_content)
        print(shown, file=sys.stderr if result.is_error else sys.stdout)
    elif task is not None and not task.done:
        message = f": {task.status_message}" if task.status_message else ""
        print(f"{task.status}{message}")
    elif task is not None:
        error = (task.error or {}).get("message") or task.status_message or ""
        print(f"task {status}" + (f": {error}" if error else ""), file=sys.stderr)
    return code


def _emit(output: str, body: Mapping[str, Any], text: str) -> None:
    print(json.dumps(dict(body)) if output == "json" else text)
